"""An answer's receipt: who asked and by which door, the question, the model, every document version it read, each
claim with the evidence sentences it was verified against — and, computed when read, what each claim's evidence is
now. Built from the answer's record (chat/records.py), which every door keeps; decided from the history, never by a
model.

A claim's `now` is the worst of its evidence's states, in this order:
- `no_longer_available`: the asker may no longer see the document (or it is gone) — nothing more is said;
- `retired`: the document was retired;
- `superseded`: a document in force now supersedes it;
- `expired`: its validity ended;
- `changed`: a later version no longer holds the evidence sentence (`changed_to` gives the sentence that now stands
  where it stood, when one still states a value);
- `unchanged`: the version it read is still served, or a later one still holds the sentence word for word (an edit
  elsewhere in the document never changes a claim).
A claim with no evidence (nothing to check) is `unchanged`.

Only the asker (their membership, or the API key that asked) and the tenant's admins may read a receipt; anyone else
is told it does not exist. Visibility now is the asker's, whoever reads the receipt."""

from __future__ import annotations

import re
from typing import Any

from django.utils import timezone

from chat import records
from chat.models import AnswerRecord
from knowledge import selectors, validity
from knowledge.models import Chunk, Document, DocumentVersion, Status
from tenants.models import Membership
from tenants.principals import Viewer, viewer_for

STATES = ("unchanged", "changed", "expired", "superseded", "retired", "no_longer_available")  # worst last
NUMBER_RE = re.compile(r"\d[\d.,]*")


def may_read(record: AnswerRecord, viewer: Viewer, *, user: Any = None, api_key: Any = None) -> bool:
    """The asker (the same member, or the same key) or a tenant admin; everyone else is told it does not exist."""
    if record.tenant_id != viewer.tenant.pk:
        return False
    if api_key is not None:
        return record.api_key_id == api_key.pk
    if user is not None and record.user_id == user.pk:
        return True
    return (
        user is not None
        and Membership.objects.filter(tenant=viewer.tenant, user=user, role=Membership.Role.ADMIN).exists()
    )


def may_read_all(viewer: Viewer, user: Any) -> bool:
    """A tenant admin reads every receipt of the tenant."""
    return Membership.objects.filter(tenant=viewer.tenant, user=user, role=Membership.Role.ADMIN).exists()


def asker_viewer(record: AnswerRecord) -> Viewer | None:
    """Who the asker is now (None: gone — their account or key no longer reads anything here)."""
    if record.api_key is not None:
        if not record.api_key.is_active:
            return None
        return viewer_for(tenant=record.tenant, api_key=record.api_key)
    if record.user is None or not record.user.is_active:
        return None
    membership = Membership.objects.filter(tenant=record.tenant, user=record.user).first()
    return viewer_for(tenant=record.tenant, membership=membership) if membership is not None else None


def receipt(record: AnswerRecord, reader: Viewer) -> dict[str, Any]:
    """The receipt as `reader` may read it now (chat/records.py masks what rests on documents it can no longer see:
    the asker reading their own receipt is told nothing more of those than "no longer available"), with each claim's
    state now for the asker, as the asker is now."""
    citations = {int(c["n"]): c for c in record.citations if isinstance(c, dict) and "n" in c}
    states = _Evidence(record, asker_viewer(record), citations, settled=_settled(record))
    then = _Then(record, citations)
    text, shown_citations, shown_claims = records.masked_for(
        reader, text=record.answer, citations=record.citations, claims=record.claims
    )
    shown = {int(c["n"]): c for c in shown_citations if isinstance(c, dict) and "n" in c}
    claims = []
    for index, (claim, masked) in enumerate(zip(record.claims, shown_claims, strict=True)):
        now, detail = states.claim(claim)
        evidence = [
            {"n": q.get("n"), "sentence": str(q.get("text", "")), **_cited(shown.get(int(q.get("n", 0))))}
            for q in masked.get("quotes", [])
            if isinstance(q, dict)
        ]
        row = {"index": index, "text": masked.get("text", ""), "supported": claim.get("supported")}
        if masked.get("hidden"):
            claims.append({**row, "citations": [], "evidence": [], "now": "no_longer_available"})
            continue
        shown_claim = {"citations": claim.get("citations", []), "evidence": evidence, "now": now, **detail}
        claims.append({**row, **shown_claim, "then": then.claim(claim)})
    read = (record.index_state or {}).get("documents", {})
    visible = set(
        selectors.visible_documents(reader).filter(document_id__in=list(read)).values_list("document_id", flat=True)
    )
    return {
        "answer_id": str(record.public_id),
        "asked_at": record.created_at.isoformat(),
        "asked_by": record.by_name,
        "door": record.channel,
        "question": record.question,
        "answer": text,
        "status": record.status,
        "generated": record.generated,
        "model": record.model,
        "asked_with": _asked_with(record, reader),
        "computed": record.computed,
        "recalled_at": record.recalled_at.isoformat() if record.recalled_at else None,
        "documents_read": [{"document_id": d, "version": v} for d, v in sorted(read.items()) if d in visible],
        "citations": shown_citations,
        "claims": claims,
        "checked_at": timezone.now().isoformat(),
    }


def claim_states(record: AnswerRecord, *, now: Any = None) -> list[tuple[str, dict[str, Any]]]:
    """Each claim's state now for its asker, as the receipt computes it, less what was already so when the answer was
    given (a document superseded or expired then: an answer about last year cites last year's policy on purpose).
    The recall scan flags with exactly this."""
    citations = {int(c["n"]): c for c in record.citations if isinstance(c, dict) and "n" in c}
    states = _Evidence(record, asker_viewer(record), citations, now=now, settled=_settled(record))
    return [states.claim(claim) for claim in record.claims]


def _settled(record: AnswerRecord) -> set[int]:
    """The cited documents already superseded or expired when the answer was given (records.answer_record)."""
    return set(record.grounds.filter(settled=True).values_list("document_id", flat=True))


def worst(states: list[tuple[str, dict[str, Any]]]) -> str:
    return max((state for state, _ in states), key=STATES.index, default="unchanged")


def _asked_with(record: AnswerRecord, reader: Viewer) -> dict[str, Any]:
    """How it was asked; the asker's principals then only for an admin (a member reads their own answer's settings)."""
    asked = dict(record.asked or {})
    if not reader.sees_all:
        asked.pop("principals", None)
    if record.agent_session_id is not None:
        asked["session"] = str(record.agent_session.public_id) if record.agent_session else None
    return asked


def export_lines(records_: Any, reader: Viewer) -> Any:
    """Receipts as JSON lines (an auditor's export), one per answer, oldest first, each as `reader` may read it."""
    import json

    for record in records_.order_by("created_at", "pk").select_related("user", "api_key", "tenant").iterator(500):
        yield json.dumps(receipt(record, reader), ensure_ascii=False, default=str) + "\n"


def _cited(citation: dict[str, Any] | None) -> dict[str, Any]:
    if not citation:
        return {}
    keys = ("document_id", "document_key", "title", "version", "chunk_id", "page", "lines")
    return {key: citation[key] for key in keys if key in citation}


class _Evidence:
    """Each cited document's state now, read once for the receipt."""

    def __init__(
        self,
        record: AnswerRecord,
        asker: Viewer | None,
        citations: dict[int, dict[str, Any]],
        *,
        now: Any = None,
        settled: set[int] | None = None,
    ):
        now = now or timezone.now()
        self.settled = settled or set()  # documents superseded or expired already when the answer was given
        self.citations = citations
        ids = {str(c.get("document_id")) for c in citations.values() if c.get("document_id")}
        every = Document.objects.filter(tenant_id=record.tenant_id, document_id__in=ids)
        self.documents = {d.document_id: d for d in every}
        seen = selectors.visible_documents(asker).filter(pk__in=[d.pk for d in every]) if asker is not None else []
        self.visible = {d.document_id for d in seen}
        in_force = validity.successors_in_force([d.pk for d in every], record.tenant, now)
        self.superseded = {pk: document_id for pk, (_successor, document_id) in in_force.items()}
        named = Document.objects.none()
        if asker is not None:
            named = selectors.visible_documents(asker).filter(document_id__in=list(self.superseded.values()))
        self.named = set(named.values_list("document_id", flat=True))
        served = DocumentVersion.objects.filter(document__in=every, status=Status.ACTIVE)
        self.served = {v.document_id: v for v in served.prefetch_related("chunks")}
        self.today = timezone.localdate(now)

    def state(self, citation: dict[str, Any] | None, sentence: str) -> tuple[str, dict[str, Any]]:
        if not citation:
            return "unchanged", {}
        document = self.documents.get(str(citation.get("document_id")))
        if document is None or document.document_id not in self.visible:
            return "no_longer_available", {}
        if document.status == Status.RETIRED:
            return "retired", {}
        until = document.valid_until
        expired = until is not None and until < self.today
        if document.pk in self.settled:  # superseded or expired when it was asked: only a change since counts
            already = {"already": "superseded" if document.pk in self.superseded else "expired"}
        elif document.pk in self.superseded:
            by = self.superseded[document.pk]
            return "superseded", {"superseded_by": by} if by in self.named else {}
        elif expired and until is not None:
            return "expired", {"valid_until": until.isoformat()}
        else:
            already = {}
        if int(citation.get("version") or 0) == document.version or not sentence:
            return "unchanged", already
        version = self.served.get(document.pk)
        text = " ".join(chunk.text for chunk in version.chunks.all()) if version is not None else ""
        if _normal(sentence) in _normal(text):
            return "unchanged", {"version_now": document.version, **already}
        return "changed", {"version_now": document.version, **_changed_to(sentence, text), **already}

    def claim(self, claim: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        worst: str = "unchanged"
        detail: dict[str, Any] = {}
        for quote in claim.get("quotes", []):
            if not isinstance(quote, dict):
                continue
            state, more = self.state(self.citations.get(int(quote.get("n", 0))), str(quote.get("text", "")))
            if STATES.index(state) > STATES.index(worst) or (state == worst and not detail):
                worst, detail = state, more
        if not claim.get("quotes"):
            for n in claim.get("citations", []):
                state, more = self.state(self.citations.get(int(n)), "")
                if STATES.index(state) > STATES.index(worst) or (state == worst and not detail):
                    worst, detail = state, more
        return worst, detail


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _changed_to(sentence: str, text: str) -> dict[str, Any]:
    """The sentence of the new version that stands where the old one stood: the one sharing most of its words, when it
    still states a value (a number); whether the old sentence's values are still in it."""
    words = set(re.findall(r"\w+", sentence.casefold()))
    best, overlap = "", 0.0
    for candidate in re.split(r"(?<=[.!?])\s+|\n+", text):
        if not NUMBER_RE.search(candidate):
            continue
        shared = len(words & set(re.findall(r"\w+", candidate.casefold()))) / max(len(words), 1)
        if shared > overlap:
            best, overlap = candidate.strip(), shared
    if overlap < 0.5:
        return {}
    values = set(NUMBER_RE.findall(sentence))
    return {"changed_to": best, "still_holds": values <= set(NUMBER_RE.findall(best))}


class _Then:
    """Was each claim true the day it was given? Its evidence sentences are looked for in the version of each cited
    document served at that moment (the cited one when the history has no other), and that version's validity must
    cover the moment: `held`, `not_in_version` (the sentence is not in it) or `not_in_force` (it was not valid
    then); `no_evidence` for a claim verified against no sentence. Only versions' own text and windows decide."""

    def __init__(self, record: AnswerRecord, citations: dict[int, dict[str, Any]]):
        self.at = record.created_at
        self.citations = citations
        wanted = {(str(c.get("document_id")), int(c.get("version") or 0)) for c in citations.values()}
        ids = {document_id for document_id, _ in wanted}
        versions = DocumentVersion.objects.filter(tenant_id=record.tenant_id, document__document_id__in=ids)
        self.versions: dict[tuple[str, int], DocumentVersion] = {}
        self.served: dict[str, DocumentVersion] = {}
        for version in versions.select_related("document").only(
            "version", "valid_from", "valid_until", "served_from", "served_until", "document__document_id"
        ):
            document_id = version.document.document_id
            self.versions[(document_id, version.version)] = version
            began = version.served_from is None or version.served_from <= self.at
            if began and (version.served_until is None or self.at < version.served_until):
                self.served.setdefault(document_id, version)
        self.texts: dict[int, str] = {}

    def _text(self, version: DocumentVersion) -> str:
        if version.pk not in self.texts:
            chunks = Chunk.objects.filter(document_version=version).order_by("index").values_list("text", flat=True)
            self.texts[version.pk] = " ".join(chunks)
        return self.texts[version.pk]

    def claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        checked = False
        for quote in claim.get("quotes", []):
            citation = self.citations.get(int(quote.get("n", 0))) if isinstance(quote, dict) else None
            if not citation:
                continue
            document_id = str(citation.get("document_id"))
            version = self.served.get(document_id) or self.versions.get(
                (document_id, int(citation.get("version") or 0))
            )
            if version is None:
                return {"state": "not_in_version"}
            if _normal(str(quote.get("text", ""))) not in _normal(self._text(version)):
                return {"state": "not_in_version", "version": version.version}
            if not validity.covers(version.valid_from, version.valid_until, self.at):
                return {"state": "not_in_force", "version": version.version}
            checked = True
        return {"state": "held" if checked else "no_evidence"}
