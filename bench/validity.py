"""What the validity rules cost a read: retrieve with the rules in the vector query against the same query without
them, on the same store, interleaved.

    python bench/validity.py [CHUNKS]   (default 20000)

One tenant, CHUNKS chunks in 100-chunk documents, in the embedded Qdrant Edge store (bench/_corpus.py: real
Django-package texts and BM25 vectors, dense vectors mixed from 2,000 real ones). Then a tenth of the documents
get validity windows (half of those expired last year), twenty supersede another, and a tenth get a second
version (an edit), through the services and the indexer, as curation and re-syncs write them.

Measured, p50/p95 over 8 rounds of 10 queries: the Qdrant hybrid query alone and retrieve() in-process, for
- no rules (the query as it was before validity existed: `include_expired` without as_of, no conditions),
- now (the default: the window covers now, the superseded documents left out),
- as of a month ago (every version's serving window too, superseded and retired versions in the scope).
Goal: now within 1.1x of no rules (the issue's retrieve p50 budget).
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import uuid

import numpy as np
from _corpus import QUERIES, line, load, text_pool
from _django import setup

ROUNDS = 8


def main() -> None:
    setup()
    from django.utils import timezone

    from knowledge import services
    from knowledge.index import indexer
    from knowledge.models import Chunk, Document, DocumentVersion, Status
    from knowledge.search.retrieval import RetrieveFilters
    from tenants.services import tenant_create

    chunks = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rng = np.random.default_rng(7)
    pool = text_pool()
    tenant = tenant_create(slug="bench", name="Bench")
    source = services.source_create(tenant=tenant, kind="folder", name="corpus")
    started = time.perf_counter()
    load(source=source, count=chunks, pool=pool, rng=rng)
    print(f"loaded {chunks} chunks in {time.perf_counter() - started:.1f} s")

    documents = list(Document.objects.filter(source=source).order_by("pk"))
    today = timezone.localdate()
    for n, document in enumerate(documents[::10]):
        expired = n % 2 == 0
        window = {
            "valid_from": dt.date(today.year - 2, 1, 1),
            "valid_until": dt.date(today.year - 1, 12, 31) if expired else dt.date(today.year + 1, 12, 31),
        }
        services.document_set_validity(tenant=tenant, document=document, changes=window, actor="bench")
    for newer, older in zip(documents[1:41:2], documents[2:42:2], strict=True):
        services.document_set_validity(tenant=tenant, document=newer, changes={"supersedes": str(older.public_id)},
                                       actor="bench")  # fmt: skip
    month_ago = timezone.now() - dt.timedelta(days=30)
    edited = documents[5::10]
    first_window = {"served_from": month_ago - dt.timedelta(days=30), "served_until": month_ago + dt.timedelta(days=1)}
    DocumentVersion.objects.filter(document__in=edited).update(**first_window)
    for document in edited:  # the edit: version 1 superseded (served until a month ago), version 2 now
        old = document.versions.get()
        new = DocumentVersion.objects.create(
            tenant=tenant, document=document, version=2, content_hash="y", status=Status.ACTIVE,
            embedding_provider=old.embedding_provider, embedding_model=old.embedding_model,
            embedding_dims=old.embedding_dims, served_from=month_ago + dt.timedelta(days=1),
        )  # fmt: skip
        DocumentVersion.objects.filter(pk=old.pk).update(status=Status.SUPERSEDED)
        Chunk.objects.filter(document_version=old).update(status=Status.SUPERSEDED)
        moved = list(Chunk.objects.filter(document_version=old))
        for chunk in moved:  # version 2's chunks: the same texts and vectors under new point ids
            chunk.pk, chunk.public_id, chunk.document_version, chunk.status = None, uuid.uuid4(), new, Status.ACTIVE
            chunk.point_id = chunk.point_id[:-1] + ("0" if chunk.point_id[-1] != "0" else "1")
        Chunk.objects.bulk_create(moved)
        Document.objects.filter(pk=document.pk).update(version=2, needs_sync=True)
        indexer.store_version_points(new)
    started = time.perf_counter()
    indexer.drain()
    print(f"validity on {len(documents[::10])} documents, 20 supersessions, {len(edited)} edits applied to the "
          f"payloads in {time.perf_counter() - started:.1f} s")  # fmt: skip
    reads = {
        "no rules": RetrieveFilters(include_expired=True),
        "now (default)": RetrieveFilters(),
        "as of a month ago": RetrieveFilters(as_of=month_ago),
    }
    costs(tenant, reads, f"{chunks} chunks")


def costs(tenant, reads: dict, title: str) -> None:  # type: ignore[no-untyped-def,type-arg]
    from inference.embedders import get_embedder
    from knowledge.index.lexical import query_vector
    from knowledge.index.vectorstore import get_store, reset_store
    from knowledge.search.retrieval import retrieve
    from knowledge.search.scopes import viewer_scope
    from tenants.principals import Viewer

    reset_store()  # reopen the store, as a server finds it after the writes
    embedder = get_embedder()
    store, identity = get_store(), embedder.identity
    viewer = Viewer.everything(tenant)
    vectors = [(embedder.embed([q])[0].tolist(), query_vector(q)) for q in QUERIES]
    engine: dict[str, list[float]] = {name: [] for name in reads}
    full: dict[str, list[float]] = {name: [] for name in reads}
    for filters in reads.values():  # warm-up
        for query, (dense, sparse) in zip(QUERIES, vectors, strict=True):
            store.hybrid(identity, viewer_scope(viewer, filters), dense=dense, sparse=sparse, limit=50)
            retrieve(viewer=viewer, query=query, top_k=8, filters=filters)
    served: dict[str, set[str]] = {name: set() for name in reads}
    for _ in range(ROUNDS):  # interleaved, so a slow moment of the machine falls on every read alike
        for name, filters in reads.items():
            scope = viewer_scope(viewer, filters)
            for query, (dense, sparse) in zip(QUERIES, vectors, strict=True):
                t0 = time.perf_counter()
                store.hybrid(identity, scope, dense=dense, sparse=sparse, limit=50)
                engine[name].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                hits = retrieve(viewer=viewer, query=query, top_k=8, filters=filters)
                full[name].append((time.perf_counter() - t0) * 1000)
                served[name] |= {h.freshness["status"] for h in hits if h.freshness}
    base = "no rules"
    print(f"\nretrieval over {title}; {ROUNDS * len(QUERIES)} queries per read")
    for name in reads:
        print(
            line(
                f"Qdrant hybrid query, {name}", engine[name], None if name == base else engine[base], against="no rules"
            )
        )
    for name in reads:
        print(line(f"retrieve(), {name}", full[name], None if name == base else full[base], against="no rules"))
    print("statuses served: " + "; ".join(f"{name}: {', '.join(sorted(s))}" for name, s in served.items()))


if __name__ == "__main__":
    main()
