"""Contradictions between current documents: two documents that state a different value for the same named thing
("handbook.md says 10 MB, upload-limits.md says 25 MB") become items of the curation queue.

A value statement is a sentence with a number and its unit ("10 MB", "30 days", "49 euros", "20%"), read with the
answer verifier's number reading (knowledge/claims.py). The thing it names is the sentence's other content words, once
the words any such statement uses (limit, lasts, within, costs…) are set aside. Two statements conflict when they
name the same thing (the same words, or one's a subset of the other's with at most one extra word on the longer
side), in the same unit, with different values. Measured on a written set (bench/conflicts.py, bench/data/
conflicts.jsonl): precision is what decides whether it runs, recall is what it misses.

When a version lands, its statements are compared with the statements of the current documents the lexical
search finds for each (knowledge.search, the tenant's documents in force); each new conflict is one Conflict row.
The scan follows the documents' history (DocumentEvent) with a watermark, a few documents a pass, after the
indexer drains (feedback/apps.py), so a large load never holds up indexing.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from knowledge.claims import fold, number_value

logger = logging.getLogger(__name__)

SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
# a number, then its unit: "10 MB", "30 days", "49 euros", "20%", "€49"
VALUE_RE = re.compile(
    r"(?P<pre>[€$£])?\s?(?P<number>(?<![\w.])\d[\d_,.]*\d|(?<![\w.])\d)(?![\w.]\d)\s?(?P<unit>%|[a-zA-Zñáéíóú]+)?",
)
UNITS = {
    "kb": "kb", "kib": "kb", "mb": "mb", "mib": "mb", "megabyte": "mb", "megabytes": "mb", "gb": "gb", "gib": "gb",
    "gigabyte": "gb", "gigabytes": "gb", "tb": "tb", "%": "percent", "percent": "percent", "por": "",
    "second": "second", "seconds": "second", "segundo": "second", "segundos": "second", "s": "second",
    "minute": "minute", "minutes": "minute", "minuto": "minute", "minutos": "minute", "min": "minute",
    "hour": "hour", "hours": "hour", "hora": "hour", "horas": "hour", "h": "hour",
    "day": "day", "days": "day", "dia": "day", "dias": "day",
    "week": "week", "weeks": "week", "semana": "week", "semanas": "week",
    "month": "month", "months": "month", "mes": "month", "meses": "month",
    "year": "year", "years": "year", "ano": "year", "anos": "year",
    "euro": "eur", "euros": "eur", "eur": "eur", "€": "eur", "dollar": "usd", "dollars": "usd", "usd": "usd",
    "$": "usd", "£": "gbp", "character": "character", "characters": "character", "caracteres": "character",
    "request": "request", "requests": "request", "file": "file", "files": "file", "user": "user", "users": "user",
    "seat": "seat", "seats": "seat",
}  # fmt: skip
QUALIFIED_UNITS = ("day", "week", "month", "year", "hour", "minute")  # "working days" ≠ "calendar days"
PER_RE = re.compile(r"^\s*(?:per|a|an|each|every|por|al|a la)\s+(\w+)")
# Words any value statement may use whatever it is about: they never tell two things apart.
GENERIC = set(
    """
    a an the is are was were be been being it its this that these those there of to in on at by for from with as
    and or not no any all each every per than then so can may might must should will would shall do does up down
    over under within after before about around into only just also still more most less least at least up to
    limit limited limits maximum max minimum min size largest smallest total upto
    last lasts lasted take takes took keep kept keeps retain retained retains hold holds stored store stores
    get gets got give gives given include includes included allow allows allowed accept accepted accepts
    cost costs price priced pay paid due need needs needed require requires required have has had
    answer answers answered reply replies replied respond responds send sends sent ship ships shipped
    customer customers user users client clients people someone anyone
    el la los las un una unos unas de del en por para con sin es son esta estan ser que y o al lo se su sus
    dura duran tiene tienen plazo maximo minimo hasta desde cada
    """.split()
)  # fmt: skip
WORD_RE = re.compile(r"[a-z][a-z0-9_-]+")


@dataclass(frozen=True)
class Statement:
    value: float
    unit: str
    terms: frozenset[str]  # what it is about
    sentence: str
    shown: str  # the value as written ("25 MB")


def _stem(word: str) -> str:
    """Plural and common suffixes folded, so refund/refunds and upload/uploads/uploaded meet."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def statements(text: str) -> list[Statement]:
    """Every value with a known unit in the text, with the words of its sentence that say what it is about."""
    found = []
    for sentence in SENTENCE_RE.split(text):
        sentence = sentence.strip()
        if not sentence or len(sentence) > 400:
            continue
        folded = fold(sentence)
        for match in VALUE_RE.finditer(folded):
            value = number_value(match.group("number"))
            raw_unit = (match.group("pre") or match.group("unit") or "").lower()
            unit = UNITS.get(raw_unit, "")
            if value is None or not unit:
                continue
            if unit in QUALIFIED_UNITS:  # "3 working days", "30 calendar days"
                before = folded[match.end() :]
                per = PER_RE.match(before)
                if per and per.group(1) in UNITS:
                    unit = f"{unit}/{UNITS[per.group(1)]}"
            elif (per := PER_RE.match(folded[match.end() :])) is not None:  # "100 requests per minute", "49 € a month"
                unit = f"{unit}/{UNITS.get(per.group(1), _stem(per.group(1)))}"
            rest = folded[: match.start()] + " " + folded[match.end() :]
            terms = frozenset(
                _stem(w) for w in WORD_RE.findall(rest) if w not in GENERIC and w not in UNITS and len(w) > 1
            ) - {_stem(w) for w in unit.split("/")}
            # as written ("25 MB"), where folding kept the sentence's length (no accents to drop)
            written = sentence[match.start() : match.end()] if len(folded) == len(sentence) else match.group(0)
            found.append(Statement(value=value, unit=unit, terms=terms, sentence=sentence, shown=written.strip()))
    return found


def conflicting(a: Statement, b: Statement) -> bool:
    """Same thing, same unit, different value. The same thing: the same words once generic ones are set aside,
    or one's words inside the other's with a single word more (a restatement names the thing more fully)."""
    if a.unit != b.unit or a.value == b.value or not a.terms or not b.terms:
        return False
    if " ".join(a.sentence.split()).casefold() == " ".join(b.sentence.split()).casefold():
        return False  # one sentence's two values ("42 EUR in Spain and 70 EUR abroad"), or a note quoting another
    small, large = sorted((a.terms, b.terms), key=len)
    return small <= large and len(large - small) <= 1


def first_conflict(text_a: str, text_b: str) -> tuple[Statement, Statement] | None:
    for a in statements(text_a):
        for b in statements(text_b):
            if conflicting(a, b):
                return a, b
    return None


# --- the scan -----------------------------------------------------------------------------------------------------
SCAN_BUDGET_S = 2.0  # per pass after a drain
CANDIDATES = 8  # chunks of other documents the lexical search returns per statement


def scan_pending(*, budget_s: float = SCAN_BUDGET_S) -> int:
    """Compare the versions that landed since the last scan with the current documents; returns how many new
    conflicts were queued. Safe to call any time (the watermark is per tenant, advanced as documents are read)."""
    from feedback.models import ConflictScan
    from knowledge.models import DocumentEvent

    started, queued = time.monotonic(), 0
    landed = DocumentEvent.objects.filter(kind__in=[DocumentEvent.Kind.ADDED, DocumentEvent.Kind.CHANGED])
    for scan in _scans():
        events = landed.filter(tenant_id=scan.tenant_id, pk__gt=scan.last_event_id).order_by("pk")
        for event in events.select_related("document", "document__tenant")[:200]:
            try:
                queued += scan_document(event.document)
            except Exception:  # one document that cannot be compared never stops the scan
                logger.exception("Comparing %s with the current documents failed", event.document)
            ConflictScan.objects.filter(pk=scan.pk).update(last_event_id=event.pk)
            if time.monotonic() - started > budget_s:
                return queued
    return queued


def _scans() -> list[Any]:
    from feedback.models import ConflictScan
    from knowledge.models import DocumentEvent

    tenants = set(DocumentEvent.objects.values_list("tenant_id", flat=True).distinct())
    known = {s.tenant_id for s in ConflictScan.objects.filter(tenant_id__in=tenants)}
    for tenant_id in tenants - known:
        ConflictScan.objects.get_or_create(tenant_id=tenant_id)
    return list(ConflictScan.objects.filter(tenant_id__in=tenants))


def scan_document(document: Any) -> int:
    """Queue a Conflict for each current document that states a different value for a thing this one names."""
    from django.utils import timezone

    from feedback.models import Conflict
    from knowledge import validity
    from knowledge.models import Status
    from knowledge.search.retrieval import RetrieveFilters, retrieve_single_leg
    from tenants.principals import Viewer

    if document.status != Status.ACTIVE or document.pk in validity.superseded_at(document.tenant, timezone.now()):
        return 0  # a document its successor replaced says what used to be true, on purpose
    lineage = validity.lineages(document.tenant)
    viewer = Viewer.everything(document.tenant)
    mine = [(chunk, s) for chunk in document.chunks.filter(status=Status.ACTIVE) for s in statements(chunk.text)]
    queued = 0
    for chunk, statement in mine[:50]:
        hits = retrieve_single_leg(viewer=viewer, query=statement.sentence, top_k=CANDIDATES, leg="lexical",
                                   filters=RetrieveFilters())  # fmt: skip
        for hit in hits:
            other = hit.chunk.document
            if other.pk == document.pk or validity.same_lineage(lineage, document.pk, other.pk):
                continue  # a document and one it replaces (or that replaces it, at any distance) differ on purpose
            for theirs in statements(hit.chunk.text):
                if conflicting(statement, theirs):
                    _, created = Conflict.objects.get_or_create(
                        tenant_id=document.tenant_id, document=document, other=other, subject=" ".join(
                            sorted(statement.terms)), value=statement.shown[:100], other_value=theirs.shown[:100],
                        defaults={"sentence": statement.sentence[:1000], "other_sentence": theirs.sentence[:1000],
                                  "chunk": chunk, "other_chunk": hit.chunk},
                    )  # fmt: skip
                    queued += int(created)
    return queued


# --- the queue --------------------------------------------------------------------------------------------------
RESOLUTIONS = {
    "dismiss": "Not a contradiction",
    "retire_document": "Retired {document}",
    "retire_other": "Retired {other}",
    "document_supersedes": "{document} supersedes {other}",
    "other_supersedes": "{other} supersedes {document}",
}


class ConflictRefused(ValueError):
    pass


def open_conflicts(*, viewer: Any) -> Any:
    """The open conflicts between two live documents the viewer sees (a retired or hidden side closes nothing, it
    only leaves the list), less those between documents one supersedes the other of, at any distance (declared
    after the conflict was found: the declaration answers it)."""
    from feedback.models import Conflict
    from knowledge import selectors, validity
    from knowledge.models import Status

    visible = selectors.visible_documents(viewer).filter(status=Status.ACTIVE)
    found = Conflict.objects.for_tenant(viewer.tenant).filter(
        state=Conflict.State.OPEN, document__in=visible, other__in=visible
    )  # fmt: skip
    lineage = validity.lineages(viewer.tenant)
    if lineage:
        pairs = found.filter(document_id__in=list(lineage)).values_list("pk", "document_id", "other_id")
        found = found.exclude(pk__in=[pk for pk, one, other in pairs if validity.same_lineage(lineage, one, other)])
    return found.select_related("document", "other")


def conflict_resolve(*, viewer: Any, conflict: Any, action: str, actor: str) -> None:
    """One click: dismiss it, retire one side, or say which side supersedes the other; recorded (who, when)."""
    from django.utils import timezone

    from feedback.models import Conflict
    from knowledge import selectors, services, validity

    if action not in RESOLUTIONS:
        raise ConflictRefused(f"action: use one of {', '.join(RESOLUTIONS)}.")
    tenant = viewer.tenant
    document, other = conflict.document, conflict.other
    if action in ("retire_document", "retire_other"):
        target = document if action == "retire_document" else other
        services.documents_retire(tenant=tenant, documents=selectors.document_rows(viewer=viewer, document=target),
                                  actor=actor)  # fmt: skip
    elif action in ("document_supersedes", "other_supersedes"):
        newer, older = (document, other) if action == "document_supersedes" else (other, document)
        try:
            services.document_set_validity(tenant=tenant, document=newer, changes={"supersedes": str(older.public_id)},
                                           actor=actor)  # fmt: skip
        except validity.InvalidValidity as exc:
            raise ConflictRefused(str(exc)) from exc
    state = Conflict.State.DISMISSED if action == "dismiss" else Conflict.State.RESOLVED
    Conflict.objects.filter(pk=conflict.pk).update(
        state=state, resolved_by=actor, resolved_at=timezone.now(),
        resolution=RESOLUTIONS[action].format(document=document.display_key, other=other.display_key),
    )  # fmt: skip
