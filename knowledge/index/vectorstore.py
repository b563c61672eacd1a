"""The only module that talks to Qdrant: collections, payload indexes, upserts, deletes, queries.

Two backends behind one interface:
- EdgeStore: the Qdrant engine in-process (qdrant-edge-py), one shard per collection under
  RAG_QDRANT_PATH. Exactly one process may hold a shard: an OS lock (flock on a sidecar file)
  taken *before* the shard is opened enforces it; a second process gets StoreBusy and never
  touches the files (a failed second open was measured to corrupt the holder's next flush).
- ClientStore: qdrant-client against a Qdrant server or cluster (QDRANT_URL), or ":memory:" in tests.

One collection per embedding model (named from the embedder identity); every point carries the
tenant's public id in its payload, indexed with is_tenant, and every call takes the tenant. Every point also
carries `access`, the principals that may read it (a keyword index); a query for a restricted viewer carries
the viewer's principals (`Scope.principals`), so both legs, dense and lexical, rank only what it may see.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from core.problems import DomainError
from inference.embedders import EmbedderIdentity

logger = logging.getLogger(__name__)

DENSE = "dense"
MULTILINGUAL = "dense_multilingual"  # the multilingual leg's vector, in an index that has one
SPARSE = "bm25"
RRF_K = 60
KEYWORD_FIELDS = ("document_id", "source_id", "status", "mode", "tags", "version_key", "access", "defines")
# Validity and serving windows, epoch seconds (null: open); knowledge/validity.py writes them, `Scope.at` reads them.
WINDOW_FIELDS = ("valid_from", "valid_until", "served_from", "served_until", "superseded_from", "superseded_until")
POINT_NAMESPACE = uuid.UUID("6f1c2b0e-3f55-4c39-9a53-1f0d6c7e2a41")


class StoreBusy(DomainError):
    """Another process owns the embedded store; this one must leave writes to it."""

    status, code = 503, "store_busy"
    public = _("The vector store is busy or unavailable; retry shortly.")


def point_id(chunk_id: str, version: int) -> str:
    """Stable point id for one chunk of one document version."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{chunk_id}@{version}"))


@dataclass
class StorePoint:
    id: str
    dense: list[float]
    sparse: tuple[list[int], list[float]]
    payload: dict[str, Any]
    multilingual: list[float] | None = None


@dataclass
class Scope:
    """What a query or bulk operation may touch. The tenant is mandatory; the rest narrows it."""

    tenant: str  # the tenant's public id
    statuses: list[str] | None = field(default_factory=lambda: ["active"])
    source_ids: list[str] | None = None
    document_ids: list[str] | None = None
    tags: list[str] | None = None
    mode: str | None = None
    critical_only: bool = False
    version_keys: list[str] | None = None
    point_ids: list[str] | None = None
    principals: list[str] | None = None  # the viewer's (tenants/principals.py); None: every point of the tenant
    # In force at this instant (epoch seconds): the point's validity window covers it (knowledge/validity.py).
    valid_at: float | None = None
    served_at: float | None = None  # an as-of read: the version served at this instant
    superseded_at: float | None = None  # a read now: not superseded by a document in force at this instant
    excluded_document_ids: list[str] | None = None  # superseded at that instant
    defines: list[str] | None = None  # points of code chunks that define one of these names


@dataclass
class Hit:
    id: str
    score: float
    payload: dict[str, Any]


@dataclass
class Legs:
    """One hybrid query: the RRF-fused ranking, and the point ids each leg found, in rank order."""

    fused: list[Hit]
    dense: list[str]
    lexical: list[str]
    dense_scores: dict[str, float] = field(default_factory=dict)  # cosine similarity per point
    multilingual: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Weights:
    """How much each leg's rank counts in the fusion (weighted RRF: Σ weight / (k + rank))."""

    dense: float = 1.0
    multilingual: float = 1.0
    lexical: float = 1.0


@dataclass(frozen=True)
class Fusion:
    """How the legs are fused for one question: by whether a point's text is in the question's language (`same`) or
    not (`cross`: the English embedder and the lexical leg say little across languages, the multilingual leg most).
    A point's language is in its payload (`language`); one without is English. `language` None: `same` for all."""

    language: str | None = None
    same: Weights = Weights()
    cross: Weights = Weights()

    def of(self, payload: dict[str, Any]) -> Weights:
        if self.language is None or (payload.get("language") or "en") == self.language:
            return self.same
        return self.cross


class VectorStore(Protocol):
    def ensure_collection(self, identity: EmbedderIdentity) -> None: ...
    def upsert(self, identity: EmbedderIdentity, points: list[StorePoint]) -> None: ...
    def delete(self, identity: EmbedderIdentity, scope: Scope) -> None: ...
    def set_payload(self, identity: EmbedderIdentity, scope: Scope, payload: dict[str, Any]) -> None: ...
    def count(self, identity: EmbedderIdentity, scope: Scope) -> int: ...
    def ids(self, identity: EmbedderIdentity, scope: Scope) -> set[str]: ...
    def search(
        self, identity: EmbedderIdentity, scope: Scope, *, dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None, limit: int, prefetch: int = 100,
        multilingual: list[float] | None = None,
    ) -> list[Hit]: ...  # fmt: skip
    def hybrid(
        self, identity: EmbedderIdentity, scope: Scope, *, dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None, limit: int, prefetch: int = 100,
        multilingual: list[float] | None = None, fusion: Fusion | None = None,
        payload_keys: tuple[str, ...] | None = None,
    ) -> Legs: ...  # fmt: skip
    def close(self) -> None: ...


def _conditions(m: Any, scope: Scope, *, edge: bool) -> Any:
    """Build a Filter from either backend's models module (their shapes match)."""
    must = [m.FieldCondition(key="tenant", match=m.MatchValue(value=scope.tenant))]

    def any_of(key: str, values: list[str]) -> None:
        must.append(m.FieldCondition(key=key, match=m.MatchAny(any=list(values))))

    if scope.statuses:
        any_of("status", scope.statuses)
    if scope.source_ids is not None:
        any_of("source_id", scope.source_ids)
    if scope.document_ids is not None:
        any_of("document_id", scope.document_ids)
    if scope.version_keys is not None:
        any_of("version_key", scope.version_keys)
    if scope.tags:
        any_of("tags", scope.tags)
    if scope.principals is not None:
        any_of("access", scope.principals)
    if scope.defines:
        any_of("defines", scope.defines)
    if scope.mode:
        must.append(m.FieldCondition(key="mode", match=m.MatchValue(value=scope.mode)))
    if scope.critical_only:
        # `critical` is stored as 0/1: qdrant-edge-py 0.9.0 turns MatchValue(True) into the integer 1,
        # which never matches a JSON boolean (measured), so both backends use integers.
        must.append(m.FieldCondition(key="critical", match=m.MatchValue(value=1)))
    if scope.point_ids is not None:
        ids = [str(i) for i in scope.point_ids]
        must.append(m.HasIdCondition(point_ids=set(ids)) if edge else m.HasIdCondition(has_id=ids))
    # A window is open where its bound is null or absent: written as "must not start after / end at or before",
    # which a point without the field always passes (a store indexed before windows existed serves as before).
    must_not = []
    for at, start, end in ((scope.valid_at, "valid_from", "valid_until"),
                           (scope.served_at, "served_from", "served_until")):  # fmt: skip
        if at is not None:
            range_type = m.RangeFloat if edge else m.Range
            must_not.append(m.FieldCondition(key=start, range=range_type(gt=at)))
            must_not.append(m.FieldCondition(key=end, range=range_type(lte=at)))
    if scope.superseded_at is not None:  # a successor's window covers the instant: [from, until), until null: open
        range_type = m.RangeFloat if edge else m.Range
        must_not.append(m.Filter(
            must=[m.FieldCondition(key="superseded_from", range=range_type(lte=scope.superseded_at))],
            must_not=[m.FieldCondition(key="superseded_until", range=range_type(lte=scope.superseded_at))],
        ))  # fmt: skip
    if scope.excluded_document_ids:
        must_not.append(m.FieldCondition(key="document_id", match=m.MatchAny(any=list(scope.excluded_document_ids))))
    return m.Filter(must=must, must_not=must_not or None)


def _tenant_idf(m: Any, scope: Scope, *, edge: bool) -> Any:
    """Search params that compute the lexical leg's IDF over this tenant's chunks only, on either backend:
    one tenant's vocabulary never shapes another's ranking (nor reveals what another tenant holds)."""
    corpus = _conditions(m, Scope(tenant=scope.tenant, statuses=None), edge=edge)
    return m.SearchParams(idf=m.IdfParams(corpus=corpus) if edge else m.IdfCorpusParams(corpus=corpus))


def _empty_scope(scope: Scope) -> bool:
    return any(
        v is not None and len(v) == 0 for v in (scope.source_ids, scope.document_ids, scope.point_ids, scope.principals)
    )


def _vectors(point: StorePoint, sparse: Any) -> dict[str, Any]:
    """A point's named vectors, for either backend (`sparse` builds its sparse vector type)."""
    vectors = {DENSE: point.dense, SPARSE: sparse(point.sparse[0], point.sparse[1])}
    if point.multilingual is not None:
        vectors[MULTILINGUAL] = point.multilingual
    return vectors


# --- one query plan, both backends ------------------------------------------------------------
@dataclass(frozen=True)
class _Leg:
    using: str  # DENSE, MULTILINGUAL or SPARSE
    vector: Any  # the dense vector, or (indices, values)

    @property
    def lexical(self) -> bool:
        return self.using == SPARSE


def _legs(dense: Any, sparse: tuple[list[int], list[float]] | None, multilingual: Any = None) -> list[_Leg]:
    legs = [] if dense is None else [_Leg(DENSE, list(dense))]
    if multilingual is not None:
        legs.append(_Leg(MULTILINGUAL, list(multilingual)))
    if sparse is not None and sparse[0]:
        legs.append(_Leg(SPARSE, (list(sparse[0]), list(sparse[1]))))
    return legs


_WEIGHT_OF = {DENSE: "dense", MULTILINGUAL: "multilingual", SPARSE: "lexical"}  # a leg's field in Weights


CANDIDATE_FACTOR = 1  # points read to fuse by language, per point of the limit (2 changed nothing on the tune half)


def _idf_of(leg: _Leg, idf: Any) -> dict[str, Any]:
    """The lexical leg computes its IDF over the tenant's chunks; the dense leg takes no search params."""
    return {"params": idf} if leg.lexical else {}


class _Planned:
    """search() and hybrid() for both backends: the same plan (filter, legs, the lexical leg's per-tenant IDF,
    RRF fusion), built with each backend's own models module through the four hooks below."""

    edge: bool
    prefetch_field: str  # what a fused request calls its legs

    def _models(self, identity: EmbedderIdentity) -> Any:
        raise NotImplementedError

    def _leg_query(self, m: Any, leg: _Leg) -> dict[str, Any]:
        raise NotImplementedError

    def _fusion(self, m: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _run(self, m: Any, identity: EmbedderIdentity, requests: list[Any]) -> list[list[Any]]:
        raise NotImplementedError

    def _points(self, identity: EmbedderIdentity, ids: list[str],
                keys: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:  # fmt: skip
        raise NotImplementedError

    def _fuse_here(self, m: Any, identity: EmbedderIdentity, legs: list[_Leg], each: list[Any], *, limit: int,
                   fusion: Fusion, payload_keys: tuple[str, ...] | None = None) -> Legs:  # fmt: skip
        """The legs run once, in one batch, and are fused here with the engine's own RRF (weight / (k + 0-based
        rank), summed), then only the fused points' payloads are read: half the engine work of running the legs
        again as prefetches of a fused request. Each leg weighs what `fusion` says for the point: the points are
        first ranked by the better of their two weightings, the first CANDIDATE_FACTOR × `limit` read, and ranked
        again by the weighting their language calls for. Ties keep the dense leg's order, then the multilingual
        leg's, then the lexical leg's. `payload_keys`: only these of each point's payload (and `language`)."""
        found = dict(zip((leg.using for leg in legs), self._run(m, identity, each), strict=True))
        # Each point's id is read once (the engine builds a UUID object on every read of `.id`: 300 points a leg),
        # and its two weightings are summed leg by leg in one pass: Σ weight / (k + 0-based rank), in the legs' order.
        ids = {using: [str(p.id) for p in points] for using, points in found.items()}
        same: dict[str, float] = {}
        cross: dict[str, float] = {}
        for using, order in ids.items():
            to_same, to_cross = getattr(fusion.same, _WEIGHT_OF[using]), getattr(fusion.cross, _WEIGHT_OF[using])
            for rank, pid in enumerate(order):
                same[pid] = same.get(pid, 0.0) + to_same / (RRF_K + rank)
                cross[pid] = cross.get(pid, 0.0) + to_cross / (RRF_K + rank)
        by_language = fusion.language is not None and fusion.same != fusion.cross
        first = {pid: max(score, cross[pid]) for pid, score in same.items()} if by_language else same
        top = sorted(first, key=first.__getitem__, reverse=True)[: limit * CANDIDATE_FACTOR if by_language else limit]
        payloads = self._points(identity, top, (*payload_keys, "language") if payload_keys is not None else None)
        fused = {pid: (same if fusion.of(payloads.get(pid, {})) is fusion.same else cross)[pid] for pid in top}
        top = sorted(top, key=fused.__getitem__, reverse=True)[:limit]  # stable: ties keep first-seen order
        return Legs(
            [Hit(pid, fused[pid], payloads[pid]) for pid in top if pid in payloads],
            ids.get(DENSE, []),
            ids.get(SPARSE, []),
            dict(zip(ids.get(DENSE, []), (float(p.score) for p in found.get(DENSE, [])), strict=True)),
            ids.get(MULTILINGUAL, []),
        )

    def _one_leg(self, m: Any, leg: _Leg, flt: Any, idf: Any, *, limit: int, payload: bool) -> Any:
        return m.QueryRequest(
            limit=limit, filter=flt, with_payload=payload, **self._leg_query(m, leg), **_idf_of(leg, idf)
        )

    def _fused(self, m: Any, legs: list[_Leg], flt: Any, idf: Any, *, limit: int, prefetch: int) -> Any:
        prefetches = [
            m.Prefetch(limit=prefetch, filter=flt, **self._leg_query(m, leg), **_idf_of(leg, idf)) for leg in legs
        ]
        return m.QueryRequest(limit=limit, filter=flt, with_payload=True, **self._fusion(m),
                              **{self.prefetch_field: prefetches})  # fmt: skip

    def search(
        self, identity: EmbedderIdentity, scope: Scope, *, dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None, limit: int, prefetch: int = 100,
        multilingual: list[float] | None = None,
    ) -> list[Hit]:  # fmt: skip
        legs = _legs(dense, sparse, multilingual if identity.multilingual_dims else None)
        if _empty_scope(scope) or not legs:
            return []
        m = self._models(identity)
        flt, idf = _conditions(m, scope, edge=self.edge), _tenant_idf(m, scope, edge=self.edge)
        if len(legs) == 1:
            request = self._one_leg(m, legs[0], flt, idf, limit=limit, payload=True)
        else:
            request = self._fused(m, legs, flt, idf, limit=limit, prefetch=prefetch)
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in self._run(m, identity, [request])[0]]

    def hybrid(
        self, identity: EmbedderIdentity, scope: Scope, *, dense: list[float] | None,
        sparse: tuple[list[int], list[float]] | None, limit: int, prefetch: int = 100,
        multilingual: list[float] | None = None, fusion: Fusion | None = None,
        payload_keys: tuple[str, ...] | None = None,
    ) -> Legs:  # fmt: skip
        """Fused ranking and each leg's ranking from one batch (the legs explain the fused rank). The multilingual
        leg runs only in an index that has one. `payload_keys`: the payload fields the caller reads of the fused hits
        (None: all of them)."""
        if _empty_scope(scope):
            return Legs([], [], [])
        m = self._models(identity)
        flt, idf = _conditions(m, scope, edge=self.edge), _tenant_idf(m, scope, edge=self.edge)
        legs = _legs(dense, sparse, multilingual if identity.multilingual_dims else None)
        each = [self._one_leg(m, leg, flt, idf, limit=prefetch, payload=False) for leg in legs]
        return self._fuse_here(m, identity, legs, each, limit=limit, fusion=fusion or Fusion(),
                               payload_keys=payload_keys)  # fmt: skip


# What a child process runs to optimize a copy of a shard (EdgeStore.optimize): its interpreter is the one held.
OPTIMIZE_CHILD = (
    "import sys, qdrant_edge; s = qdrant_edge.EdgeShard.load(sys.argv[1]); s.optimize(); s.flush(); s.close()"
)
OPTIMIZE_TIMEOUT_S = 3600


class _Gate:
    """Reads pass together; a swap waits for the reads in flight and holds new ones until it is done."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._closed = False

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def swapping(self) -> Iterator[None]:
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._closed = True
            while self._readers:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


# --- Qdrant Edge ----------------------------------------------------------------------------
class EdgeStore(_Planned):
    edge, prefetch_field = True, "prefetches"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, Any] = {}
        self._locks: dict[str, int] = {}
        self._mutex = threading.RLock()  # the map of open shards
        self._writes = threading.RLock()  # every write; held by an optimization from its copy to its swap
        self._gate = _Gate()  # reads pass together; swapping in an optimized shard waits for them
        self._written: set[str] = set()  # collections written since their last optimize()
        self.last_read = 0.0  # time.monotonic() of the last search: optimize() waits for a quiet moment

    def _shard(self, identity: EmbedderIdentity) -> Any:
        import qdrant_edge as m

        name = identity.collection
        with self._mutex:
            if name in self._shards:
                return self._shards[name]
            path = self.root / name
            lock_fd = os.open(str(self.root / f"{name}.owner.lock"), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(lock_fd)
                raise StoreBusy(f"The embedded vector store {path} is owned by another process.") from None
            os.ftruncate(lock_fd, 0)
            os.write(lock_fd, str(os.getpid()).encode())
            try:
                if (path / "wal").exists() or path.exists() and any(path.iterdir()):
                    shard = m.EdgeShard.load(str(path))
                    self._written.add(name)  # written before this process: optimize() finds out at no cost
                    # A store made before access lists or windows existed gets their indexes (idempotent).
                    for key in ("access", "defines"):
                        shard.update(m.UpdateOperation.create_field_index(key, m.PayloadSchemaType.Keyword))
                    for key in WINDOW_FIELDS:
                        shard.update(m.UpdateOperation.create_field_index(key, m.PayloadSchemaType.Float))
                else:
                    path.mkdir(parents=True, exist_ok=True)
                    vectors = {DENSE: m.EdgeVectorParams(size=identity.dims, distance=m.Distance.Cosine)}
                    if identity.multilingual_dims:
                        vectors[MULTILINGUAL] = m.EdgeVectorParams(size=identity.multilingual_dims,
                                                                   distance=m.Distance.Cosine)  # fmt: skip
                    config = m.EdgeConfig(
                        vectors=vectors,
                        sparse_vectors={SPARSE: m.EdgeSparseVectorParams(modifier=m.Modifier.Idf)},
                    )
                    shard = m.EdgeShard.create(str(path), config)
                    shard.update(m.UpdateOperation.create_field_index("tenant", m.KeywordIndexParams(is_tenant=True)))
                    for key in KEYWORD_FIELDS:
                        shard.update(m.UpdateOperation.create_field_index(key, m.PayloadSchemaType.Keyword))
                    shard.update(m.UpdateOperation.create_field_index("critical", m.PayloadSchemaType.Integer))
                    for key in WINDOW_FIELDS:
                        shard.update(m.UpdateOperation.create_field_index(key, m.PayloadSchemaType.Float))
            except Exception:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
                os.close(lock_fd)
                raise
            self._shards[name], self._locks[name] = shard, lock_fd
            return shard

    def ensure_collection(self, identity: EmbedderIdentity) -> None:
        self._shard(identity)

    def upsert(self, identity: EmbedderIdentity, points: list[StorePoint]) -> None:
        import qdrant_edge as m

        if not points:
            return
        edge_points = [m.Point(p.id, _vectors(p, lambda i, v: m.SparseVector(i, v)), p.payload) for p in points]
        with self._writes:
            self._shard(identity).update(m.UpdateOperation.upsert_points(edge_points))
            self._written.add(identity.collection)

    def delete(self, identity: EmbedderIdentity, scope: Scope) -> None:
        import qdrant_edge as m

        if _empty_scope(scope):
            return
        with self._writes:
            self._shard(identity).update(m.UpdateOperation.delete_points_by_filter(_conditions(m, scope, edge=True)))
            self._written.add(identity.collection)

    def set_payload(self, identity: EmbedderIdentity, scope: Scope, payload: dict[str, Any]) -> None:
        import qdrant_edge as m

        if _empty_scope(scope):
            return
        with self._writes:
            self._shard(identity).update(
                m.UpdateOperation.set_payload_by_filter(_conditions(m, scope, edge=True), payload)
            )

    def count(self, identity: EmbedderIdentity, scope: Scope) -> int:
        import qdrant_edge as m

        if _empty_scope(scope):
            return 0
        with self._gate.reading():
            return self._shard(identity).count(m.CountRequest(exact=True, filter=_conditions(m, scope, edge=True)))

    def ids(self, identity: EmbedderIdentity, scope: Scope) -> set[str]:
        import qdrant_edge as m

        found: set[str] = set()
        offset = None
        flt = _conditions(m, scope, edge=True)
        with self._gate.reading():
            shard = self._shard(identity)
            while True:
                records, offset = shard.scroll(
                    m.ScrollRequest(offset=offset, limit=1000, filter=flt, with_payload=False, with_vector=False)
                )
                found.update(str(r.id) for r in records)
                if offset is None:
                    return found

    def _models(self, identity: EmbedderIdentity) -> Any:
        import qdrant_edge as m

        self._shard(identity)
        return m

    def _leg_query(self, m: Any, leg: _Leg) -> dict[str, Any]:
        vector = m.SparseVector(*leg.vector) if leg.lexical else leg.vector
        return {"query": m.Query.Nearest(vector, using=leg.using)}

    def _fusion(self, m: Any) -> dict[str, Any]:
        return {"query": m.Fusion.Rrf(k=RRF_K)}

    def _run(self, m: Any, identity: EmbedderIdentity, requests: list[Any]) -> list[list[Any]]:
        self.last_read = time.monotonic()
        with self._gate.reading():
            return list(self._shard(identity).query_batch(m.QueryBatchRequest(requests)))

    def optimize(self, *, quiet_for: float = 0.0) -> bool:
        """Build the HNSW index of points written since the last call and merge small segments (Qdrant Edge does
        this only when asked), after `quiet_for` seconds without a search; True if it ran.

        Qdrant Edge's optimize holds this process's interpreter for its whole run (seconds per 10,000 new points:
        bench/optimize_wait.py), so it runs on a copy of the shard in a child process while searches go on here
        against the shard as it is; writes wait (they are in SQL, for the indexer). Then the optimized copy takes
        the shard's place: only that swap holds searches (the ones in flight finish first)."""
        with self._writes:
            if not self._written or time.monotonic() - self.last_read < quiet_for:
                return False
            for name in sorted(self._written):
                if name in self._shards:
                    self._optimize_apart(name)
            self._written.clear()
            return True

    def _optimize_apart(self, name: str) -> None:
        import qdrant_edge as m

        started, live = time.monotonic(), self.root / name
        work, old = self.root / f"{name}.optimizing", self.root / f"{name}.replaced"
        for leftover in (work, old):
            shutil.rmtree(leftover, ignore_errors=True)
        shard = self._shards[name]
        shard.flush()
        try:
            shutil.copytree(live, work, symlinks=True)
            subprocess.run([sys.executable, "-c", OPTIMIZE_CHILD, str(work)], check=True, capture_output=True,
                           timeout=OPTIMIZE_TIMEOUT_S)  # fmt: skip
        except (subprocess.SubprocessError, OSError) as exc:
            shutil.rmtree(work, ignore_errors=True)
            detail = getattr(exc, "stderr", b"") or b""
            logger.warning("Optimizing the vector store %s apart failed (%s %s); it stays as it is until the next "
                           "quiet moment", name, exc, detail[-500:].decode(errors="replace"))  # fmt: skip
            return
        with self._gate.swapping(), self._mutex:
            shard.close()
            os.rename(live, old)
            os.rename(work, live)
            try:
                self._shards[name] = m.EdgeShard.load(str(live))
            except Exception:  # the copy does not open: the shard as it was comes back
                logger.exception("The optimized copy of the vector store %s does not open; keeping the original", name)
                os.rename(live, work)
                os.rename(old, live)
                self._shards[name] = m.EdgeShard.load(str(live))
                shutil.rmtree(work, ignore_errors=True)
                return
        shutil.rmtree(old, ignore_errors=True)
        logger.info("Optimized the vector store %s in %.1f s (apart; searches went on)", name,
                    time.monotonic() - started)  # fmt: skip

    def _points(self, identity: EmbedderIdentity, ids: list[str],
                keys: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:  # fmt: skip
        if not ids:
            return {}
        with self._gate.reading():
            records = self._shard(identity).retrieve(ids, with_payload=list(keys) if keys else True, with_vector=False)
        return {str(r.id): dict(r.payload or {}) for r in records}

    def flush(self) -> None:
        with self._writes:
            for shard in list(self._shards.values()):
                shard.flush()

    def close(self) -> None:
        with self._writes, self._gate.swapping(), self._mutex:
            for name, shard in list(self._shards.items()):
                try:
                    shard.flush()
                    shard.close()
                finally:
                    fcntl.flock(self._locks[name], fcntl.LOCK_UN)
                    os.close(self._locks[name])
            self._shards.clear()
            self._locks.clear()


# --- qdrant-client (server, cluster, or :memory:) -------------------------------------------
class ClientStore(_Planned):
    edge, prefetch_field = False, "prefetch"

    def __init__(self, location: str, api_key: str | None = None) -> None:
        from qdrant_client import QdrantClient

        if location == ":memory:":
            self.client = QdrantClient(location=":memory:")
        else:
            self.client = QdrantClient(url=location, api_key=api_key, timeout=60)
        self._known: set[str] = set()
        self._mutex = threading.Lock()

    def ensure_collection(self, identity: EmbedderIdentity) -> None:
        from qdrant_client import models as m

        name = identity.collection
        if name in self._known:
            return
        with self._mutex:
            if not self.client.collection_exists(name):
                vectors = {DENSE: m.VectorParams(size=identity.dims, distance=m.Distance.COSINE)}
                if identity.multilingual_dims:
                    vectors[MULTILINGUAL] = m.VectorParams(size=identity.multilingual_dims, distance=m.Distance.COSINE)
                self.client.create_collection(
                    name,
                    vectors_config=vectors,
                    sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
                )
                self.client.create_payload_index(
                    name, "tenant", m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True)
                )
                for key in KEYWORD_FIELDS:
                    self.client.create_payload_index(name, key, m.PayloadSchemaType.KEYWORD)
                self.client.create_payload_index(name, "critical", m.PayloadSchemaType.INTEGER)
                for key in WINDOW_FIELDS:
                    self.client.create_payload_index(name, key, m.PayloadSchemaType.FLOAT)
            else:  # a collection made before access lists or windows existed gets their indexes (no-ops on a newer one)
                for key in ("access", "defines"):
                    self.client.create_payload_index(name, key, m.PayloadSchemaType.KEYWORD)
                for key in WINDOW_FIELDS:
                    self.client.create_payload_index(name, key, m.PayloadSchemaType.FLOAT)
            self._known.add(name)

    def upsert(self, identity: EmbedderIdentity, points: list[StorePoint]) -> None:
        from qdrant_client import models as m

        if not points:
            return
        self.ensure_collection(identity)
        self.client.upsert(
            identity.collection,
            points=[
                m.PointStruct(
                    id=p.id, vector=_vectors(p, lambda i, v: m.SparseVector(indices=i, values=v)), payload=p.payload
                )
                for p in points
            ],
            wait=True,
        )

    def delete(self, identity: EmbedderIdentity, scope: Scope) -> None:
        from qdrant_client import models as m

        if _empty_scope(scope):
            return
        self.ensure_collection(identity)
        selector = m.FilterSelector(filter=_conditions(m, scope, edge=False))
        self.client.delete(identity.collection, points_selector=selector, wait=True)

    def set_payload(self, identity: EmbedderIdentity, scope: Scope, payload: dict[str, Any]) -> None:
        from qdrant_client import models as m

        if _empty_scope(scope):
            return
        self.ensure_collection(identity)
        self.client.set_payload(
            identity.collection, payload=payload, points=_conditions(m, scope, edge=False), wait=True
        )

    def count(self, identity: EmbedderIdentity, scope: Scope) -> int:
        from qdrant_client import models as m

        if _empty_scope(scope):
            return 0
        self.ensure_collection(identity)
        return self.client.count(identity.collection, count_filter=_conditions(m, scope, edge=False), exact=True).count

    def ids(self, identity: EmbedderIdentity, scope: Scope) -> set[str]:
        from qdrant_client import models as m

        self.ensure_collection(identity)
        found: set[str] = set()
        offset = None
        while True:
            records, offset = self.client.scroll(
                identity.collection, scroll_filter=_conditions(m, scope, edge=False), limit=1000, offset=offset,
                with_payload=False, with_vectors=False,
            )  # fmt: skip
            found.update(str(r.id) for r in records)
            if offset is None:
                return found

    def _models(self, identity: EmbedderIdentity) -> Any:
        from qdrant_client import models as m

        self.ensure_collection(identity)
        return m

    def _leg_query(self, m: Any, leg: _Leg) -> dict[str, Any]:
        vector = m.SparseVector(indices=leg.vector[0], values=leg.vector[1]) if leg.lexical else leg.vector
        return {"query": vector, "using": leg.using}

    def _fusion(self, m: Any) -> dict[str, Any]:
        return {"query": m.RrfQuery(rrf=m.Rrf(k=RRF_K))}

    def _run(self, m: Any, identity: EmbedderIdentity, requests: list[Any]) -> list[list[Any]]:
        return [result.points for result in self.client.query_batch_points(identity.collection, requests)]

    def _points(self, identity: EmbedderIdentity, ids: list[str],
                keys: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:  # fmt: skip
        if not ids:
            return {}
        records = self.client.retrieve(identity.collection, ids, with_payload=list(keys) if keys else True,
                                       with_vectors=False)  # fmt: skip
        return {str(r.id): dict(r.payload or {}) for r in records}

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.client.close()


_store: VectorStore | None = None
_store_lock = threading.Lock()


def get_store() -> VectorStore:
    """The process's store: a Qdrant server when QDRANT_URL is set, else the embedded engine."""
    global _store
    with _store_lock:
        if _store is None:
            if settings.QDRANT_URL:
                _store = ClientStore(settings.QDRANT_URL, settings.QDRANT_API_KEY)
            else:
                _store = EdgeStore(Path(settings.RAG_QDRANT_PATH))
        return _store


def use_owner_store(store: VectorStore) -> None:
    """From now on this process reaches the embedded store through `store`: the web process that owns it, over
    its socket (shared.OwnerStore, which the caller makes: this module knows no transport)."""
    global _store
    with _store_lock:
        if _store is not None:
            _store.close()
        _store = store


def is_shared_server() -> bool:
    """True when every process may write (a server); False for the single-owner embedded store."""
    return bool(settings.QDRANT_URL)


def reset_store() -> None:
    """Close and forget the process's store (tests, and after settings change)."""
    global _store
    with _store_lock:
        if _store is not None:
            _store.close()
        _store = None
