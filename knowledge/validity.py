"""When a document is true: the rules of validity, supersession, review and as-of reads, in one place.

A document is in force on the days from `valid_from` through `valid_until` (either open), unless a document in
force supersedes it. Its status at an instant (today, or an `as_of`):
- `not_yet_valid`: before `valid_from`;
- `expired`: after `valid_until`;
- `superseded`: a document in force then supersedes it;
- `review_due`: in force, but past `review_by` (served, and said so);
- `current`: in force.
Reads serve `current` and `review_due` by default. An as-of read serves, of each document, the version that was
served at that instant (the first version for an instant older than it: nothing older is known), under the same
rules with the version's own window. The vector query carries the rules as payload conditions (vectorstore.py):
a point's `valid_from`/`valid_until` and `served_from`/`served_until` (epoch seconds, null: open) and the
documents superseded at that instant (few: each is a curated link). docs/validity.md has an example timeline.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

from django.db.models import Q
from django.utils import timezone

from knowledge.models import Document, DocumentVersion, Status, readers_match
from tenants.principals import Viewer

FIELDS = ("valid_from", "valid_until", "review_by")
STATUSES = ("current", "review_due", "expired", "superseded", "not_yet_valid")
SERVED = ("current", "review_due")  # what a read returns unless it asks for the others


class InvalidValidity(ValueError):
    """A date that is not one, a window that ends before it starts, a `supersedes` that names nothing or loops."""


# --- dates and instants ----------------------------------------------------------------------------------------
def parse_date(value: Any, *, field: str) -> dt.date | None:
    """An ISO 8601 date (a datetime's date part is taken); None and "" clear it."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    text = str(value).strip()
    try:
        return dt.date.fromisoformat(text[:10]) if len(text) > 10 and text[10] in "T " else dt.date.fromisoformat(text)
    except ValueError:
        raise InvalidValidity(f"{field}: {text!r} is not a date (YYYY-MM-DD).") from None


def parse_instant(value: Any, *, field: str = "as_of") -> dt.datetime:
    """An `as_of`: a datetime (naive: the server's time zone), or a date, meaning the end of that day."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        return day_start(value + dt.timedelta(days=1)) - dt.timedelta(microseconds=1)
    else:
        text = str(value or "").strip()
        if len(text) == 10:
            return parse_instant(parse_date(text, field=field), field=field)
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidValidity(f"{field}: {text!r} is not an ISO 8601 date or datetime.") from None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def day_start(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))


def epoch(moment: dt.datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def window_bounds(valid_from: dt.date | None, valid_until: dt.date | None) -> tuple[float | None, float | None]:
    """The validity window as the payload holds it: [start of valid_from, start of the day after valid_until)."""
    start = epoch(day_start(valid_from)) if valid_from else None
    end = epoch(day_start(valid_until + dt.timedelta(days=1))) if valid_until else None
    return start, end


def check_window(valid_from: dt.date | None, valid_until: dt.date | None) -> None:
    if valid_from and valid_until and valid_until < valid_from:
        raise InvalidValidity(f"valid_until ({valid_until}) is before valid_from ({valid_from}).")


def covers(valid_from: dt.date | None, valid_until: dt.date | None, at: dt.datetime) -> bool:
    start, end = window_bounds(valid_from, valid_until)
    moment = at.timestamp()
    return (start is None or start <= moment) and (end is None or moment < end)


def expired(valid_until: dt.date | None, today: dt.date) -> bool:
    """Whether a document whose validity ends `valid_until` is past it on `today` (its last day is still in force)."""
    return valid_until is not None and valid_until < today


def expired_filter(today: dt.date, *, path: str = "") -> Q:
    """Rows (documents, or through `path` another row's) of documents past their validity on `today`."""
    return Q(**{f"{path}valid_until__lt": today})


def window_filter(today: dt.date, *, path: str = "") -> Q:
    """Rows of documents whose stated window covers `today` (supersession aside: `Clock.in_force` adds it)."""
    return (Q(**{f"{path}valid_from__isnull": True}) | Q(**{f"{path}valid_from__lte": today})) & (
        Q(**{f"{path}valid_until__isnull": True}) | Q(**{f"{path}valid_until__gte": today})
    )


def successors_in_force(pks: list[int], tenant: Any, at: dt.datetime) -> dict[int, tuple[int, str]]:
    """Document pk → (pk, document_id) of the live document in force at `at` that supersedes it, the first made."""
    found: dict[int, tuple[int, str]] = {}
    live = Document.objects.for_tenant(tenant).filter(supersedes_id__in=pks, status=Status.ACTIVE).order_by("pk")
    rows = live.values_list("pk", "supersedes_id", "document_id", "valid_from", "valid_until")
    for pk, supersedes, document_id, valid_from, valid_until in rows:
        if covers(valid_from, valid_until, at):
            found.setdefault(supersedes, (pk, document_id))
    return found


def live_successors(predecessors: Any, today: dt.date) -> Any:
    """The live documents in force on `today` that supersede one of `predecessors` (a queryset of document pks)."""
    live = Document.objects.filter(supersedes__in=predecessors, status=Status.ACTIVE)
    return live.filter(window_filter(today))


# --- what the vector payload carries ----------------------------------------------------------------------------
def version_payload(version: DocumentVersion, *, first: bool) -> dict[str, float | None]:
    """The validity and serving window of a version's points. The first version served is open to the past."""
    start, end = window_bounds(version.valid_from, version.valid_until)
    return {
        "valid_from": start,
        "valid_until": end,
        "served_from": None if first else epoch(version.served_from),
        "served_until": epoch(version.served_until),
    }


def supersession_payload(document: Document) -> dict[str, float | None]:
    """When a live document superseding this one is in force (the start of its window: 0 when open; its end): the
    points carry it, and a read now leaves them out while that window covers now."""
    successor = (
        Document.objects.filter(supersedes_id=document.pk, status=Status.ACTIVE)
        .order_by("valid_from", "pk")
        .only("valid_from", "valid_until")
        .first()
    )
    if successor is None:
        return {"superseded_from": None, "superseded_until": None}
    start, end = window_bounds(successor.valid_from, successor.valid_until)
    return {"superseded_from": 0.0 if start is None else start, "superseded_until": end}


def first_served(document: Document) -> int | None:
    """The number of the document's first version that was ever served."""
    return (
        document.versions.filter(
            Q(status__in=[Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED]) | Q(historical=True, status=Status.PENDING)
        )  # imported history, being indexed
        .order_by("version")
        .values_list("version", flat=True)
        .first()
    )


# --- supersession ---------------------------------------------------------------------------------------------
def _in_force(document: Document, at: dt.datetime, retired_at: dt.datetime | None) -> bool:
    if not covers(document.valid_from, document.valid_until, at):
        return False
    if document.status == Status.ACTIVE:
        return True
    return document.status == Status.RETIRED and retired_at is not None and at < retired_at


def superseded_at(tenant: Any, at: dt.datetime, *, as_of: bool = False) -> dict[int, Document]:
    """Document pk → the document in force at `at` that supersedes it. Now: only live successors count; as of an
    instant, one retired since counts too."""
    statuses = [Status.ACTIVE, Status.RETIRED] if as_of else [Status.ACTIVE]
    successors = list(
        Document.objects.for_tenant(tenant)
        .filter(supersedes__isnull=False, status__in=statuses)
        .select_related("source", "supersedes")
    )
    retired_at: dict[int, dt.datetime | None] = {}
    if as_of:
        for document_pk, until in DocumentVersion.objects.filter(
            document__in=[s for s in successors if s.status == Status.RETIRED], status=Status.RETIRED
        ).values_list("document_id", "served_until"):
            retired_at[document_pk] = until
    found: dict[int, Document] = {}
    for successor in successors:
        if successor.supersedes_id and _in_force(successor, at, retired_at.get(successor.pk)):
            found.setdefault(successor.supersedes_id, successor)
    return found


def lineages(tenant: Any) -> dict[int, int]:
    """Document pk → the id of its supersession lineage: documents joined by `supersedes`, in either direction and at
    any distance along the chain, share one (a document that supersedes nothing and is superseded by nothing is in
    none). Two documents of one lineage differ on purpose: a contradiction between them is not one."""
    parent: dict[int, int] = {}

    def root(pk: int) -> int:
        while parent.setdefault(pk, pk) != pk:
            parent[pk] = parent[parent[pk]]
            pk = parent[pk]
        return pk

    edges = Document.objects.for_tenant(tenant).filter(supersedes__isnull=False).values_list("pk", "supersedes_id")
    for newer, older in edges:
        parent[root(newer)] = root(older)
    return {pk: root(pk) for pk in list(parent)}


def same_lineage(lineage: dict[int, int], one: int, other: int) -> bool:
    return one in lineage and lineage.get(one) == lineage.get(other)


def resolve_reference(document: Document, ref: str, viewer: Viewer | None = None) -> Document:
    """The document `ref` names (its id, document id, or key in its own source, then in the tenant's others) among
    those the writer may see; raises InvalidValidity when it names nothing, the document itself, or would close a
    loop. A document the writer may not see answers exactly like none. The writer is `viewer` (a request's caller),
    else the document's own readers (a file that states `supersedes`: an open file re-points only open documents)."""
    from knowledge import ids

    ref = str(ref or "").strip()
    viewer = viewer or Viewer(document.tenant, frozenset(document.reader_list))
    tenant_docs = (
        Document.objects.for_tenant(document.tenant).filter(readers_match(viewer)).exclude(status=Status.FAILED)
    )
    target = None
    try:
        target = tenant_docs.filter(public_id=uuid.UUID(ref)).first()
    except ValueError:
        pass
    if target is None:
        target = tenant_docs.filter(document_id=ref).first()
    if target is None:
        try:
            key = ids.normalise_document_key(ref)
        except ids.InvalidIdentifier:
            key = ""
        if key:
            target = tenant_docs.filter(source_id=document.source_id, document_key=key).first()
            if target is None:
                elsewhere = list(tenant_docs.filter(document_key=key)[:2])
                target = elsewhere[0] if len(elsewhere) == 1 else None
    if target is None:
        raise InvalidValidity(f"supersedes: {ref!r} names no document of this tenant.")
    if target.pk == document.pk:
        raise InvalidValidity("supersedes: a document cannot supersede itself.")
    seen: set[int] = {document.pk}
    step: Document | None = target
    while step is not None and step.supersedes_id is not None:
        if step.supersedes_id in seen:
            raise InvalidValidity(f"supersedes: {ref!r} already leads back to this document (a cycle).")
        seen.add(step.pk)
        step = Document.objects.filter(pk=step.supersedes_id).first()
    return target


# --- freshness ------------------------------------------------------------------------------------------------
class Freshness(TypedDict):
    status: str
    valid_from: str | None
    valid_until: str | None
    review_by: str | None
    changed_at: str | None
    superseded_by: str | None  # the successor's document id, when the reader may see it


NOT_IN_FORCE = {"superseded": "superseded", "expired": "expired", "not_yet_valid": "not yet valid"}


def in_force_label(freshness: Freshness | None) -> str:
    """What a page shows beside a live document's status when it is not in force today ("superseded"), else ""."""
    return NOT_IN_FORCE.get(freshness["status"] if freshness else "", "")


def iso_date(value: dt.date | dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def status_of(*, valid_from: dt.date | None, valid_until: dt.date | None, review_by: dt.date | None,
              superseded: bool, at: dt.datetime) -> str:  # fmt: skip
    start, end = window_bounds(valid_from, valid_until)
    moment = at.timestamp()
    if start is not None and moment < start:
        return "not_yet_valid"
    if end is not None and moment >= end:
        return "expired"
    if superseded:
        return "superseded"
    if review_by is not None and timezone.localdate(at) > review_by:
        return "review_due"
    return "current"


@dataclass
class Clock:
    """The instant a read is about (now, or its as_of) and the documents superseded then (pk → successor)."""

    tenant: Any
    at: dt.datetime
    as_of: bool
    _superseded: dict[int, Document] | None = None

    @classmethod
    def for_read(cls, tenant: Any, as_of: dt.datetime | None = None) -> Clock:
        return cls(tenant=tenant, at=as_of or timezone.now(), as_of=as_of is not None)

    @property
    def superseded(self) -> dict[int, Document]:
        """Read once, when first needed: a read now whose hits are in force by construction never needs it."""
        if self._superseded is None:
            self._superseded = superseded_at(self.tenant, self.at, as_of=self.as_of)
        return self._superseded

    def in_force(self, *, path: str = "") -> Q:
        """Rows (documents, or through `path` chunks) of documents in force at the instant, for reads made in SQL."""
        day = timezone.localdate(self.at)
        return window_filter(day, path=path) & ~Q(**{f"{path}pk__in": list(self.superseded)})

    def rules_apply(self) -> bool:
        """Whether any document of the tenant has a window or supersedes another (the partial index
        document_validity): if none does, a read now needs no validity condition at all, and runs as before."""
        return (
            Document.objects.for_tenant(self.tenant)
            .filter(Q(valid_from__isnull=False) | Q(valid_until__isnull=False) | Q(supersedes__isnull=False))
            .exists()
        )

    def unsynced_out_of_force_ids(self) -> list[str]:
        """Documents out of force now whose points' payloads have not caught up yet (a change of seconds ago,
        `needs_sync`): the vector query leaves them out by id until the indexer has written their windows."""
        pending = list(
            Document.objects.for_tenant(self.tenant).filter(needs_sync=True, status=Status.ACTIVE).order_by()
            .values_list("pk", "document_id", "valid_from", "valid_until")[:1000]
        )  # fmt: skip
        if not pending:
            return []
        outside = {key for _, key, start, end in pending if not covers(start, end, self.at)}
        return sorted(outside | {key for pk, key, _, _ in pending if pk in self.superseded})

    def superseded_ids(self) -> list[str]:
        """The document ids of the documents superseded at the instant (the vector query leaves them out)."""
        return sorted(s.supersedes.document_id for s in self.superseded.values() if s.supersedes)

    def freshness(self, document: Document, version: DocumentVersion | None = None, *,
                  sees: Any = None, in_force: bool = False) -> Freshness:  # fmt: skip
        """The freshness of a document as served by `version` (its window; default: the document's own). `in_force`:
        the read served only documents in force now, so none is superseded (no need to read who supersedes whom)."""
        window = version if version is not None and (version.valid_from or version.valid_until) else document
        successor = None if in_force else self.superseded.get(document.pk)
        changed = (version.served_from if version is not None else None) or document.content_changed_at
        visible = successor is not None and (sees is None or sees(successor.reader_list))
        return {
            "status": status_of(
                valid_from=window.valid_from,
                valid_until=window.valid_until,
                review_by=document.review_by,
                superseded=successor is not None,
                at=self.at,
            ),  # fmt: skip
            "valid_from": iso_date(window.valid_from),
            "valid_until": iso_date(window.valid_until),
            "review_by": iso_date(document.review_by),
            "changed_at": iso_date(changed),
            "superseded_by": successor.document_id if visible and successor is not None else None,
        }


MAX_PROBLEM_CHARS = 500  # one recorded problem (it quotes the file's value)
MAX_PROBLEMS = 10
MAX_REF_CHARS = 1900  # Document.supersedes_ref


# --- what a file states ------------------------------------------------------------------------------------------
def stated_values(metadata: dict[str, Any]) -> dict[str, Any]:
    """The validity a file states (frontmatter, Office properties), checked: {field: ISO date or ref, "problems": […]}.
    A value that is not a date is left out and named in `problems`, never silently dropped."""
    lowered = {str(k).strip().lower().replace("-", "_"): v for k, v in metadata.items()}
    stated: dict[str, Any] = {}
    problems: list[str] = []
    for name in FIELDS:
        if name in lowered and lowered[name] not in (None, ""):
            try:
                stated[name] = iso_date(parse_date(lowered[name], field=name))
            except InvalidValidity as exc:
                problems.append(str(exc))
    if "valid_from" in stated and "valid_until" in stated:
        try:
            check_window(dt.date.fromisoformat(stated["valid_from"]), dt.date.fromisoformat(stated["valid_until"]))
        except InvalidValidity as exc:
            problems.append(f"{exc} Neither date was applied.")
            del stated["valid_from"], stated["valid_until"]
    ref = lowered.get("supersedes")
    if isinstance(ref, list | tuple):
        ref = ref[0] if len(ref) == 1 else None
        if ref is None:
            problems.append("supersedes: name one document.")
    if ref not in (None, ""):
        stated["supersedes"] = str(ref).strip()[:MAX_REF_CHARS]
    if problems:  # each quotes the file: cut, and a few at most
        stated["problems"] = [p if len(p) <= MAX_PROBLEM_CHARS else p[: MAX_PROBLEM_CHARS - 1] + "…"
                              for p in problems[:MAX_PROBLEMS]]  # fmt: skip
    return stated


def review_due_filter(today: dt.date) -> Q:
    """Documents past their review date or their validity (the review list)."""
    return Q(review_by__lt=today) | Q(valid_until__lt=today)
