"""question → hybrid search (dense + lexical, fused by RRF in Qdrant) → ranked, located excerpts.

`retrieve` is the one read path: the API, the bootstrap pack and answers are built on it.
Every call takes the viewer (tenant and principals, tenants/principals.py) from the caller; a scope can only
narrow within what that viewer may see, and the principals go into the vector query itself.

This module is the entry (the index a read searches, the candidates, the cut to top_k) and publishes the read's
shapes; each step is a module of its own in knowledge/search/: `hits` (what a read returns, its filters), `question`
(its language, gloss, weights and embeddings), `scopes` (the viewer and the validity rules in the vector query),
`rounds` (one hybrid search, a specific question's rounds, the SQL rows behind them), `held` (what a session holds),
`boosts` (critical, definitions, tests, summaries and cards, the cross-encoder), `tables` (the tables an excerpt
shows).
"""

from __future__ import annotations

import time
from typing import Any

from core.problems import DomainError
from inference.embedders import EmbedderIdentity, get_embedder
from knowledge.index.vectorstore import Scope, get_store
from knowledge.models import RANKING_ONLY_MODES, Chunk, DocumentVersion, Status
from knowledge.search.boosts import (
    RERANK_CANDIDATES,
    SUMMARY_EXPANSION,
    boosted,
    cross_encoder_fused,
    definitions,
    source_text_only,
)
from knowledge.search.held import MAX_HELD_DEPTH, Held, first_new, new_count, without_held
from knowledge.search.hits import RetrievedChunk as RetrievedChunk  # published: the read's shapes
from knowledge.search.hits import RetrieveFilters as RetrieveFilters
from knowledge.search.hits import page_of
from knowledge.search.question import Question, query_embedding
from knowledge.search.rounds import hydrate, one_round, specific_round
from knowledge.search.scopes import in_force, served_in_force, viewer_scope
from knowledge.search.specific import Plan, plan
from knowledge.search.tables import with_tables
from knowledge.selectors import query_principals
from knowledge.validity import Clock
from tenants.models import Tenant
from tenants.principals import Viewer

MODES = ("auto", "documental", "code")
CANDIDATES = 50  # fused candidates considered before boosts and the cut to top_k


class IndexMismatch(DomainError):
    """The tenant's vectors come from another embedder than the configured one: a reindex is needed."""

    status, code = 409, "index_mismatch"


SERVED_STATUSES = (Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED)
INDEX_CHECK_TTL_S = 10.0  # a tenant found consistent is not asked again for this long (one SQL query a read)
_index_checked: dict[tuple[Any, Any], tuple[float, EmbedderIdentity]] = {}


def check_index(tenant: Tenant) -> EmbedderIdentity:
    """The index a read of this tenant searches: the configured embedder's, or while an upgrade adds the multilingual
    leg (knowledge/reindex.py, in the background) the one before it, which still holds every document the upgrade
    has not finished. IndexMismatch when the tenant's vectors come from another embedder than the configured one.
    The answer is kept for INDEX_CHECK_TTL_S: the embedder only changes with the configuration, and an upgrade
    ends within that much of its last document."""
    configured = get_embedder().identity
    key = (tenant.public_id, configured)
    cached = _index_checked.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    served = DocumentVersion.objects.for_tenant(tenant).filter(status__in=SERVED_STATUSES)  # as of a day, too
    built = {
        EmbedderIdentity(provider, model, dims or 0)
        for provider, model, dims in served.values_list("embedding_provider", "embedding_model", "embedding_dims")
        .distinct().order_by()
    }  # fmt: skip
    serving = configured
    if built - {configured}:
        if not configured.multilingual_dims or not built <= {configured, configured.primary}:
            other = next(iter(built - {configured}))
            raise IndexMismatch(
                f"The index of tenant {tenant.slug} was built with {other.provider}/{other.model} ({other.dims}-d) "
                f"but the configured embedder is {configured.provider}/{configured.model} ({configured.dims}-d). "
                f"Run: manage.py reindex {tenant.slug}"
            )
        serving = configured.primary  # the upgrade is under way: the previous index serves until it is done
    elif configured.multilingual_dims and served.filter(reindex_pending=True).exists():
        serving = configured.primary  # re-embedded, not all written to the new index yet
    _index_checked[key] = (time.monotonic() + INDEX_CHECK_TTL_S, serving)
    return serving


def retrieve(
    *, viewer: Viewer, query: str, top_k: int = 8, filters: RetrieveFilters | None = None, specific: bool = False,
    scope: Scope | None = None, rerank: bool = False, held: Held | None = None,
) -> list[RetrievedChunk]:  # fmt: skip
    """Hybrid retrieval for one viewer. `specific` adds intent sub-queries and an intent re-rank; `rerank` has the
    cross-encoder read the first RERANK_CANDIDATES and fuses its order with the hybrid one. With `held` (a
    session's chunks), top_k counts new chunks only and the held ones matched are listed in `held.matched`."""
    tenant = viewer.tenant
    question = Question.of(tenant, query, check_index(tenant))
    filters = filters or RetrieveFilters()
    clock = Clock.for_read(tenant, filters.as_of)
    base_scope = scope or filters.scope(tenant)
    base_scope.tenant = str(tenant.public_id)
    base_scope.principals = query_principals(viewer)  # whatever scope the caller built, the viewer's principals hold
    in_force(base_scope, filters, clock)
    limit = max(top_k * 3, CANDIDATES)
    intent = plan(query) if specific else None
    # Only the hits that can be returned are read from SQL (the ranking needs nothing but the payloads): the first
    # `wanted`, more when some turn out gone or hidden in SQL, or held by the session (then, once the candidates run
    # out, a deeper round: MAX_HELD_DEPTH more at most).
    wanted = max(top_k, RERANK_CANDIDATES) if rerank else top_k + SUMMARY_EXPANSION * 2
    read: dict[str, Chunk] = {}  # rows read from SQL, kept for a deeper round
    while True:
        results, wanted, more = _candidates(viewer, question, base_scope, limit, intent, held, top_k=top_k,
                                            wanted=wanted, rerank=rerank, read=read)  # fmt: skip
        deepest = max(top_k * 3, CANDIDATES) + MAX_HELD_DEPTH
        if held is None or not more or new_count(results, held) >= wanted or limit >= deepest:
            break
        limit = min(limit * 3, deepest)
    if rerank:
        results = cross_encoder_fused(query, first_new(results, max(top_k, RERANK_CANDIDATES), held))
    results = source_text_only(viewer, question, first_new(results, top_k + SUMMARY_EXPANSION * 2, held), base_scope)
    if held is not None:
        held.learn(r.chunk for r in results)  # a summary's source chunks, read just now
    results = without_held(results, top_k, held)
    for result in results:
        result.page = page_of(result.chunk, query)
        result.freshness = clock.freshness(result.chunk.document, result.chunk.document_version, sees=viewer.sees,
                                           in_force=served_in_force(filters, clock))  # fmt: skip
    with_tables(viewer, results)
    return results


def _candidates(
    viewer: Viewer, question: Question, scope: Scope, limit: int, intent: Plan | None, held: Held | None, *,
    top_k: int, wanted: int, rerank: bool, read: dict[str, Chunk],
) -> tuple[list[RetrievedChunk], int, bool]:  # fmt: skip
    """One round of `limit` fused candidates, boosted, ranked and read from SQL until `wanted` of them are not
    held: the results, `wanted` (smaller when no summary or card is among them) and whether the round was full
    (deeper ones exist)."""
    query = question.text
    found = (specific_round(question, scope, limit, intent) if intent
             else one_round(question, scope, limit))  # fmt: skip
    defining = definitions(question, scope)
    ranked = [*found.ranked, *(hit for hit in defining.values() if hit.id not in {h.id for h in found.ranked})]
    scored = boosted(query, ranked, found, defining)
    chunks = read
    if intent is not None:  # the intent's bonus reads each candidate's text: all of them are hydrated
        chunks.update(hydrate(viewer, [hit for hit in ranked if hit.id not in chunks]))
        scored = [(hit, boost + intent.bonus(chunks[hit.id]), names) for hit, boost, names in scored
                  if hit.id in chunks]  # fmt: skip
        if held is not None:
            held.learn(chunks.values())
    scored.sort(key=lambda item: item[0].score + item[1], reverse=True)
    if held is not None:
        scored = held.skip(scored)
    if not rerank and not any(hit.payload.get("mode") in RANKING_ONLY_MODES for hit, _, _ in scored[:wanted]):
        wanted = top_k  # no summary or card among them: nothing is replaced by its document's source chunks
    results: list[RetrievedChunk] = []
    cursor = 0
    while new_count(results, held) < wanted and cursor < len(scored):
        needed = wanted - new_count(results, held)
        # In a session, held chunks are read past: a larger batch saves round trips when many of them rank first.
        batch = scored[cursor : cursor + (needed + HYDRATE_SPARE if held is None else max(2 * needed, 16))]
        cursor += len(batch)
        if intent is None:
            fresh = hydrate(viewer, [hit for hit, _, _ in batch if hit.id not in chunks])
            chunks.update(fresh)
            if held is not None:
                held.learn(fresh.values())
        for hit, boost, names in batch:
            chunk = chunks.get(hit.id)
            if chunk is None:
                continue  # a point whose chunk is gone (drift) or that SQL hides: never invent a result
            results.append(
                RetrievedChunk(
                    chunk=chunk, score=hit.score + boost, dense_rank=found.dense_rank.get(hit.id),
                    lexical_rank=found.lexical_rank.get(hit.id), multilingual_rank=found.multilingual_rank.get(hit.id),
                    boost=boost, tags=list(hit.payload.get("tags") or []),
                    similarity=found.similarity.get(hit.id), defines=names,
                )
            )  # fmt: skip
    return results, wanted, len(found.ranked) >= limit


HYDRATE_SPARE = 4  # hits read from SQL beyond those that can be returned, for the ones SQL drops


def retrieve_single_leg(*, viewer: Viewer, query: str, top_k: int, leg: str, filters: RetrieveFilters | None = None):
    """Dense-only or lexical-only retrieval (for evaluation and diagnosis)."""
    question = Question.of(viewer.tenant, query, check_index(viewer.tenant))
    filters = filters or RetrieveFilters()
    clock = Clock.for_read(viewer.tenant, filters.as_of)
    scope = viewer_scope(viewer, filters, clock)
    store, index = get_store(), question.index
    if leg == "dense":
        hits = store.search(index, scope, dense=query_embedding(query), sparse=None, limit=top_k)
    elif leg == "multilingual" and index.multilingual_dims:
        hits = store.search(index, scope, dense=None, sparse=None, limit=top_k,
                            multilingual=query_embedding(query, multilingual=True))  # fmt: skip
    else:
        hits = store.search(index, scope, dense=None, sparse=question.sparse(), limit=top_k)
    chunks = hydrate(viewer, hits)
    found = [chunks[h.id] for h in hits if h.id in chunks and chunks[h.id].mode not in RANKING_ONLY_MODES]
    scores = {h.id: h.score for h in hits}
    return [
        RetrievedChunk(chunk=chunk, score=scores[chunk.point_id],
                       freshness=clock.freshness(chunk.document, chunk.document_version, sees=viewer.sees,
                                                 in_force=served_in_force(filters, clock)))
        for chunk in found
    ]  # fmt: skip
