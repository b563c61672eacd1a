"""What lifts or lowers a fused hit: a critical mark among the relevant ones, a definition of a name the question
asks about, a test file's penalty, a summary or card expanded into its source chunks, and the cross-encoder's order
fused with the hybrid one."""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from knowledge.index.lexical import query_vector
from knowledge.index.vectorstore import RRF_K, Hit, Scope, get_store
from knowledge.models import RANKING_ONLY_MODES
from knowledge.search.hits import RetrievedChunk
from knowledge.search.question import Question
from knowledge.search.ranking import definition_names, is_test_path, mentions_tests, rrf_merge
from knowledge.search.rounds import Round, hydrate, one_round, relevant
from tenants.principals import Viewer


def boosted(
    query: str, ranked: list[Hit], found: Round, defining: dict[str, Hit]
) -> list[tuple[Hit, float, list[str]]]:
    """Each candidate with what is added to its fused score, from its payload alone: the critical mark (when
    relevant), the definition of a name the question writes, a test file's penalty."""
    boost_value = settings.RAG_CRITICAL_BOOST
    tests_asked, query_names = mentions_tests(query), definition_names(query)
    order = list(defining)
    scored = []
    for hit in ranked:
        payload = hit.payload
        is_relevant = relevant(found, hit.id)
        boost = boost_value if payload.get("critical") and is_relevant else 0.0
        names = [name for name in query_names if name in (payload.get("defines") or [])] if hit.id in defining else []
        if names:  # it defines what the question names: first, above every chunk that only uses it
            boost += DEFINITION_BOOST * (1.0 - 0.1 * order.index(hit.id))
        elif not tests_asked and payload.get("mode") == "code" and is_test_path(str(payload.get("document_key") or "")):
            boost -= TEST_PENALTY  # a test that calls it ranks below the code it tests
        scored.append((hit, boost, names))
    return scored


SUMMARY_EXPANSION = 2  # source chunks of its document that take a summary's place
CARD_EXPANSION = 1  # a card's: the file's best chunk (measured: two crowded out other files, evaluation.md)
DEFINITION_HITS = 3  # the chunks that define a name of the question lifted first (a name defined in many places)
DEFINITION_BOOST = 2.0 / (RRF_K + 1)  # above any fused score: both legs ranking a chunk first give 2 / (k + 1)
TEST_PENALTY = 0.5 / (RRF_K + 1)  # a test file's chunk below the code it exercises, unless tests are asked for


def definitions(question: Question, scope: Scope) -> dict[str, Hit]:
    """The code chunks that define a name the question mentions (`DEFAULT_LIMITS`, `Client.send`), best first:
    a lexical search inside the vector query, restricted to points whose `defines` holds one of the names, with
    every condition of the scope (tenant, principals, validity) still in force. A question about tests looks for
    tests, not for the code they exercise: then only definitions in test files count; otherwise a test file's helper
    that happens to carry the name is not its definition."""
    names = definition_names(question.text)
    if not names:
        return {}
    hits = get_store().search(question.index, replace(scope, defines=names), dense=None,
                              sparse=query_vector(" ".join(names)), limit=DEFINITION_HITS * 4)  # fmt: skip
    tests = mentions_tests(question.text)
    hits = [hit for hit in hits if is_test_path(str(hit.payload.get("document_key") or "")) == tests]
    return {hit.id: hit for hit in hits[:DEFINITION_HITS]}


def source_text_only(viewer: Viewer, question: Question, results: list[RetrievedChunk],
                     scope: Scope) -> list[RetrievedChunk]:  # fmt: skip
    """Only source text is evidence: a hit on a model-written summary is replaced, at its rank, by its document's
    best source chunks for the query (those already ranked lower move up; the rest come from a search within that
    document, the viewer's principals still in the query). A summary may rank a document; it is never returned."""
    summaries = [hit for hit in results if hit.chunk.mode in RANKING_ONLY_MODES]
    if not summaries:
        return results
    documents = list(dict.fromkeys(hit.chunk.document.document_id for hit in summaries))
    found = one_round(question, replace(scope, document_ids=documents), (SUMMARY_EXPANSION + 1) * len(documents))
    chunks = hydrate(viewer, found.ranked)
    extra: dict[str, list[RetrievedChunk]] = {}
    for point in found.ranked:
        chunk = chunks.get(point.id)
        if chunk is not None and chunk.mode not in RANKING_ONLY_MODES:
            extra.setdefault(chunk.document.document_id, []).append(
                RetrievedChunk(chunk=chunk, score=point.score, dense_rank=found.dense_rank.get(point.id),
                               lexical_rank=found.lexical_rank.get(point.id),
                               tags=list(point.payload.get("tags") or []), similarity=found.similarity.get(point.id))
            )  # fmt: skip
    out: list[RetrievedChunk] = []
    taken: set[str] = set()
    for hit in results:
        if hit.chunk.mode not in RANKING_ONLY_MODES:
            if hit.chunk.chunk_id not in taken:
                out.append(hit)
                taken.add(hit.chunk.chunk_id)
            continue
        document = hit.chunk.document.document_id
        ranked_lower = [
            h for h in results if h.chunk.document.document_id == document and h.chunk.mode not in RANKING_ONLY_MODES
        ]
        for source in [*ranked_lower, *extra.get(document, [])]:
            wanted = CARD_EXPANSION if hit.chunk.mode == "card" else SUMMARY_EXPANSION
            if len([h for h in out if h.chunk.document.document_id == document]) >= wanted:
                break
            if source.chunk.chunk_id not in taken:
                source.score = max(source.score, hit.score)  # it takes the summary's rank
                out.append(source)
                taken.add(source.chunk.chunk_id)
    return out


RERANK_CANDIDATES = 20  # the hybrid's first hits the cross-encoder reads (the measurements: top 20)


def cross_encoder_fused(query: str, hits: list[RetrievedChunk]) -> list[RetrievedChunk]:
    """The hits in the order of the Reciprocal Rank Fusion of the hybrid order and the cross-encoder's; each
    keeps the cross-encoder's logit in its signals and gets the fused score. Fused, not replaced: measured by
    the issue's authors, the cross-encoder alone wins on some corpora and loses on others (Spanish)."""
    from knowledge.search.rerank import get_reranker

    if not hits:
        return hits
    logits = get_reranker().score(query, [hit.chunk.text for hit in hits])
    by_cross_encoder = sorted(range(len(hits)), key=lambda i: -logits[i])
    fused = rrf_merge([([str(i) for i in range(len(hits))], 1.0), ([str(i) for i in by_cross_encoder], 1.0)])
    for i, hit in enumerate(hits):
        hit.rerank, hit.score = float(logits[i]), fused[str(i)]
    return sorted(hits, key=lambda hit: -hit.score)
