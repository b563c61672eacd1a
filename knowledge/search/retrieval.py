"""question → hybrid search (dense + lexical, fused by RRF in Qdrant) → ranked, located excerpts.

`retrieve` is the one read path: the API, the bootstrap pack and answers are built on it.
Every call takes the viewer (tenant and principals, tenants/principals.py) from the caller; a scope can only
narrow within what that viewer may see, and the principals go into the vector query itself.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings

from core import languages
from core.problems import DomainError
from inference import translation
from inference.embedders import EmbedderIdentity, get_embedder
from knowledge.index.lexical import query_vector, search_vector
from knowledge.index.vectorstore import RRF_K, Fusion, Hit, Scope, Weights, get_store
from knowledge.models import RANKING_ONLY_MODES, Chunk, DocumentVersion, Status
from knowledge.search.ranking import definition_names, is_test_path, mentions_tests, rrf_merge
from knowledge.search.specific import Plan, plan
from knowledge.selectors import query_principals, tables_of_versions
from knowledge.validity import Clock, Freshness
from tenants.models import Tenant
from tenants.principals import Viewer

MODES = ("auto", "documental", "code")
CANDIDATES = 50  # fused candidates considered before boosts and the cut to top_k


class IndexMismatch(DomainError):
    """The tenant's vectors come from another embedder than the configured one: a reindex is needed."""

    status, code = 409, "index_mismatch"


def location_label(*, document_key: str, line_start: int | None, line_end: int | None, page: int | None,
                   heading: str = "") -> str:  # fmt: skip
    """Where an excerpt comes from, for citations: "docs/install.md, lines 12-40, Install › Linux"."""
    where = [document_key]
    if page:
        where.append(f"page {page}")
    elif line_start:
        where.append(f"lines {line_start}-{line_end or line_start}")
    if heading:
        where.append(heading)
    return ", ".join(where)


def page_of(chunk: Chunk, text: str) -> int | None:
    """The page of a chunk on which `text` (a query, a claim) sits: for a chunk that spans pages, the page
    whose part of the chunk shares the most terms with it (ties: the earlier page); else the chunk's page."""
    spans = chunk.page_spans or []
    if len(spans) < 2:
        return chunk.page
    wanted = set(query_vector(text)[0])
    bounds = [*(int(s[0]) for s in spans[1:]), len(chunk.text)]
    best, best_shared = spans[0][1], 0
    for (start, number, _), end in zip(spans, bounds, strict=True):
        shared = len(wanted & set(query_vector(chunk.text[int(start) : end])[0]))
        if shared > best_shared:
            best, best_shared = number, shared
    return best


@dataclass(kw_only=True)
class RetrievedChunk:
    chunk: Chunk
    score: float
    dense_rank: int | None = None
    lexical_rank: int | None = None
    multilingual_rank: int | None = None
    boost: float = 0.0
    tags: list[str] = field(default_factory=list)
    similarity: float | None = None  # cosine similarity of the dense leg, when it found the chunk
    page: int | None = None  # the page the matching text is on (a chunk may span pages); None: the chunk's
    rerank: float | None = None  # the cross-encoder's logit, when the hit was reranked
    defines: list[str] = field(default_factory=list)  # names of the question this chunk defines (code)
    freshness: Freshness | None = None  # is what it says still true (knowledge/validity.py)
    table: dict[str, Any] | None = None  # the table the chunk shows, which an answer can compute over

    @property
    def location_page(self) -> int | None:
        return self.page if self.page is not None else self.chunk.page

    @property
    def text(self) -> str:
        return self.chunk.text

    @property
    def label(self) -> str:
        return self.label_at(self.location_page)

    def label_at(self, page: int | None) -> str:
        """Where the chunk sits, naming `page` (a chunk spanning pages is cited at the page of its cited text)."""
        chunk = self.chunk
        return location_label(
            document_key=chunk.document.display_key, line_start=chunk.line_start, line_end=chunk.line_end,
            page=page, heading=chunk.heading,
        )  # fmt: skip

    @property
    def signals(self) -> dict[str, float | int | None]:
        signals: dict[str, float | int | None] = {
            "dense_rank": self.dense_rank, "lexical_rank": self.lexical_rank, "boost": round(self.boost, 6),
        }  # fmt: skip
        if self.multilingual_rank is not None:
            signals["multilingual_rank"] = self.multilingual_rank
        if self.rerank is not None:
            signals["rerank"] = round(self.rerank, 4)
        if self.defines:
            signals["defines"] = ", ".join(self.defines)  # type: ignore[assignment]
        return signals


@dataclass
class RetrieveFilters:
    source_ids: list[str] | None = None
    tags: list[str] | None = None
    mode: str = "auto"
    statuses: list[str] = field(default_factory=lambda: [Status.ACTIVE])
    critical_only: bool = False
    document_ids: list[str] | None = None  # within these documents only (a curation item's named document)
    as_of: dt.datetime | None = None  # what was in force then (knowledge/validity.py); None: now
    include_expired: bool = False  # also documents not in force (expired, superseded, not yet valid), marked
    # Documents whose stated window covers this past instant and that no document in force then supersedes, in
    # their current versions (a question about 2025 reads the 2025 policy, though it was loaded this year).
    in_force_at: dt.datetime | None = None

    def scope(self, tenant: Tenant) -> Scope:
        return Scope(
            tenant=str(tenant.public_id),  # from the caller, never from the request body
            statuses=list(self.statuses),
            source_ids=self.source_ids,
            document_ids=self.document_ids,
            tags=self.tags or None,
            mode=self.mode if self.mode in ("documental", "code") else None,
            critical_only=self.critical_only,
        )


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


# How much each leg counts (weighted RRF), by whether a chunk is in the question's language. The same language: the
# English embedder (for English; for another language it places words poorly), the lexical leg and the multilingual
# leg. Across languages the English embedder and the lexical leg (identifiers aside) say nothing, and the
# multilingual leg leads. Chosen on the tune half of bench/data/crosslingual (bench/crosslingual_tune.py).
SAME_ENGLISH = Weights(dense=1.0, multilingual=1.0, lexical=1.0)
SAME_OTHER = Weights(dense=0.0, multilingual=1.0, lexical=1.0)
CROSS = Weights(dense=0.0, multilingual=2.0, lexical=0.5)
# A question glossed into English (inference/translation.py): for an English chunk, the English embedder reads the
# gloss, and the lexical leg holds the gloss's English words beside the question's own.
GLOSSED_CROSS = Weights(dense=1.0, multilingual=1.0, lexical=0.5)
PREVIOUS_INDEX = Weights(dense=1.0, multilingual=0.0, lexical=1.0)  # no multilingual leg: as before issue 52
TENANT_LANGUAGES_TTL_S = 60.0
_tenant_languages: dict[Any, tuple[float, list[str]]] = {}


def found_languages(tenant: Tenant) -> list[str]:
    """The languages of the tenant's chunks (core/languages.py); kept a minute."""
    cached = _tenant_languages.get(tenant.public_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    found = set(Chunk.objects.filter(tenant=tenant).exclude(language="").values_list("language", flat=True)
                .distinct().order_by())  # fmt: skip
    codes = [code for code in languages.LANGUAGES if code in found]
    _tenant_languages[tenant.public_id] = (time.monotonic() + TENANT_LANGUAGES_TTL_S, codes)
    return codes


def tenant_languages(tenant: Tenant) -> list[str]:
    """The languages a question's words are looked up in besides its own: English, and the tenant's."""
    return list(dict.fromkeys([languages.DEFAULT, *found_languages(tenant)]))


@dataclass(frozen=True)
class Question:
    """A question as the legs read it: its text, its language, the languages its words are looked up in, the index
    searched, and for a question not in English over a tenant with English text, its English gloss when there is
    one (inference/translation.py)."""

    text: str
    language: str
    lookup: tuple[str, ...]
    index: EmbedderIdentity
    gloss: str | None = None

    @classmethod
    def of(cls, tenant: Tenant, text: str, index: EmbedderIdentity) -> Question:
        language = languages.detect(text)
        lookup = tuple(dict.fromkeys([language, *tenant_languages(tenant)]))
        gloss = None
        if index.multilingual_dims and language != languages.DEFAULT and languages.DEFAULT in found_languages(tenant):
            gloss = translation.gloss(text, language, scope=str(tenant.public_id))
        return cls(text, language, lookup, index, gloss)

    def sub(self, text: str) -> Question:
        return replace(self, text=text, gloss=self.gloss if text == self.text else None)

    @property
    def fusion(self) -> Fusion:
        if not self.index.multilingual_dims:
            return Fusion(same=PREVIOUS_INDEX)
        same = SAME_ENGLISH if self.language == languages.DEFAULT else SAME_OTHER
        return Fusion(language=self.language, same=same, cross=GLOSSED_CROSS if self.gloss else CROSS)

    def sparse(self) -> tuple[list[int], list[float]]:
        """The question's terms in each language it is looked up in, and its gloss's as English stems them (a term
        in both weighs once)."""
        indices, values = search_vector(self.text, list(self.lookup))
        if not self.gloss:
            return indices, values
        terms = dict(zip(indices, values, strict=True))
        for index, value in zip(*query_vector(self.gloss, languages.DEFAULT), strict=True):
            terms[index] = max(terms.get(index, 0.0), value)
        return list(terms), list(terms.values())

    @property
    def english(self) -> str:
        """What the English embedder reads: the gloss when there is one."""
        return self.gloss or self.text


def _hydrate(viewer: Viewer, ranked: list[Hit]) -> dict[str, Chunk]:
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


# What the ranking reads of a fused hit's payload (_boosted, _candidates, _definitions): only these are read from the
# store (0.35 ms for 50 points against 0.45 ms for their whole payloads, measured).
HIT_PAYLOAD = ("mode", "tags", "critical", "defines", "document_key")
QUERY_CACHE_SIZE = 1024  # query texts whose embedding is kept (an agent, a chat client and a bench repeat them)
_query_cache: OrderedDict[tuple[int, Any, str], list[float]] = OrderedDict()
_query_cache_lock = threading.Lock()


def query_embedding(query: str, *, multilingual: bool = False) -> list[float]:
    """The configured embedder's vector of a query (or its multilingual leg's), from a small LRU cache when the same
    text was asked lately (the same embedder object: a swapped or reconfigured embedder never reads another's
    vectors)."""
    embedder = get_embedder()
    key = (id(embedder), embedder.identity, f"multilingual:{query}" if multilingual else query)
    with _query_cache_lock:
        cached = _query_cache.get(key)
        if cached is not None:
            _query_cache.move_to_end(key)
            return cached
    embed = embedder.embed_multilingual if multilingual else embedder.embed  # type: ignore[attr-defined]
    vector = embed([query])[0].tolist()
    with _query_cache_lock:
        _query_cache[key] = vector
        while len(_query_cache) > QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector


def _one_round(question: Question, scope: Scope, limit: int) -> Round:
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


def _specific_round(question: Question, scope: Scope, limit: int, intent: Plan) -> Round:
    """The question and its intent sub-queries, each a round, fused by RRF (the question weighs most). Ranks
    and similarities are the question's own."""
    rounds = [
        _one_round(
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


def _relevant(found: Round, point: str) -> bool:
    """Two legs found it, or one ranked it among its first few (the dense legs count as one: either will do)."""
    dense = [r for r in (found.dense_rank.get(point), found.multilingual_rank.get(point)) if r is not None]
    lexical = found.lexical_rank.get(point)
    ranks = [*dense, *([lexical] if lexical is not None else [])]
    return (bool(dense) and lexical is not None) or any(rank <= CRITICAL_TOP_RANK for rank in ranks)


def viewer_scope(viewer: Viewer, filters: RetrieveFilters, clock: Clock | None = None) -> Scope:
    """The vector query's scope for this viewer: the filters, within the tenant, within the viewer's principals, in
    force at the read's instant."""
    scope = filters.scope(viewer.tenant)
    scope.principals = query_principals(viewer)
    return in_force(scope, filters, clock or Clock.for_read(viewer.tenant, filters.as_of))


def served_in_force(filters: RetrieveFilters, clock: Clock) -> bool:
    """A read now that asked for nothing else serves only documents in force: none of its hits is superseded."""
    return not filters.include_expired and not clock.as_of


def in_force(scope: Scope, filters: RetrieveFilters, clock: Clock) -> Scope:
    """The validity rules as payload conditions: points whose window covers the instant, of documents not superseded
    then; as of an instant, each document's version served then (superseded and retired versions included)."""
    if clock.as_of:
        scope.statuses = sorted({*(scope.statuses or []), Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED})
        scope.served_at = clock.at.timestamp()
    if filters.include_expired:
        return scope
    if filters.in_force_at is not None and not clock.as_of:  # the stated windows and links, at that instant
        scope.valid_at = scope.superseded_at = filters.in_force_at.timestamp()
        return scope
    scope.valid_at = clock.at.timestamp()
    if clock.as_of:  # who superseded whom then: from SQL, as a (short) list of document ids
        scope.excluded_document_ids = clock.superseded_ids() or None
    elif not clock.rules_apply():  # no document has a window or a link: nothing to leave out, no condition sent
        scope.valid_at = None
    else:  # now: the points carry their successor's window; only a change not yet in the payloads goes by id
        scope.superseded_at = clock.at.timestamp()
        scope.excluded_document_ids = clock.unsynced_out_of_force_ids() or None
    return scope


@dataclass(frozen=True)
class HeldMatch:
    """A chunk the session holds that a read matched: its rank among everything the read matched (1 = first)."""

    rank: int
    chunk_id: str
    document_id: str


@dataclass
class Held:
    """What an agent's session already holds (knowledge/memory.py), by chunk id and text: an unchanged chunk of a
    newer version is still held, an edited one is new. retrieve() does not count a held chunk among its top_k: it
    reads deeper instead, and lists in `matched` each held chunk the query matched before its last new hit.

    The session's ledger is asked with indexed queries, however long it is: `points` — which candidate points it was
    given (the same chunk and version), set aside before any SQL row is read — and, for the documents `renewed`
    since it was given chunks of them (asked once), `texts` — for the rows read, which (chunk id, text) pairs it
    holds (a newer version's unchanged chunk)."""

    points: Any = None  # Callable[[list[str]], dict[str, tuple[str, str]]]: point ids → (chunk id, document id)
    texts: Any = None  # Callable[[list[str]], set[tuple[str, str]]]: chunk ids → the (chunk id, text hash) held
    renewed: Any = None  # Callable[[], set[str]]: the document_ids it holds chunks of an older version of
    _renewed: set[str] | None = None
    keys: set[tuple[str, str]] = field(default_factory=set)
    asked: set[str] = field(default_factory=set)  # chunk ids whose texts were asked about
    pointed: set[str] = field(default_factory=set)  # point ids asked about
    skipped: list[tuple[float, str, str]] = field(default_factory=list)  # (score, chunk id, document id)
    matched: list[HeldMatch] = field(default_factory=list)

    def skip(self, scored: list[tuple[Hit, float, list[str]]]) -> list[tuple[Hit, float, list[str]]]:
        """The candidates whose points the session was not given; the others are kept aside with their score."""
        ids = [hit.id for hit, _, _ in scored if hit.id not in self.pointed]
        given = self.points(ids) if ids and self.points is not None else {}
        self.pointed |= set(ids)
        self.skipped = [(hit.score + boost, *given[hit.id]) for hit, boost, _ in scored if hit.id in given]
        return [item for item in scored if item[0].id not in given]

    def learn(self, chunks: Any) -> None:
        """Rows read: ask about the points no `skip` asked about (an answer's hits, a summary's source chunks), and
        about the texts (once each chunk id) of documents it holds chunks of an older version of."""
        chunks = list(chunks)
        if not chunks:
            return
        unasked = [c for c in chunks if c.point_id not in self.pointed]
        if unasked and self.points is not None:
            given = self.points([c.point_id for c in unasked])
            self.keys |= {(c.chunk_id, c.content_hash) for c in unasked if c.point_id in given}
            self.pointed |= {c.point_id for c in unasked}
        if self._renewed is None:
            self._renewed = self.renewed() if self.renewed is not None else set()
        new = {c.chunk_id for c in chunks if c.document.document_id in self._renewed} - self.asked
        if new and self.texts is not None:
            self.keys |= self.texts(sorted(new))
        self.asked |= new

    def holds(self, chunk: Chunk) -> bool:
        return (chunk.chunk_id, chunk.content_hash) in self.keys


MAX_HELD_DEPTH = 400  # candidates read past the first round for a session's held chunks, at most


def _first_new(results: list[RetrievedChunk], count: int, held: Held | None) -> list[RetrievedChunk]:
    """The shortest head of `results` with `count` chunks not held (all of it when it has fewer)."""
    if held is None:
        return results[:count]
    taken = 0
    for position, result in enumerate(results):
        if not held.holds(result.chunk):
            taken += 1
            if taken == count:
                return results[: position + 1]
    return results


def _new_count(results: list[RetrievedChunk], held: Held | None) -> int:
    return len(results) if held is None else sum(1 for r in results if not held.holds(r.chunk))


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
        if held is None or not more or _new_count(results, held) >= wanted or limit >= deepest:
            break
        limit = min(limit * 3, deepest)
    if rerank:
        results = cross_encoder_fused(query, _first_new(results, max(top_k, RERANK_CANDIDATES), held))
    results = source_text_only(viewer, question, _first_new(results, top_k + SUMMARY_EXPANSION * 2, held), base_scope)
    if held is not None:
        held.learn(r.chunk for r in results)  # a summary's source chunks, read just now
    results = _without_held(results, top_k, held)
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
    found = (_specific_round(question, scope, limit, intent) if intent
             else _one_round(question, scope, limit))  # fmt: skip
    defining = _definitions(question, scope)
    ranked = [*found.ranked, *(hit for hit in defining.values() if hit.id not in {h.id for h in found.ranked})]
    scored = _boosted(query, ranked, found, defining)
    chunks = read
    if intent is not None:  # the intent's bonus reads each candidate's text: all of them are hydrated
        chunks.update(_hydrate(viewer, [hit for hit in ranked if hit.id not in chunks]))
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
    while _new_count(results, held) < wanted and cursor < len(scored):
        needed = wanted - _new_count(results, held)
        # In a session, held chunks are read past: a larger batch saves round trips when many of them rank first.
        batch = scored[cursor : cursor + (needed + HYDRATE_SPARE if held is None else max(2 * needed, 16))]
        cursor += len(batch)
        if intent is None:
            fresh = _hydrate(viewer, [hit for hit, _, _ in batch if hit.id not in chunks])
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


def _without_held(results: list[RetrievedChunk], top_k: int, held: Held | None) -> list[RetrievedChunk]:
    """The first top_k chunks not held; the held ones ranked among them, whether skipped by their point or read and
    found held by their text, go to `held.matched` with their rank among all of them."""
    if held is None:
        return results[:top_k]
    kept: list[RetrievedChunk] = []
    merged: list[tuple[float, str, str] | RetrievedChunk] = []
    for result in results:
        if len(kept) == top_k:
            break
        if held.holds(result.chunk):
            merged.append((result.score, result.chunk.chunk_id, result.chunk.document.document_id))
        else:
            kept.append(result)
            merged.append(result)
    floor = kept[-1].score if len(kept) == top_k else float("-inf")  # held ones ranked above the last new hit
    merged += [item for item in held.skipped if item[0] >= floor]
    merged.sort(key=lambda item: item[0] if isinstance(item, tuple) else item.score, reverse=True)  # stable
    held.matched = [HeldMatch(rank, item[1], item[2]) for rank, item in enumerate(merged, 1)
                    if isinstance(item, tuple)]  # fmt: skip
    return kept


def with_tables(viewer: Viewer, results: list[RetrievedChunk]) -> None:
    """Say of each hit that shows a kept table (knowledge.models.DocumentTable of its version: the sheet or the
    heading the chunk is under, or the version's one table) which it is: its name, columns and rows, so an agent
    knows it can ask for a computation over it."""
    shows = [r for r in results if r.chunk.document_version_id and _may_show_table(r.chunk)]
    versions = {r.chunk.document_version_id for r in shows}
    if not versions:  # no hit can show a table: no query (most hits are prose)
        return
    kept: dict[int, list[Any]] = {}
    for table in tables_of_versions(viewer=viewer, version_ids=list(versions)).defer("rows", "row_numbers"):
        kept.setdefault(table.version_id, []).append(table)
    for result in shows:
        tables = kept.get(result.chunk.document_version_id or 0, [])
        named = [t for t in tables if t.name == result.chunk.heading] or (tables if len(tables) == 1 else [])
        if named:
            table = named[0]
            columns = [{"name": c["name"], "type": c.get("type", "text")} for c in table.columns]
            result.table = {"name": table.name, "columns": columns, "rows": table.row_count}


TABLE_TEXT_RE = re.compile(r"^\s*\|.*\|\s*$|\bRow \d", re.MULTILINE)  # a Markdown table row, a sheet's `Row n:`


def _may_show_table(chunk: Chunk) -> bool:
    """Whether a chunk's text is a table's: a CSV or TSV file's, Markdown table rows, or a sheet's `Row n` lines."""
    whole = chunk.document.display_key.lower().endswith((".csv", ".tsv"))  # the file is its table
    return whole or bool(TABLE_TEXT_RE.search(chunk.text))


HYDRATE_SPARE = 4  # hits read from SQL beyond those that can be returned, for the ones SQL drops


def _boosted(
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
        relevant = _relevant(found, hit.id)
        boost = boost_value if payload.get("critical") and relevant else 0.0
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


def _definitions(question: Question, scope: Scope) -> dict[str, Hit]:
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
    found = _one_round(question, replace(scope, document_ids=documents), (SUMMARY_EXPANSION + 1) * len(documents))
    chunks = _hydrate(viewer, found.ranked)
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
    chunks = _hydrate(viewer, hits)
    found = [chunks[h.id] for h in hits if h.id in chunks and chunks[h.id].mode not in RANKING_ONLY_MODES]
    scores = {h.id: h.score for h in hits}
    return [
        RetrievedChunk(chunk=chunk, score=scores[chunk.point_id],
                       freshness=clock.freshness(chunk.document, chunk.document_version, sees=viewer.sees,
                                                 in_force=served_in_force(filters, clock)))
        for chunk in found
    ]  # fmt: skip
