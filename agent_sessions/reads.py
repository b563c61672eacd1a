"""The reads of a session: a retrieve or a bootstrap pack that brings only what the session does not hold, an answer
that records what it rests on, a token budget cut at item boundaries, the ledger and the session's shape. Every read
is decided with the caller's principals at that call (the viewer of the request)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_sessions.changes import detect, unread_changes
from agent_sessions.models import AgentSession, SessionDelivery, SessionDocument
from agent_sessions.services import Given, begin_call, held_of, record_call, session_filters
from core.tokens import DESCRIBED, estimate_tokens
from knowledge.models import Chunk, Status
from knowledge.search.bootstrap import bootstrap
from knowledge.search.held import HeldMatch
from knowledge.search.retrieval import RetrievedChunk, RetrieveFilters, retrieve
from knowledge.selectors import visible_chunks
from tenants.principals import Viewer

MAX_LEDGER_PAGE = 1000


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


def fit(
    hits: list[RetrievedChunk], max_tokens: int | None, counted: dict[int, int] | None = None
) -> tuple[list[RetrievedChunk], list[dict[str, Any]], int]:
    """The hits that fit the budget, in rank order, and the ones left out (chunk id, rank, tokens); `counted`
    keeps each hit's tokens (by id())."""
    budget = Budget(max_tokens)
    kept = []
    counted = {} if counted is None else counted
    for rank, hit in enumerate(hits, 1):
        tokens = counted[id(hit)] = estimate_tokens(hit.chunk.text)
        if budget.fits(tokens):
            kept.append(hit)
        else:
            budget.left_out.append({"chunk_id": hit.chunk.chunk_id, "rank": rank, "tokens": tokens})
    used = budget.used if max_tokens is not None else sum(counted[id(h)] for h in kept)
    return kept, budget.left_out, used


def session_retrieve(
    *,
    viewer: Viewer,
    session: AgentSession | None,
    query: str,
    top_k: int,
    filters: RetrieveFilters,
    specific: bool = False,
    rerank: bool = False,
    include_delivered: bool = False,
    max_tokens: int | None = None,
    via: str = "retrieve",
) -> Read:
    """`retrieve` as a session call: only chunks the session does not hold (top_k of them), the held ones it
    matched, the budget's cut; what it gives is recorded."""
    if session is None:
        hits = retrieve(viewer=viewer, query=query, top_k=top_k, filters=filters, specific=specific, rerank=rerank)
        kept, left_out, tokens = fit(hits, max_tokens)
        return Read(kept, left_out=left_out, tokens=tokens)
    call = begin_call(session)
    detect(session, viewer)
    held = None if include_delivered else held_of(session)
    hits = retrieve(
        viewer=viewer,
        query=query,
        top_k=top_k,
        filters=session_filters(session, filters),
        specific=specific,
        rerank=rerank,
        held=held,
    )
    counted: dict[int, int] = {}
    kept, left_out, _tokens = fit(hits, max_tokens, counted)
    tokens = record_call(
        session, [Given(hit.chunk, hit.chunk.text, counted=counted.get(id(hit))) for hit in kept], via=via, call=call
    )
    return Read(
        kept,
        already=held.matched if held else [],
        left_out=left_out,
        tokens=tokens,
        session=session,
        memory_changes=unread_changes(session),
    )


PACK_ORDER = ("critical_points", "items")  # the summary first, then these lists, each in its own order


def session_bootstrap(
    *,
    viewer: Viewer,
    session: AgentSession | None,
    intent: str,
    filters: RetrieveFilters,
    max_tokens: int | None = None,
) -> dict[str, Any]:
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
    if pack["summary"] and not budget.fits(estimate_tokens(pack["summary"])):
        budget.left_out.append({"part": "summary", "tokens": estimate_tokens(pack["summary"])})
        pack["summary"], pack["summary_refs"] = "", []
    given: list[tuple[str, str]] = []
    for part in PACK_ORDER:
        kept = []
        for item in pack[part]:
            if item["chunk_id"] in held:
                already.append({"chunk_id": item["chunk_id"], "part": part})
                continue
            tokens = estimate_tokens(item["excerpt"])
            if budget.fits(tokens):
                kept.append({**item, "tokens": tokens})
                given.append((item["chunk_id"], item["excerpt"]))
            else:
                budget.left_out.append(
                    {"part": part, "chunk_id": item["chunk_id"], "kind": item.get("kind", part), "tokens": tokens}
                )
        pack[part] = kept
    listed = sum(item["tokens"] for part in PACK_ORDER for item in pack[part])
    pack["tokens"] = estimate_tokens(pack["summary"]) + listed
    pack["token_count"] = DESCRIBED
    if max_tokens is not None:
        pack["max_tokens"], pack["left_out"] = max_tokens, budget.left_out
    if session is not None:
        chunks = _chunks_by_id(viewer, [chunk_id for chunk_id, _ in given])
        record_call(
            session,
            [Given(chunks[c], text, whole=_whole(chunks[c], text)) for c, text in given if c in chunks],
            via="bootstrap",
            call=call,
        )
        if not session.base_pack:
            base = {
                "call": call,
                "chunk_ids": [c for c, _ in given],
                "tokens": pack["tokens"],
                "left_out": budget.left_out,
                "intent": intent,
            }
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
    found = (
        visible_chunks(viewer)
        .filter(chunk_id__in=chunk_ids, status=Status.ACTIVE)
        .select_related("document", "document_version")
        .defer("dense", "sparse")
    )
    return {c.chunk_id: c for c in found}


def answer_delivered(
    *,
    viewer: Viewer,
    session: AgentSession | None,
    hits: list[RetrievedChunk],
    whole: bool = True,
    max_tokens: int | None = None,
) -> Read:
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
    already = [
        HeldMatch(rank, h.chunk.chunk_id, h.chunk.document.document_id)
        for rank, h in enumerate(hits, 1)
        if held.holds(h.chunk)
    ]
    left_out: list[dict[str, Any]] = []
    if whole:
        kept, left_out, _tokens = fit(kept, max_tokens)
    given = [Given(h.chunk, h.chunk.text if whole else "", whole=whole) for h in kept]
    tokens = record_call(session, given, via="answer", call=call)
    return Read(
        kept, already=already, left_out=left_out, tokens=tokens, session=session, memory_changes=unread_changes(session)
    )


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
    page = list(
        deliveries.values("chunk_id", "document_id_text", "version", "call", "via", "whole", "tokens", "at")[
            offset : offset + limit
        ]
    )
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
        ],
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
