"""A large synthetic-but-real corpus for benchmarks, written straight to SQL and the vector store.

Texts are code chunks of the installed Django package (real prose and code, real BM25 vectors). Dense vectors:
the packaged embedder on `embedded` of those chunks; each further point mixes two real chunk vectors plus noise
(renormalised), so reaching 100,000 points takes minutes, not an hour of embedding. With the multilingual leg
configured (RAG_MULTILINGUAL, the default), each point gets its multilingual vector the same way, from the
multilingual encoder's vectors of the same chunks, so the index is the one the default configuration searches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Questions about the Django package, the texts of the pool.
QUERIES = [
    "how do I configure the database connection",
    "where is the CSRF token checked",
    "get_current_site",
    "password reset email template",
    "migrations squash operations",
    "how are sessions stored in the cache",
    "X-Forwarded-Proto header behind a proxy",
    "template filter to format dates",
    "which signal is sent after a model is saved",
    "paginate a queryset",
]


@dataclass
class Pool:
    texts: list[tuple[str, str]]  # (path, chunk text)
    vectors: Any  # embeddings of the first texts
    embed_seconds: float  # what embedding those took: the cost a re-embedding would pay per chunk
    multilingual: Any = None  # the multilingual encoder's embeddings of the same texts (None: not configured)


def text_pool(embedded: int = 2000) -> Pool:
    import django

    from inference.embedders import get_embedder
    from knowledge.ingest.chunkers import chunk_code

    texts: list[tuple[str, str]] = []
    for path in sorted(Path(django.__file__).parent.rglob("*.py")):
        for draft in chunk_code(path.read_text(encoding="utf-8", errors="replace"), language="python"):
            texts.append((str(path.relative_to(Path(django.__file__).parent)), draft.text))
    embedder = get_embedder()
    started = time.perf_counter()
    vectors = embedder.embed([t for _, t in texts[:embedded]])
    seconds = time.perf_counter() - started
    multilingual = None
    if embedder.identity.multilingual_dims:
        multilingual = embedder.embed_multilingual([t for _, t in texts[:embedded]])  # type: ignore[attr-defined]
    return Pool(texts, vectors, seconds, multilingual)


def load(*, source: Any, count: int, pool: Pool, rng: Any, per_doc: int = 100, offset: int = 0) -> None:
    """`count` active chunks in documents of `per_doc` chunks each, in SQL and in the store (no embedding)."""
    from django.db import transaction

    from inference.embedders import get_embedder
    from knowledge import ids
    from knowledge.index.indexer import chunk_payload
    from knowledge.index.lexical import document_vector
    from knowledge.index.vectorstore import StorePoint, get_store, point_id
    from knowledge.models import Chunk, Document, DocumentVersion, Status, readers_text

    identity = get_embedder().identity
    store, tenant = get_store(), source.tenant
    for start in range(0, count, per_doc):
        key = f"doc{start // per_doc:05d}.py"
        document_id = ids.document_id(source.source_id, key)
        with transaction.atomic():
            document = Document.objects.create(
                tenant=tenant, source=source, document_key=key, document_id=document_id, title=key, mode="code",
                version=1, readers=readers_text(source.access),
            )  # fmt: skip
            version = DocumentVersion.objects.create(
                tenant=tenant, document=document, version=1, content_hash="x", status=Status.ACTIVE,
                embedding_provider=identity.provider, embedding_model=identity.model, embedding_dims=identity.dims,
            )  # fmt: skip
            rows, points = [], []
            for index in range(min(per_doc, count - start)):
                path, text = pool.texts[(offset + start + index) % len(pool.texts)]
                chunk_id = ids.chunk_id(document_id, "code", index)
                a, b = rng.integers(0, len(pool.vectors), 2)
                vector = pool.vectors[a] + 0.5 * pool.vectors[b] + rng.normal(0, 0.02, identity.dims)
                vector = (vector / np.linalg.norm(vector)).astype(np.float32)
                second = None
                if identity.multilingual_dims and pool.multilingual is not None:
                    mixed = pool.multilingual[a] + 0.5 * pool.multilingual[b]
                    mixed += rng.normal(0, 0.02, identity.multilingual_dims)
                    second = (mixed / np.linalg.norm(mixed)).astype(np.float32)
                chunk = Chunk(
                    tenant=tenant, document=document, document_version=version, chunk_id=chunk_id, index=index,
                    mode="code", text=text, content_hash="x", status=Status.ACTIVE, heading=path,
                    embedding_provider=identity.provider, embedding_model=identity.model,
                    embedding_dims=identity.dims, point_id=point_id(chunk_id, 1), line_start=1, line_end=1,
                    dense=(vector if second is None else np.concatenate([vector, second])).tobytes(),
                )  # fmt: skip
                rows.append(chunk)
                payload = chunk_payload(chunk=chunk, document=document, status="active", doc_tags=[], chunk_tags=[],
                                        first=True)  # fmt: skip
                points.append(StorePoint(chunk.point_id, vector.tolist(), document_vector(f"{path}\n{text}"), payload,
                                         None if second is None else second.tolist()))  # fmt: skip
            Chunk.objects.bulk_create(rows)
        store.upsert(identity, points)
    if hasattr(store, "flush"):
        store.flush()


def line(name: str, values: list[float], base: list[float] | None = None, *, against: str = "") -> str:
    """One latency row: p50 and p95, and their ratios to `base` (what `against` names)."""
    p50, p95 = pct(values, 0.5), pct(values, 0.95)
    ratio = f"   ({p50 / pct(base, 0.5):.2f}x p50, {p95 / pct(base, 0.95):.2f}x p95 of {against})" if base else ""
    return f"{name:<62} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms{ratio}"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]
