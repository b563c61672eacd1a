"""What changed in what a session holds, found from the documents' own state and history — versions, retirement,
validity and supersession (knowledge/validity.py decides both), access — against what the session was last told of
each document (SessionDocument); never from a model. Each change is a SessionChange, read through a cursor."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Case, F, Q, Value, When
from django.utils import timezone

from agent_sessions.models import AgentSession, SessionChange, SessionDelivery, SessionDocument
from core.problems import DomainError
from knowledge import validity
from knowledge.models import Chunk, Status, readers_match
from knowledge.selectors import visible_documents
from tenants.principals import Viewer

Kind = SessionChange.Kind


# --- what changed in it ------------------------------------------------------------------------------------------
@dataclass
class _Told:
    """What the session was last told of a document (a SessionDocument row, read as values)."""

    pk: int
    document: int | None
    document_id: str
    version: int
    retired: bool
    expired: bool
    superseded_by: int | None
    available: bool
    older: bool

    def state(self) -> tuple[int, bool, bool, int | None, bool, bool]:
        return self.version, self.retired, self.expired, self.superseded_by, self.available, self.older


def _seen(viewer: Viewer, session: AgentSession) -> Case:
    """Whether the caller may see a session row's document: the one rule (knowledge.models.readers_match)."""
    visible = readers_match(viewer, path="document__") & Q(document__tenant=session.tenant, document__isnull=False)
    return Case(When(visible, then=Value(True)), default=Value(False), output_field=BooleanField())


def _anything_changed(session: AgentSession, viewer: Viewer, today: dt.date) -> bool:
    """Whether any document of the session is not what the session was last told — what detect() asks on every
    call, in three indexed queries that return no row when nothing changed, so that a call pays for the session's
    rows in SQL, not in Python: a row whose document's version, retirement, expiry or access to this caller differs
    from the row's; and the successors in force today against the ones the session was told of. The ORM compiles
    these queries in about 1.5 ms, ten times what SQLite takes to run them (200 documents): they are compiled once
    per session, caller's principals and day, and run as compiled."""
    key = (session.pk, session.tenant_id, viewer.principals, today)
    compiled = _CHANGE_QUERIES.get(key)
    if compiled is None:
        compiled = [q.query.sql_with_params() for q in _change_queries(session, viewer, today)]
        if len(_CHANGE_QUERIES) >= 4096:
            _CHANGE_QUERIES.clear()
        _CHANGE_QUERIES[key] = compiled
    (differ_sql, differ_params), (live_sql, live_params), (was_sql, was_params) = compiled
    with connection.cursor() as cursor:
        cursor.execute(differ_sql, differ_params)
        if cursor.fetchone() is not None:
            return True
        cursor.execute(live_sql, live_params)
        now: dict[int, int] = {}
        for predecessor, successor in cursor.fetchall():
            now.setdefault(predecessor, successor)
        cursor.execute(was_sql, was_params)
        return now != dict(cursor.fetchall())


_CHANGE_QUERIES: dict[tuple[Any, ...], list[tuple[str, tuple[Any, ...]]]] = {}


def _change_queries(session: AgentSession, viewer: Viewer, today: dt.date) -> list[Any]:
    """The three queries of _anything_changed: rows that differ (at most one), live successors in force today
    (predecessor, successor), successors the session was told of (document, successor)."""
    told = SessionDocument.objects.filter(session=session)
    retired, expired = Q(document__status=Status.RETIRED), validity.expired_filter(today, path="document__")
    differs = (
        Q(available=True, seen=False)
        | Q(available=False, seen=True)
        | Q(seen=True)
        & (
            ~Q(version=F("document__version"))
            | Q(retired=True) & ~retired
            | Q(retired=False) & retired
            | Q(expired=False) & expired
            | Q(expired=True) & ~expired
        )
    )
    live = validity.live_successors(told.values("document"), today)
    return [
        told.annotate(seen=_seen(viewer, session)).filter(differs).values_list("pk")[:1],
        live.order_by("pk").values_list("supersedes_id", "pk"),
        told.filter(superseded_by__isnull=False).values_list("document_id", "superseded_by"),
    ]


def detect(session: AgentSession, viewer: Viewer) -> None:
    """Record each change to a document the session holds since the session was last told of it: a new version
    (`changed`), retired, expired, superseded by a document in force, or no longer visible to this caller. It runs
    on every call of the session: one query when nothing changed (_anything_changed), else each row beside its
    document as it is now, whether this caller may see it and its live successor in force today."""
    now = timezone.now()
    if not _anything_changed(session, viewer, timezone.localdate(now)):
        return
    fields = (
        "pk",
        "document_id",
        "document_id_text",
        "version",
        "retired",
        "expired",
        "superseded_by",
        "available",
        "older",
    )
    rows: list[_Told] = []
    documents: dict[int, tuple[int, str, dt.date | None]] = {}
    now_fields = ("document__version", "document__status", "document__valid_until", "seen")
    told = SessionDocument.objects.filter(session=session).annotate(seen=_seen(viewer, session))
    for values in told.values_list(*fields, *now_fields):
        row = _Told(*values[: len(fields)])
        rows.append(row)
        version, status, valid_until, visible = values[len(fields) :]
        if row.document is not None and visible:
            documents[row.document] = (version, status, valid_until)
    in_force = validity.successors_in_force(list(documents), session.tenant, now)
    successors = {pk: successor for pk, (successor, _) in in_force.items()}
    today = timezone.localdate(now)
    named = dict(visible_documents(viewer).filter(pk__in=list(successors.values())).values_list("pk", "document_id"))
    found: list[SessionChange] = []
    held: dict[str, list[tuple[str, str]]] | None = None

    def chunks_held() -> dict[str, list[tuple[str, str]]]:
        nonlocal held
        if held is None:
            held = {}
            for document_id, chunk_id, content_hash in (
                SessionDelivery.objects.filter(session=session)
                .values_list("document_id_text", "chunk_id", "content_hash")
                .order_by("pk")
            ):
                held.setdefault(document_id, []).append((chunk_id, content_hash))
        return held

    def change(row: _Told, kind: str, **detail: Any) -> None:
        found.append(
            SessionChange(
                tenant_id=session.tenant_id,
                session=session,
                kind=kind,
                document_id_text=row.document_id,
                at=now,
                detail=detail,
            )
        )

    for row in rows:
        before = row.state()
        current = documents.get(row.document) if row.document else None
        if current is None:
            if row.available:
                ids = list(dict.fromkeys(c for c, _h in chunks_held().get(row.document_id, [])))
                change(row, Kind.NO_LONGER_AVAILABLE, chunk_ids=ids)
                row.available = False
        else:
            version, status, valid_until = current
            successor = successors.get(row.document or 0)
            retired, expired = status == Status.RETIRED, validity.expired(valid_until, today)
            if not row.available:  # visible again: what it is now is what the session knows (it was told it went)
                row.available, row.version, row.retired, row.expired = True, version, retired, expired
                row.superseded_by = successor
            if version > row.version:
                change(
                    row,
                    Kind.CHANGED,
                    old_version=row.version,
                    new_version=version,
                    chunks=_moved(row.document or 0, version, chunks_held().get(row.document_id, [])),
                )
                row.version, row.older = version, True
            if retired and not row.retired:
                change(row, Kind.RETIRED, version=version)
            if expired and not row.expired:
                change(row, Kind.EXPIRED, valid_until=validity.iso_date(valid_until))
            if successor is not None and successor != row.superseded_by:
                change(row, Kind.SUPERSEDED, superseded_by=named.get(successor))  # None: the caller may not see it
            row.retired, row.expired, row.superseded_by = retired, expired, successor
        if row.state() != before:
            SessionDocument.objects.filter(pk=row.pk).update(
                version=row.version,
                retired=row.retired,
                expired=row.expired,
                superseded_by=row.superseded_by,
                available=row.available,
                older=row.older,
            )
    SessionChange.objects.bulk_create(found)
    if found:
        latest = SessionChange.objects.filter(session=session).order_by("-pk").values_list("pk", flat=True)[0]
        AgentSession.objects.filter(pk=session.pk, latest_change__lt=latest).update(latest_change=latest)
        session.latest_change = max(session.latest_change, latest)


def _moved(document: int, version: int, held: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """For each chunk the session holds of the document: the chunk ids of its current version that hold its text
    now (none: its text was edited or removed)."""
    hashes = {content_hash for _c, content_hash in held}
    now: dict[str, list[str]] = {}
    current = Chunk.objects.filter(document_id=document, document_version__version=version, content_hash__in=hashes)
    for chunk_id, content_hash in current.values_list("chunk_id", "content_hash"):
        now.setdefault(content_hash, []).append(chunk_id)
    return [{"chunk_id": chunk_id, "now_in": sorted(now.get(content_hash, []))} for chunk_id, content_hash in held]


def unread_changes(session: AgentSession) -> int:
    if session.latest_change <= session.changes_read:
        return 0  # nothing found since the last read: no query
    return SessionChange.objects.filter(session=session, pk__gt=session.changes_read).count()


def change_shape(change: SessionChange) -> dict[str, Any]:
    item: dict[str, Any] = {"cursor": str(change.pk), "at": change.at.isoformat(), "kind": change.kind}
    if change.kind == Kind.NO_LONGER_AVAILABLE:  # nothing but the chunk ids the agent holds
        return {**item, "chunk_ids": change.detail.get("chunk_ids", [])}
    if change.kind == Kind.ANSWER:  # an answer given in the session was recalled (chat/recall.py): its notice
        return {**item, **change.detail}
    return {**item, "document_id": change.document_id_text, **change.detail}


class BadSessionCursor(DomainError, ValueError):
    status, code = 400, "bad_cursor"


def changes_page(session: AgentSession, viewer: Viewer, *, cursor: str = "", limit: int = 100) -> dict[str, Any]:
    """The changes after `cursor` (none: the ones not read yet), oldest first; they count as read."""
    detect(session, viewer)
    if cursor:
        if not cursor.isdigit() or len(cursor) > 18:
            raise BadSessionCursor(f"cursor: {cursor[:40]!r} is not a cursor of this session's changes.")
        after = int(cursor)
    else:
        after = session.changes_read
    limit = max(1, min(int(limit), 500))
    page = list(SessionChange.objects.filter(session=session, pk__gt=after).order_by("pk")[: limit + 1])
    more, page = len(page) > limit, page[:limit]
    if page and page[-1].pk > session.changes_read:
        AgentSession.objects.filter(pk=session.pk, changes_read__lt=page[-1].pk).update(changes_read=page[-1].pk)
        session.changes_read = page[-1].pk
    return {
        "changes": [change_shape(c) for c in page],
        "next_cursor": str(page[-1].pk) if page else str(after),
        "has_more": more,
        "memory_changes": unread_changes(session),
    }
