"""How long a search waits while the embedded store's owner optimizes (builds the HNSW index of new points).

    python bench/optimize_wait.py [POINTS]   (default 20000)

The store's owner optimizes after a quiet moment (RAG_STORE_OPTIMIZE_QUIET_S), but a search can still arrive while
it runs. POINTS chunks' worth of points (384-d like MiniLM, a dozen lexical terms each, the payload the indexer
writes) are upserted into a fresh Qdrant Edge store, as an ingest of that many chunks leaves them; then one thread
searches (hybrid, both legs, top 10) every 20 ms while the owner optimizes, and the worst and median wait of the
searches that overlapped the optimization are printed, beside the same searches with nothing running. No embedder
runs here: the figure is the store's, not the model's.

Measured on this machine (2 cores), 20,000 points: optimizing in place (Qdrant Edge's optimize holds the process's
interpreter) made the search due during it wait 4,809 ms; optimizing a copy in a child process and swapping it in
(knowledge/index/vectorstore.py EdgeStore.optimize): 370 searches ran during the 7.6 s it took, worst 194 ms (the
swap), median 7 ms.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _django import setup


def main() -> None:
    setup()
    from inference.embedders import EmbedderIdentity
    from knowledge.index.vectorstore import EdgeStore, Scope, StorePoint

    points = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    rng = random.Random(7)
    identity = EmbedderIdentity("packaged", "bench-minilm", 384)
    store = EdgeStore(Path(tempfile.mkdtemp(prefix="optimize-wait-")))

    def vector() -> list[float]:
        raw = [rng.gauss(0, 1) for _ in range(384)]
        norm = sum(v * v for v in raw) ** 0.5
        return [v / norm for v in raw]

    def sparse() -> tuple[list[int], list[float]]:
        terms = sorted(rng.sample(range(50_000), 12))
        return terms, [1.0 + rng.random() for _ in terms]

    started = time.perf_counter()
    for first in range(0, points, 500):
        batch = [StorePoint(id=f"{n:032x}", dense=vector(), sparse=sparse(),
                            payload={"tenant": "bench", "status": "active", "access": ["tenant"], "tags": [],
                                     "source_id": "src:bench:folder:docs", "document_id": f"doc:{n // 8}",
                                     "mode": "documental", "critical": 0})
                 for n in range(first, min(first + 500, points))]  # fmt: skip
        store.upsert(identity, batch)
    print(f"{points} points written in {time.perf_counter() - started:.1f} s")
    scope = Scope(tenant="bench")
    queries = [(vector(), sparse()) for _ in range(50)]

    def search() -> float:
        dense, terms = rng.choice(queries)
        begun = time.perf_counter()
        store.hybrid(identity, scope, dense=dense, sparse=terms, limit=10)
        return (time.perf_counter() - begun) * 1000

    quiet = [search() for _ in range(40)]  # before: nothing else running (and not yet indexed)
    waits: list[float] = []
    running = threading.Event()
    done = threading.Event()

    def searcher() -> None:
        """A search is due every 20 ms; its wait runs from when it was due (a thread that cannot run, because the
        optimization holds the interpreter, waits too) to its answer."""
        due = time.perf_counter()
        while not done.is_set():
            time.sleep(max(0.0, due - time.perf_counter()))
            if running.is_set():
                search()
                waits.append((time.perf_counter() - due) * 1000)
            due = max(due + 0.02, time.perf_counter())

    thread = threading.Thread(target=searcher)
    thread.start()
    running.set()
    begun = time.perf_counter()
    store.optimize(quiet_for=0)
    took = time.perf_counter() - begun
    done.set()
    thread.join()
    after = [search() for _ in range(40)]
    print(f"optimize: {took:.2f} s")
    print(f"searches during it: {len(waits)}; worst {max(waits or [0]):.0f} ms, median "
          f"{statistics.median(waits or [0]):.0f} ms")  # fmt: skip
    print(f"searches with nothing running: median {statistics.median(quiet):.1f} ms before the optimization, "
          f"{statistics.median(after):.1f} ms after")  # fmt: skip
    store.close()


if __name__ == "__main__":
    main()
