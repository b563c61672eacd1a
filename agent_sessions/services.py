"""Agent sessions (docs/sessions.md): a session is made, found, ended and cleaned up here, and each call in it is
counted with what it gave (its ledger, SessionDelivery) and what the session was told of each document it holds
(SessionDocument, the baseline its changes are found against: agent_sessions/changes.py).

A session belongs to the API key or the user that made it; anyone else is told it does not exist. Tokens are the
product's one estimate (core/tokens.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from agent_sessions.models import AgentSession, SessionDelivery, SessionDocument
from core.problems import DomainError
from core.tokens import estimate_tokens
from knowledge import validity
from knowledge.models import Chunk, Document, Status
from knowledge.search.held import Held
from knowledge.search.retrieval import RetrieveFilters
from tenants.models import Tenant

MAX_TTL_HOURS = 720.0  # 30 days
MIN_TTL_HOURS = 0.01
CLEANUP_AFTER = dt.timedelta(days=1)  # an expired session answers 410 this long, then it is deleted (404)
CLEANUP_SCHEDULE = "ragsite: agent sessions cleanup"  # the worker's hourly task (made by migration 0023)


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


# --- a session ---------------------------------------------------------------------------------------------------
def session_create(
    *,
    tenant: Tenant,
    api_key: Any = None,
    user: Any = None,
    purpose: str = "",
    scope: dict[str, Any] | None = None,
    ttl_hours: float | None = None,
) -> AgentSession:
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
        tenant=tenant,
        api_key=api_key,
        user=None if api_key is not None else user,
        purpose=purpose.strip()[:500],
        scope=_scope(scope),
        ttl_seconds=ttl,
        created_at=now,
        last_used_at=now,
        expires_at=now + dt.timedelta(seconds=ttl),
    )


def _scope(scope: dict[str, Any] | None) -> dict[str, list[str]]:
    """A session's scope as the reads compare it: source ids as given, tags trimmed and lower-cased (as
    knowledge.shapes.scope_filters reads a call's)."""
    scope = scope or {}
    kept = {
        "source_ids": list(scope.get("source_ids") or []),
        "tags": [t.strip().lower() for t in scope.get("tags") or [] if t.strip()],
    }
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
        calls=F("calls") + 1,
        tokens_delivered=F("tokens_delivered") + tokens,
        last_used_at=now,
        expires_at=now + dt.timedelta(seconds=session.ttl_seconds),
    )
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
            cursor.execute(
                f"SELECT {select} FROM {table} WHERE session_id = %s AND whole AND {column} IN ({marks})",
                [session.pk, *wanted],
            )
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
        return estimate_tokens(self.text) if self.counted is None else self.counted


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
            tenant_id=session.tenant_id,
            session=session,
            document=document,
            chunk_id=chunk.chunk_id,
            content_hash=chunk.content_hash,
            point_id=chunk.point_id,
            document_id_text=document.document_id,
            version=chunk.document_version.version,
            call=call,
            via=via,
            whole=item.whole,
            tokens=item.tokens,
            at=now,
        )
        known[(chunk.chunk_id, chunk.content_hash)] = delivery
        fresh.append(delivery)
    SessionDelivery.objects.bulk_create(fresh, ignore_conflicts=True)  # the same chunk given by two calls at once
    baseline(session, [item.chunk.document for item in given])
    older = {g.chunk.document.pk for g in given if g.chunk.document_version.version < g.chunk.document.version}
    if older:  # an as_of read gave a past version's chunk: its text is compared from now on
        SessionDocument.objects.filter(session=session, document__in=older).update(older=True)
    return tokens


def baseline(session: AgentSession, documents: list[Document]) -> None:
    """The first chunk of a document given in the session: what the document is now is what the session knows of
    it (a change is only what happens after)."""
    documents = list({d.pk: d for d in documents}.values())
    told = SessionDocument.objects.filter(session=session, document__in=documents)
    known = set(told.values_list("document_id", flat=True))
    new = [d for d in documents if d.pk not in known]
    if not new:
        return
    now = timezone.now()
    successors = validity.successors_in_force([d.pk for d in new], session.tenant, now)
    today = timezone.localdate(now)
    rows = [
        SessionDocument(
            tenant_id=session.tenant_id,
            session=session,
            document=d,
            document_id_text=d.document_id,
            version=d.version,
            retired=d.status == Status.RETIRED,
            expired=validity.expired(d.valid_until, today),
            superseded_by=successors[d.pk][0] if d.pk in successors else None,
        )
        for d in new
    ]
    SessionDocument.objects.bulk_create(rows, ignore_conflicts=True)
