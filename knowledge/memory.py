"""Agent sessions: a base pack, then reads that bring only what is new, and word when what was given stops being true.

A session (knowledge.models.AgentSession) belongs to the API key or the user that made it; anyone else is told it
does not exist. Every call in it is decided with the caller's principals at that call (the viewer of the request),
so a key that loses a group loses it inside its sessions too. The ledger (SessionDelivery) is every chunk the
session was given, matched by chunk id and text: an unchanged chunk of a newer version is still held, an edited one
is new. Its changes (SessionChange) are found from the documents' own state and history — versions, retirement,
validity, supersession, access — against what the session was last told of each document (SessionDocument);
never from a model.

Tokens are counted the same way everywhere (`count_tokens`): a word or a punctuation mark is a token, and a text is
never counted at less than a quarter of its characters. It is an estimate of what a chat model's tokenizer makes of
the text (the agent's own model is not known here), on the high side for English prose.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField, Case, F, Q, Value, When
from django.utils import timezone

from core.problems import DomainError
from knowledge import validity
from knowledge.models import (
    AgentSession,
    Chunk,
    Document,
    SessionChange,
    SessionDelivery,
    SessionDocument,
    Status,
    readers_match,
)
from knowledge.search.bootstrap import bootstrap
from knowledge.search.held import Held, HeldMatch
from knowledge.search.retrieval import RetrievedChunk, RetrieveFilters, retrieve
from knowledge.selectors import visible_chunks, visible_documents
from tenants.models import Tenant
from tenants.principals import Viewer

Kind = SessionChange.Kind
MAX_TTL_HOURS = 720.0  # 30 days
MIN_TTL_HOURS = 0.01
CLEANUP_AFTER = dt.timedelta(days=1)  # an expired session answers 410 this long, then it is deleted (404)
MAX_LEDGER_PAGE = 1000
CLEANUP_SCHEDULE = "ragsite: agent sessions cleanup"  # the worker's hourly task (made by migration 0023)
TOKEN_RE = re.compile(r"\w+|[^\w\s]")


class SessionNotFound(DomainError, LookupError):
    """No such session for this caller (another tenant's or another key's is not found either)."""

    status, code = 404, "session_not_found"

    def __init__(self) -> None:
        super().__init__("No session with that id for this caller.")


class SessionGone(DomainError, LookupError):
    """The session ended or expired: start a new one."""

    status, code = 410, "session_gone"


class SessionQuota(DomainError):
    """The caller holds RAG_SESSION_MAX_PER_OWNER live sessions: end one (or let one expire) first."""

    status, code = 429, "session_quota"


def count_tokens(text: str) -> int:
    return max(len(TOKEN_RE.findall(text)), math.ceil(len(text) / 4))


# --- a session ---------------------------------------------------------------------------------------------------
def session_create(*, tenant: Tenant, api_key: Any = None, user: Any = None, purpose: str = "",
                   scope: dict[str, Any] | None = None, ttl_hours: float | None = None) -> AgentSession:  # fmt: skip
    hours = settings.RAG_SESSION_TTL_HOURS if ttl_hours is None else ttl_hours
    ttl = int(min(max(hours, MIN_TTL_HOURS), MAX_TTL_HOURS) * 3600)
    now = timezone.now()
    owned = AgentSession.objects.for_tenant(tenant).filter(ended_at__isnull=True, expires_at__gt=now)
    owned = owned.filter(api_key=api_key) if api_key is not None else owned.filter(api_key__isnull=True, user=user)
    if owned.count() >= settings.RAG_SESSION_MAX_PER_OWNER:
        raise SessionQuota(
            f"This caller already has {settings.RAG_SESSION_MAX_PER_OWNER} live sessions "
            "(RAG_SESSION_MAX_PER_OWNER): end one, or let one expire, before starting another."
        )
    return AgentSession.objects.create(
        tenant=tenant, api_key=api_key, user=None if api_key is not None else user, purpose=purpose.strip()[:500],
        scope=_scope(scope), ttl_seconds=ttl, created_at=now, last_used_at=now,
        expires_at=now + dt.timedelta(seconds=ttl),
    )  # fmt: skip


def _scope(scope: dict[str, Any] | None) -> dict[str, list[str]]:
    """A session's scope as the reads compare it: source ids as given, tags trimmed and lower-cased (as
    knowledge.shapes.scope_filters reads a call's)."""
    scope = scope or {}
    kept = {"source_ids": list(scope.get("source_ids") or []),
            "tags": [t.strip().lower() for t in scope.get("tags") or [] if t.strip()]}  # fmt: skip
    return {key: values for key, values in kept.items() if values}


def session_get(*, tenant: Tenant, public_id: Any, api_key: Any = None, user: Any = None) -> AgentSession:
    """The caller's own session of this tenant; SessionNotFound for any other (another tenant's, another key's or
    user's, one deleted), SessionGone for one ended or expired. Each read in it (end_call) keeps it alive."""
    if api_key is None and not getattr(user, "is_authenticated", False):
        raise SessionNotFound()
    found = AgentSession.objects.for_tenant(tenant).filter(public_id=public_id)
    found = found.filter(api_key=api_key) if api_key is not None else found.filter(api_key__isnull=True, user=user)
    session = found.first()
    if session is None:
        raise SessionNotFound()
    now = timezone.now()
    if session.ended_at is not None:
        raise SessionGone(f"This session was ended at {session.ended_at.isoformat()}; start a new one.")
    if session.expires_at <= now:
        raise SessionGone(f"This session expired at {session.expires_at.isoformat()}; start a new one.")
    return session


def sessions_of(*, tenant: Tenant, api_key: Any = None, user: Any = None) -> list[AgentSession]:
    """The caller's live sessions, newest first."""
    found = AgentSession.objects.for_tenant(tenant).filter(ended_at__isnull=True, expires_at__gt=timezone.now())
    if api_key is not None:
        return list(found.filter(api_key=api_key).order_by("-created_at")[:100])
    if not getattr(user, "is_authenticated", False):
        return []
    return list(found.filter(api_key__isnull=True, user=user).order_by("-created_at")[:100])


def sessions_end_for(*, tenant: Tenant, user: Any, api_keys: list[Any]) -> int:
    """End every open agent session of the tenant that a deprovisioned person holds, in their name or through one of
    the keys revoked with them (tenants.services.member_deprovision); how many ended. Their next call is a 410."""
    owned = AgentSession.objects.for_tenant(tenant).filter(ended_at__isnull=True)
    owned = owned.filter(Q(user=user) | Q(api_key__in=[k.pk for k in api_keys]))
    return owned.update(ended_at=timezone.now())


def session_end(session: AgentSession) -> None:
    AgentSession.objects.filter(pk=session.pk).update(ended_at=timezone.now())


def begin_call(session: AgentSession) -> int:
    """A call in the session: its number (1 = first). record_call() records it."""
    return session.calls + 1


def record_call(session: AgentSession, given: list[Given], *, via: str, call: int) -> int:
    """A call's deliveries and its count, in one transaction (one commit); the tokens it delivered."""
    with transaction.atomic():
        tokens = deliver(session, given, via=via, call=call)
        end_call(session, tokens)
    return tokens


def end_call(session: AgentSession, tokens: int = 0) -> None:
    """The call is counted with the tokens it delivered, and the session lives its ttl from now (one UPDATE)."""
    now = timezone.now()
    AgentSession.objects.filter(pk=session.pk).update(
        calls=F("calls") + 1, tokens_delivered=F("tokens_delivered") + tokens, last_used_at=now,
        expires_at=now + dt.timedelta(seconds=session.ttl_seconds),
    )  # fmt: skip
    session.calls += 1
    session.tokens_delivered += tokens
    session.last_used_at, session.expires_at = now, now + dt.timedelta(seconds=session.ttl_seconds)


NOTHING = "\x00nothing"  # a source id or tag no document has: a call that asked only outside its session's scope


def session_filters(session: AgentSession, filters: RetrieveFilters) -> RetrieveFilters:
    """A call's filters held to the session's scope: its sources and its tags (a document with any of them),
    narrowed further by the call's own, never widened: a call naming only others gets nothing."""
    sources, tags = session.scope.get("source_ids"), session.scope.get("tags")
    if sources:
        filters.source_ids = [s for s in filters.source_ids if s in sources] if filters.source_ids else list(sources)
        filters.source_ids = filters.source_ids or [NOTHING]
    if tags:
        filters.tags = [t for t in filters.tags if t in tags] if filters.tags else list(tags)
        filters.tags = filters.tags or [NOTHING]
    return filters


def sessions_cleanup(now: dt.datetime | None = None) -> int:
    """Delete sessions ended or expired more than CLEANUP_AFTER ago (the worker's hourly task)."""
    cutoff = (now or timezone.now()) - CLEANUP_AFTER
    expired = AgentSession.objects.filter(expires_at__lt=cutoff) | AgentSession.objects.filter(ended_at__lt=cutoff)
    deleted, _counts = expired.delete()
    return deleted


# --- what the session holds --------------------------------------------------------------------------------------
def held_of(session: AgentSession) -> Held:
    """The chunks the session was given whole (an excerpt of a bootstrap does not count: its text comes once),
    asked of the ledger for the candidates a read meets. The two lookups run on every read of a session with up to
    150 ids: written as SQL on the ledger's own indexes ((session, point_id), (session, chunk_id, content_hash)), they
    take a tenth of what the ORM spends compiling them."""
    table = SessionDelivery._meta.db_table

    def rows(column: str, wanted: list[str], select: str) -> list[tuple[Any, ...]]:
        marks = ", ".join(["%s"] * len(wanted))
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {select} FROM {table} WHERE session_id = %s AND whole AND {column} IN ({marks})",
                           [session.pk, *wanted])  # fmt: skip
            return cursor.fetchall()

    def points(point_ids: list[str]) -> dict[str, tuple[str, str]]:
        found = rows("point_id", point_ids, "point_id, chunk_id, document_id_text")
        return {point: (chunk_id, document_id) for point, chunk_id, document_id in found}

    def texts(chunk_ids: list[str]) -> set[tuple[str, str]]:
        return {(chunk_id, text_hash) for chunk_id, text_hash in rows("chunk_id", chunk_ids, "chunk_id, content_hash")}

    def renewed() -> set[str]:
        older = SessionDocument.objects.filter(session=session, older=True)
        return set(older.values_list("document_id_text", flat=True))

    return Held(points=points, texts=texts, renewed=renewed)


@dataclass
class Given:
    """One chunk a call gives: whole, or an excerpt of it (`text`, what was sent)."""

    chunk: Chunk
    text: str
    whole: bool = True
    counted: int | None = None  # its tokens, when the caller counted them already

    @property
    def tokens(self) -> int:
        return count_tokens(self.text) if self.counted is None else self.counted


def deliver(session: AgentSession, given: Iterable[Given], *, via: str, call: int) -> int:
    """Record what a call gave (inside record_call's transaction); the tokens it gave. A chunk given again whole
    after an excerpt is marked whole."""
    given = list(given)
    if not given:
        return 0
    now = timezone.now()
    tokens = 0
    # Only a session with a base pack holds excerpts a whole chunk upgrades; a chunk given twice whole (with
    # include_delivered) is the conflict the insert ignores.
    excerpts = SessionDelivery.objects.filter(session=session, chunk_id__in=[g.chunk.chunk_id for g in given])
    known = {(d.chunk_id, d.content_hash): d for d in excerpts} if session.base_pack else {}
    fresh: list[SessionDelivery] = []
    for item in given:
        chunk, document = item.chunk, item.chunk.document
        tokens += item.tokens
        before = known.get((chunk.chunk_id, chunk.content_hash))
        if before is not None:
            if item.whole and not before.whole:
                SessionDelivery.objects.filter(pk=before.pk).update(whole=True, tokens=F("tokens") + item.tokens)
                before.whole = True
            continue
        delivery = SessionDelivery(
            session=session, document=document, chunk_id=chunk.chunk_id, content_hash=chunk.content_hash,
            point_id=chunk.point_id,
            document_id_text=document.document_id, version=chunk.document_version.version, call=call, via=via,
            whole=item.whole, tokens=item.tokens, at=now,
        )  # fmt: skip
        known[(chunk.chunk_id, chunk.content_hash)] = delivery
        fresh.append(delivery)
    SessionDelivery.objects.bulk_create(fresh, ignore_conflicts=True)  # the same chunk given by two calls at once
    _baseline(session, [item.chunk.document for item in given])
    older = {g.chunk.document.pk for g in given if g.chunk.document_version.version < g.chunk.document.version}
    if older:  # an as_of read gave a past version's chunk: its text is compared from now on
        SessionDocument.objects.filter(session=session, document__in=older).update(older=True)
    return tokens


def _baseline(session: AgentSession, documents: list[Document]) -> None:
    """The first chunk of a document given in the session: what the document is now is what the session knows of
    it (a change is only what happens after)."""
    documents = list({d.pk: d for d in documents}.values())
    told = SessionDocument.objects.filter(session=session, document__in=documents)
    known = set(told.values_list("document_id", flat=True))
    new = [d for d in documents if d.pk not in known]
    if not new:
        return
    now = timezone.now()
    successors = _successors([d.pk for d in new], session.tenant, now)
    SessionDocument.objects.bulk_create([
        SessionDocument(session=session, document=d, document_id_text=d.document_id, version=d.version,
                        retired=d.status == Status.RETIRED, expired=_expired(d.valid_until, timezone.localdate(now)),
                        superseded_by=successors[d.pk][0] if d.pk in successors else None)
        for d in new
    ], ignore_conflicts=True)  # fmt: skip


def _expired(valid_until: dt.date | None, today: dt.date) -> bool:
    return valid_until is not None and valid_until < today


def _successors(pks: list[int], tenant: Tenant, now: dt.datetime) -> dict[int, tuple[int, str]]:
    """Document pk → (pk, document_id) of the live document in force now that supersedes it (validity.py's rule)."""
    found: dict[int, tuple[int, str]] = {}
    live = Document.objects.for_tenant(tenant).filter(supersedes_id__in=pks, status=Status.ACTIVE).order_by("pk")
    for pk, supersedes, document_id, valid_from, valid_until in live.values_list(
            "pk", "supersedes_id", "document_id", "valid_from", "valid_until"):  # fmt: skip
        if validity.covers(valid_from, valid_until, now):
            found.setdefault(supersedes, (pk, document_id))
    return found


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
    retired, expired = Q(document__status=Status.RETIRED), Q(document__valid_until__lt=today)
    differs = (
        Q(available=True, seen=False)
        | Q(available=False, seen=True)
        | Q(seen=True) & (
            ~Q(version=F("document__version"))
            | Q(retired=True) & ~retired | Q(retired=False) & retired
            | Q(expired=False) & expired | Q(expired=True) & ~expired
        )
    )  # fmt: skip
    in_force = (Q(valid_from__isnull=True) | Q(valid_from__lte=today)) & (
        Q(valid_until__isnull=True) | Q(valid_until__gte=today))  # fmt: skip
    live = Document.objects.filter(supersedes__in=told.values("document"), status=Status.ACTIVE).filter(in_force)
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
    fields = ("pk", "document_id", "document_id_text", "version", "retired", "expired", "superseded_by", "available",
              "older")  # fmt: skip
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
    successors = {pk: successor for pk, (successor, _) in _successors(list(documents), session.tenant, now).items()}
    today = timezone.localdate(now)
    named = dict(visible_documents(viewer).filter(pk__in=list(successors.values())).values_list("pk", "document_id"))
    found: list[SessionChange] = []
    held: dict[str, list[tuple[str, str]]] | None = None

    def chunks_held() -> dict[str, list[tuple[str, str]]]:
        nonlocal held
        if held is None:
            held = {}
            for document_id, chunk_id, content_hash in SessionDelivery.objects.filter(session=session).values_list(
                    "document_id_text", "chunk_id", "content_hash").order_by("pk"):  # fmt: skip
                held.setdefault(document_id, []).append((chunk_id, content_hash))
        return held

    def change(row: _Told, kind: str, **detail: Any) -> None:
        found.append(SessionChange(session=session, kind=kind, document_id_text=row.document_id, at=now,
                                   detail=detail))  # fmt: skip

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
            retired, expired = status == Status.RETIRED, _expired(valid_until, today)
            if not row.available:  # visible again: what it is now is what the session knows (it was told it went)
                row.available, row.version, row.retired, row.expired = True, version, retired, expired
                row.superseded_by = successor
            if version > row.version:
                change(row, Kind.CHANGED, old_version=row.version, new_version=version,
                       chunks=_moved(row.document or 0, version, chunks_held().get(row.document_id, [])))  # fmt: skip
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
                version=row.version, retired=row.retired, expired=row.expired, superseded_by=row.superseded_by,
                available=row.available, older=row.older,
            )  # fmt: skip
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


# --- the session's reads -----------------------------------------------------------------------------------------
@dataclass
class Budget:
    """What fits `max_tokens` (None: everything), cut at item boundaries, most important first."""

    max_tokens: int | None
    used: int = 0
    left_out: list[dict[str, Any]] = field(default_factory=list)

    def fits(self, tokens: int) -> bool:
        if self.max_tokens is None:
            return True
        if self.left_out or self.used + tokens > self.max_tokens:
            return False
        self.used += tokens
        return True


@dataclass
class Read:
    """A retrieve in a session (or with a budget): the new hits, the held ones it matched, what the budget left."""

    hits: list[RetrievedChunk]
    already: list[HeldMatch] = field(default_factory=list)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    session: AgentSession | None = None
    memory_changes: int | None = None


def fit(hits: list[RetrievedChunk], max_tokens: int | None,
        counted: dict[int, int] | None = None) -> tuple[list[RetrievedChunk], list[dict[str, Any]], int]:  # fmt: skip
    """The hits that fit the budget, in rank order, and the ones left out (chunk id, rank, tokens); `counted`
    keeps each hit's tokens (by id())."""
    budget = Budget(max_tokens)
    kept = []
    counted = {} if counted is None else counted
    for rank, hit in enumerate(hits, 1):
        tokens = counted[id(hit)] = count_tokens(hit.chunk.text)
        if budget.fits(tokens):
            kept.append(hit)
        else:
            budget.left_out.append({"chunk_id": hit.chunk.chunk_id, "rank": rank, "tokens": tokens})
    used = budget.used if max_tokens is not None else sum(counted[id(h)] for h in kept)
    return kept, budget.left_out, used


def session_retrieve(*, viewer: Viewer, session: AgentSession | None, query: str, top_k: int,
                     filters: RetrieveFilters, specific: bool = False, rerank: bool = False,
                     include_delivered: bool = False, max_tokens: int | None = None,
                     via: str = "retrieve") -> Read:  # fmt: skip
    """`retrieve` as a session call: only chunks the session does not hold (top_k of them), the held ones it
    matched, the budget's cut; what it gives is recorded."""
    if session is None:
        hits = retrieve(viewer=viewer, query=query, top_k=top_k, filters=filters, specific=specific, rerank=rerank)
        kept, left_out, tokens = fit(hits, max_tokens)
        return Read(kept, left_out=left_out, tokens=tokens)
    call = begin_call(session)
    detect(session, viewer)
    held = None if include_delivered else held_of(session)
    hits = retrieve(viewer=viewer, query=query, top_k=top_k, filters=session_filters(session, filters),
                    specific=specific, rerank=rerank, held=held)  # fmt: skip
    counted: dict[int, int] = {}
    kept, left_out, _tokens = fit(hits, max_tokens, counted)
    tokens = record_call(session, [Given(hit.chunk, hit.chunk.text, counted=counted.get(id(hit))) for hit in kept],
                         via=via, call=call)  # fmt: skip
    return Read(kept, already=held.matched if held else [], left_out=left_out, tokens=tokens, session=session,
                memory_changes=unread_changes(session))  # fmt: skip


PACK_ORDER = ("critical_points", "items")  # the summary first, then these lists, each in its own order


def session_bootstrap(*, viewer: Viewer, session: AgentSession | None, intent: str, filters: RetrieveFilters,
                      max_tokens: int | None = None) -> dict[str, Any]:  # fmt: skip
    """The bootstrap pack, fitted to `max_tokens` (summary, critical points, then the items in their order, cut at
    item boundaries) and, in a session, recorded as its base pack (its excerpts, not the chunks whole)."""
    call = begin_call(session) if session is not None else 0
    if session is not None:
        detect(session, viewer)
        filters = session_filters(session, filters)
    pack = bootstrap(viewer=viewer, intent=intent, filters=filters)
    held = set(SessionDelivery.objects.filter(session=session).values_list("chunk_id", flat=True)) if session else set()
    budget = Budget(max_tokens)
    already: list[dict[str, Any]] = []
    if pack["summary"] and not budget.fits(count_tokens(pack["summary"])):
        budget.left_out.append({"part": "summary", "tokens": count_tokens(pack["summary"])})
        pack["summary"], pack["summary_refs"] = "", []
    given: list[tuple[str, str]] = []
    for part in PACK_ORDER:
        kept = []
        for item in pack[part]:
            if item["chunk_id"] in held:
                already.append({"chunk_id": item["chunk_id"], "part": part})
                continue
            tokens = count_tokens(item["excerpt"])
            if budget.fits(tokens):
                kept.append({**item, "tokens": tokens})
                given.append((item["chunk_id"], item["excerpt"]))
            else:
                budget.left_out.append({"part": part, "chunk_id": item["chunk_id"], "kind": item.get("kind", part),
                                        "tokens": tokens})  # fmt: skip
        pack[part] = kept
    pack["tokens"] = count_tokens(pack["summary"]) + sum(t for p in PACK_ORDER for t in (i["tokens"] for i in pack[p]))
    pack["token_count"] = "a word or a punctuation mark is a token, never under a quarter of the characters"
    if max_tokens is not None:
        pack["max_tokens"], pack["left_out"] = max_tokens, budget.left_out
    if session is not None:
        chunks = _chunks_by_id(viewer, [chunk_id for chunk_id, _ in given])
        record_call(session, [Given(chunks[c], text, whole=_whole(chunks[c], text)) for c, text in given
                              if c in chunks], via="bootstrap", call=call)  # fmt: skip
        if not session.base_pack:
            base = {"call": call, "chunk_ids": [c for c, _ in given], "tokens": pack["tokens"],
                    "left_out": budget.left_out, "intent": intent}  # fmt: skip
            AgentSession.objects.filter(pk=session.pk).update(base_pack=base)
            session.base_pack = base
        pack["session"] = str(session.public_id)
        pack["already_delivered"] = already
        pack["memory_changes"] = unread_changes(session)
    return pack


def _whole(chunk: Chunk, excerpt: str) -> bool:
    return " ".join(chunk.text.split()) == excerpt


def _chunks_by_id(viewer: Viewer, chunk_ids: list[str]) -> dict[str, Chunk]:
    """The live chunks of these ids the viewer sees (the pack's pieces), by chunk id."""
    found = (visible_chunks(viewer).filter(chunk_id__in=chunk_ids, status=Status.ACTIVE)
             .select_related("document", "document_version").defer("dense", "sparse"))  # fmt: skip
    return {c.chunk_id: c for c in found}


def answer_delivered(*, viewer: Viewer, session: AgentSession | None, hits: list[RetrievedChunk], whole: bool = True,
                     max_tokens: int | None = None) -> Read:  # fmt: skip
    """An answer in a session: it reads every excerpt it needs (a right answer may rest on what the agent holds),
    and gives back in `hits` only the ones the session does not hold (those that fit `max_tokens`); the others are
    listed with their rank. `whole=False`: the door gives no chunk text, only the answer that rests on them (the
    OpenAI door's citations): they are recorded so that their changes are reported, never held back from a later
    read. Without a session, only the budget applies."""
    if session is None:
        fitted, cut, counted = fit(hits, max_tokens)
        return Read(fitted, left_out=cut, tokens=counted)
    call = begin_call(session)
    detect(session, viewer)
    held = held_of(session)
    held.learn(h.chunk for h in hits)
    kept = [h for h in hits if not held.holds(h.chunk)]
    already = [HeldMatch(rank, h.chunk.chunk_id, h.chunk.document.document_id) for rank, h in enumerate(hits, 1)
               if held.holds(h.chunk)]  # fmt: skip
    left_out: list[dict[str, Any]] = []
    if whole:
        kept, left_out, _tokens = fit(kept, max_tokens)
    given = [Given(h.chunk, h.chunk.text if whole else "", whole=whole) for h in kept]
    tokens = record_call(session, given, via="answer", call=call)
    return Read(kept, already=already, left_out=left_out, tokens=tokens, session=session,
                memory_changes=unread_changes(session))  # fmt: skip


# --- the ledger --------------------------------------------------------------------------------------------------
def ledger(session: AgentSession, viewer: Viewer, *, offset: int = 0, limit: int = MAX_LEDGER_PAGE) -> dict[str, Any]:
    detect(session, viewer)
    gone = set(
        SessionDocument.objects.filter(session=session, available=False).values_list("document_id_text", flat=True)
    )
    deliveries = SessionDelivery.objects.filter(session=session).order_by("pk")
    total = deliveries.count()
    limit = max(1, min(limit, MAX_LEDGER_PAGE))
    offset = max(0, min(offset, total))  # past the end is an empty page, however far past (SQL's OFFSET is 64-bit)
    page = list(deliveries.values("chunk_id", "document_id_text", "version", "call", "via", "whole", "tokens",
                                  "at")[offset : offset + limit])  # fmt: skip
    return {
        **session_shape(session),
        "memory_changes": unread_changes(session),
        "deliveries": [
            {
                "chunk_id": d["chunk_id"],
                "document_id": None if d["document_id_text"] in gone else d["document_id_text"],
                "version": d["version"],
                "call": d["call"],
                "via": d["via"],
                "whole": d["whole"],
                "tokens": d["tokens"],
                "at": d["at"].isoformat(),
            }
            for d in page
        ],  # fmt: skip
        "deliveries_total": total,
        "next_offset": offset + len(page) if offset + len(page) < total else None,
    }


def session_shape(session: AgentSession) -> dict[str, Any]:
    return {
        "id": str(session.public_id),
        "purpose": session.purpose,
        "scope": session.scope,
        "ttl_hours": round(session.ttl_seconds / 3600, 4),
        "created_at": session.created_at.isoformat(),
        "last_used_at": session.last_used_at.isoformat(),
        "expires_at": session.expires_at.isoformat(),
        "calls": session.calls,
        "tokens_delivered": session.tokens_delivered,
        "base_pack": session.base_pack or None,
        "token_count": "a word or a punctuation mark is a token, never under a quarter of the characters",
    }
