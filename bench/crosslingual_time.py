"""A retrieve's p50 per kind of question (issue 52: "retrieve p50 ≤ 1.2× today's, same run"), in-process.

    BENCH_DATA_DIR=D RAG_MODELS_DIR=… python bench/crosslingual_time.py

D holds the tenant "tune" with the three corpora (bench/crosslingual_tune.py leaves it there). Times `retrieve()` as
the REST door calls it (top_k 10) for three groups: the cross-lingual set's questions as written (`own`, 50 of them
not in English), their English twins (`twins`) and the public set's questions (`public`, mostly English), twice,
each pass with a different trailing space so that no query embedding comes from the cache; prints each pass's p50.

To compare two commits, build a data directory with each (the index differs) and alternate them in one window, so
that both see the same machine, for example:

    for i in 1 2 3 4 5; do
      (cd BASE_WORKTREE && BENCH_DATA_DIR=D_BASE python /work/main/bench/crosslingual_time.py | sed 's/^/base /')
      (cd /work/main && BENCH_DATA_DIR=D_NEW python bench/crosslingual_time.py | sed 's/^/new  /')
    done

(a base checkout older than this script reads it from this one; its own bench/_django.py must honour
BENCH_DATA_DIR.)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd() / "bench"))
from _django import setup  # noqa: E402  (the checkout being timed: the current directory's)

HERE = Path(__file__).resolve().parent
SET = HERE / "data" / "crosslingual" / "questions.jsonl"
PUBLIC = HERE.parent.parent / "shared" / "eval" / "questions.jsonl"


def main() -> None:
    setup()
    from knowledge.search.retrieval import retrieve
    from tenants.models import Tenant
    from tenants.principals import Viewer

    viewer = Viewer.everything(Tenant.objects.get(slug="tune"))
    own = [json.loads(line) for line in SET.open()]
    groups = {
        "own": [q["question"] for q in own],
        "twins": [q["en_question"] for q in own if q.get("en_question")],
        "public": [json.loads(line)["question"] for line in PUBLIC.open()],
    }
    for question in groups["public"][:5] + groups["own"][:5]:  # models loaded, caches warm
        retrieve(viewer=viewer, query=question, top_k=10)
    cells = []
    for rep in range(2):
        for name, questions in groups.items():
            times = []
            for question in questions:
                started = time.perf_counter()
                retrieve(viewer=viewer, query=question + " " * (rep + 1), top_k=10)
                times.append(time.perf_counter() - started)
            cells.append(f"{name} {statistics.median(times) * 1000:.2f}")
    print(" | ".join(cells))


if __name__ == "__main__":
    main()
