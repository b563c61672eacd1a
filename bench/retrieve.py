"""Retrieve latency at scale: >= 100,000 chunks in the embedded Qdrant Edge store, through the HTTP API.

    python bench/retrieve.py [N_CHUNKS]   (default 100000)

Texts: code chunks of the installed Django package (real prose + code, real BM25 vectors).
Dense vectors: the packaged embedder on 2,000 of those chunks, then, to reach N without an hour
of embedding, each further point mixes two real chunk vectors plus noise (renormalised). A second
tenant holds a fifth as many points, so the tenant filter does real work.

Prints p50/p95 of: the Qdrant hybrid query alone (prefetch dense + sparse, RRF, tenant filter), the
query embedding plus that query (the engine's own time for a new question), retrieve() in-process (embedding +
Qdrant + SQL hydration), and POST /api/v1/.../retrieve/ through gunicorn at concurrency 1 (the ten questions
repeated, as agents and clients repeat them, so their embeddings come from the cache; and every question new) and
at concurrency 8, with the ratios. Targets (the retrieve-speed issue): HTTP p50 <= 1.5x (embedding + Qdrant),
>= 100 requests/s at concurrency 8 with p95 <= 150 ms, no error.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
from _corpus import QUERIES, load, pct, text_pool
from _django import setup


def line(name: str, values: list[float], base: float | None = None) -> str:
    p50, p95 = pct(values, 0.5), pct(values, 0.95)
    ratio = f"   ({p50 / base:.1f}× the Qdrant query p50)" if base else ""
    return f"{name:<44} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   n={len(values)}{ratio}"


def main() -> None:
    data_dir = setup()

    from inference.embedders import get_embedder
    from knowledge.index.lexical import query_vector
    from knowledge.index.vectorstore import Scope, get_store, reset_store
    from knowledge.services import source_create
    from tenants.principals import Viewer
    from tenants.services import api_key_issue, tenant_create

    total = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = np.random.default_rng(7)
    pool = text_pool()
    print(f"text pool: {len(pool.texts)} real chunks from the Django package")
    print(f"embedded 2,000 real chunks in {pool.embed_seconds:.1f} s")
    embedder = get_embedder()
    identity = embedder.identity
    tenants = [(tenant_create(slug="bench"), total), (tenant_create(slug="other"), total // 5)]
    started = time.perf_counter()
    for tenant, count in tenants:
        load(source=source_create(tenant=tenant, kind="folder", name="corpus"), count=count, pool=pool, rng=rng)
    load_seconds = time.perf_counter() - started
    bench_tenant = tenants[0][0]
    print(f"loaded {sum(c for _, c in tenants)} points ({total} for the measured tenant) in {load_seconds:.0f} s")

    # Reopen the store, as a server would find it, then time the Qdrant query alone (embedding excluded).
    reset_store()
    store = get_store()
    scope = Scope(tenant=str(bench_tenant.public_id))
    vectors = [(embedder.embed([q])[0].tolist(), query_vector(q)) for q in QUERIES]
    for dense, sparse in vectors:  # warm-up
        store.hybrid(identity, scope, dense=dense, sparse=sparse, limit=50)

    def time_qdrant() -> list[float]:
        times = []
        for _ in range(10):
            for dense, sparse in vectors:
                t0 = time.perf_counter()
                store.hybrid(identity, scope, dense=dense, sparse=sparse, limit=50)
                times.append((time.perf_counter() - t0) * 1000)
        return times

    unoptimized = time_qdrant()
    # What the store's owner does once the ingestion is over and no search came for RAG_STORE_OPTIMIZE_QUIET_S.
    t0 = time.perf_counter()
    optimized = store.optimize(quiet_for=0) if hasattr(store, "optimize") else False
    print(f"optimized the store (HNSW, segments) in {time.perf_counter() - t0:.1f} s" if optimized else
          "the store optimizes by itself (Qdrant server)")  # fmt: skip
    qdrant, engine = time_qdrant(), []
    for round_ in range(5):
        for query in QUERIES:
            t0 = time.perf_counter()
            fresh = f"{query} {round_}"  # not cached anywhere
            store.hybrid(identity, scope, dense=embedder.embed([fresh])[0].tolist(), sparse=query_vector(fresh),
                         limit=50)  # fmt: skip
            engine.append((time.perf_counter() - t0) * 1000)
    from knowledge.search.retrieval import retrieve

    in_process = []
    for _ in range(5):
        for query in QUERIES:
            t0 = time.perf_counter()
            retrieve(viewer=Viewer.everything(bench_tenant), query=query, top_k=8)
            in_process.append((time.perf_counter() - t0) * 1000)
    raw_key = api_key_issue(tenant=bench_tenant)[1]
    reset_store()  # hand the store to the web server, which takes ownership at start-up

    port = 8799
    env = {
        **os.environ,
        "RAG_DATA_DIR": str(data_dir),
        "PORT": str(port),
        # Served as in production (DEBUG off: no query log), over plain HTTP on the loopback.
        "RAG_DEBUG": "false",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-" + os.urandom(16).hex()),
        "RAG_HTTPS": "false",
        "RAG_WEB_WORKERS": os.environ.get("RAG_WEB_WORKERS", str(os.cpu_count() or 1)),  # one a core: shared.py
        "RAG_WEB_THREADS": os.environ.get("RAG_WEB_THREADS", "4"),
        "RAG_API_RATE": "100000/min",
    }  # the engine is measured, not the per-key throttle (600/min by default)
    root = Path(__file__).resolve().parent.parent
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config", "ragsite/gunicorn_conf.py",
         "--access-logfile", "/dev/null"],
        cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/api/v1/tenants/bench/retrieve/"

        errors: list[str] = []

        def call(query: str) -> float:
            request = urllib.request.Request(
                url, data=json.dumps({"query": query, "top_k": 8}).encode(), method="POST",
                headers={"Authorization": f"Api-Key {raw_key}", "Content-Type": "application/json"},
            )  # fmt: skip
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    if response.status != 200 or not json.loads(response.read())["hits"]:
                        errors.append(f"{response.status} for {query!r}")
            except urllib.error.HTTPError as exc:
                errors.append(f"{exc.code} for {query!r}")
            return (time.perf_counter() - t0) * 1000

        for _ in range(120):  # the server starting: connection refused until it listens, 503 until its store is up
            try:
                if call("warm up") and not errors:
                    break
            except OSError:
                pass
            errors.clear()
            time.sleep(1)
        errors.clear()
        for _ in range(3 * int(env["RAG_WEB_WORKERS"])):  # each web process keeps its own query-embedding cache
            for query in QUERIES:
                call(query)
        serial = [call(random.choice(QUERIES)) for _ in range(100)]
        new = [call(f"{random.choice(QUERIES)} {n}") for n in range(50)]  # never asked before: embedded
        concurrent: list[float] = []
        lock = threading.Lock()

        def worker() -> None:
            for _ in range(50):
                latency = call(random.choice(QUERIES))
                with lock:
                    concurrent.append(latency)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(timeout=30)
    base = pct(qdrant, 0.5)
    floor = pct(engine, 0.5)
    rate = len(concurrent) / wall
    print()
    print(line("Qdrant hybrid query, before the store's optimization", unoptimized))
    print(line("Qdrant hybrid query alone (RRF, tenant filter)", qdrant))
    print(line("query embedding + Qdrant query (a new question)", engine, base))
    print(line("retrieve() in-process (embed + Qdrant + SQL)", in_process, base))
    print(
        line("HTTP API, concurrency 1 (repeated questions)", serial, base)
        + f"   {pct(serial, 0.5) / floor:.2f}x embed+Qdrant"
    )
    print(
        line("HTTP API, concurrency 1 (every question new)", new, base)
        + f"   {pct(new, 0.5) / floor:.2f}x embed+Qdrant"
    )
    print(line("HTTP API, concurrency 8", concurrent, base) + f"   {rate:.0f} req/s")
    print(f"errors: {len(errors)}" + (f" ({errors[:3]})" if errors else ""))
    met = pct(serial, 0.5) <= 1.5 * floor
    print(
        f"target HTTP p50 <= 1.5x (embedding + Qdrant): {pct(serial, 0.5):.1f} vs {1.5 * floor:.1f} ms -> "
        f"{'met' if met else 'NOT met'} (every question new: {pct(new, 0.5):.1f} ms)"
    )
    fast = rate >= 100 and pct(concurrent, 0.95) <= 150 and not errors
    print(
        f"target >= 100 req/s at concurrency 8, p95 <= 150 ms, no error: {rate:.0f} req/s, p95 "
        f"{pct(concurrent, 0.95):.0f} ms -> {'met' if fast else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
