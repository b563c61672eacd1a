"""One round of hybrid search (dense, multilingual and lexical legs fused in the vector store), the rounds of a
specific question's intent sub-queries fused by RRF, and the SQL rows behind the ranked points, checked again for the
viewer."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from knowledge.index.vectorstore import Hit, Scope, get_store
from knowledge.models import Chunk
from knowledge.search.question import Question, query_embedding
from knowledge.search.ranking import rrf_merge
from knowledge.search.specific import Plan
from tenants.principals import Viewer


def hydrate(viewer: Viewer, ranked: list[Hit]) -> dict[str, Chunk]:
    """The SQL rows behind the ranked points, checked to belong to the tenant and to be visible to the viewer in
    SQL too (while an access change reaches the payloads, SQL holds the stricter list)."""
    tenant = viewer.tenant
    ids = [hit.id for hit in ranked]
    # Looked up by point id alone so SQLite uses the point_id index (with the tenant in the WHERE
    # clause it scans the tenant's whole chunk index: 50 ms instead of 2 ms at 100k chunks); the
    # tenant is then enforced row by row, and the points already came from a tenant-filtered query.
    unscoped_rows = (
        Chunk.objects.filter(point_id__in=ids)
        .order_by()
        .select_related("document", "document__source", "document_version")
        # what a hit never reads: the stored vectors, and the versions' extraction notes, enrichment and metadata
        .defer("dense", "sparse", "document_version__warnings", "document_version__enrichment",
               "document_version__stated", "document__validity_problems")
    )  # fmt: skip
    return {
        c.point_id: c
        for c in unscoped_rows
        if c.tenant_id == tenant.pk
        and viewer.sees(c.document.reader_list)
        and viewer.sees(c.document_version.reader_list)
    }


@dataclass(kw_only=True)
class Round:
    """One hybrid search: the fused ranking and what each leg made of it."""

    ranked: list[Hit]  # fused, best first
    dense_rank: dict[str, int]  # point id → its rank in the dense leg (1 = first)
    lexical_rank: dict[str, int]
    multilingual_rank: dict[str, int]
    similarity: dict[str, float]  # point id → cosine similarity to the question (dense leg)


# What the ranking reads of a fused hit's payload (boosted, _candidates, definitions): only these are read from the
# store (0.35 ms for 50 points against 0.45 ms for their whole payloads, measured).
HIT_PAYLOAD = ("mode", "tags", "critical", "defines", "document_key")


def one_round(question: Question, scope: Scope, limit: int) -> Round:
    index, query, fusion = question.index, question.text, question.fusion
    # One after the other: side by side, the two encoders share the cores and each takes longer (measured).
    multilingual = query_embedding(query, multilingual=True) if index.multilingual_dims else None
    # A leg that weighs nothing for this question's language is not run (the English embedder, for a question in
    # another language): the dense vector is then the multilingual one's place-holder, never searched.
    english = fusion.same.dense > 0 or fusion.cross.dense > 0 or multilingual is None
    legs = get_store().hybrid(index, scope, dense=query_embedding(question.english) if english else None,
                              sparse=question.sparse(),
                              limit=limit, multilingual=multilingual, fusion=fusion,
                              payload_keys=HIT_PAYLOAD)  # fmt: skip
    return Round(
        ranked=legs.fused,
        dense_rank={point: rank for rank, point in enumerate(legs.dense, 1)},
        lexical_rank={point: rank for rank, point in enumerate(legs.lexical, 1)},
        multilingual_rank={point: rank for rank, point in enumerate(legs.multilingual, 1)},
        similarity=legs.dense_scores,
    )


def specific_round(question: Question, scope: Scope, limit: int, intent: Plan) -> Round:
    """The question and its intent sub-queries, each a round, fused by RRF (the question weighs most). Ranks
    and similarities are the question's own."""
    rounds = [
        one_round(
            question.sub(sub.text), scope if sub.mode is None or scope.mode else replace(scope, mode=sub.mode), limit
        )  # fmt: skip
        for sub in intent.subqueries
    ]
    payloads: dict[str, dict[str, Any]] = {}
    for found in rounds:
        for hit in found.ranked:
            payloads.setdefault(hit.id, hit.payload)
    fused = rrf_merge([([hit.id for hit in found.ranked], sub.weight) for found, sub in zip(rounds, intent.subqueries,
                                                                                           strict=True)])  # fmt: skip
    ordered = sorted(fused.items(), key=lambda item: item[1], reverse=True)[:limit]
    own = rounds[0]
    return Round(
        ranked=[Hit(point, score, payloads[point]) for point, score in ordered],
        dense_rank=own.dense_rank,
        lexical_rank=own.lexical_rank,
        multilingual_rank=own.multilingual_rank,
        similarity=dict(own.similarity),
    )


# A critical mark lifts a chunk among the relevant ones, never above them: only a chunk both legs found, or one
# leg ranked in its first few, gets the boost. (A critical page about MIME databases at dense rank 11 and no
# lexical rank was put first for "Is libffi thread safe?", above the page both legs ranked first.)
CRITICAL_TOP_RANK = 5


def relevant(found: Round, point: str) -> bool:
    """Two legs found it, or one ranked it among its first few (the dense legs count as one: either will do)."""
    dense = [r for r in (found.dense_rank.get(point), found.multilingual_rank.get(point)) if r is not None]
    lexical = found.lexical_rank.get(point)
    ranks = [*dense, *([lexical] if lexical is not None else [])]
    return (bool(dense) and lexical is not None) or any(rank <= CRITICAL_TOP_RANK for rank in ranks)
