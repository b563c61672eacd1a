"""Cross-lingual retrieval, scored on issue 52's own set (bench/data/crosslingual/questions.jsonl), written before
anything of issue 52 is built, so that its first run is the product's baseline.

    RAG_MODELS_DIR=… python bench/crosslingual.py CORPORA_DIR [--top-k 10]

The set: 60 hand-written questions with the documents that answer them, checked against the corpora (the answer's
words are in one of them): 42 in Spanish and 8 in Portuguese, French, German or Italian over the public English
corpora (flask-docs, click-code), each with its English twin (`en_question`), and 10 in English over Spanish text
(es-docs: aptitude's Spanish manual). Alternate questions are `tune` and `held_out`.

The three corpora are ingested as three folder sources of a throw-away tenant through the real pipeline; every
question (and every English twin) goes through `retrieve()` as the REST door calls it. Printed per group and split:
recall@5 (a relevant document among the first five distinct documents), MRR@10, and for questions with a twin, the
same for the twins and the ratio (cross-lingual / English); then the p50 time of a retrieve.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from _django import setup

SET = Path(__file__).resolve().parent / "data" / "crosslingual" / "questions.jsonl"
CORPORA = ("flask-docs", "click-code", "es-docs")


def ranks(hits, relevant: list[str]) -> int | None:  # type: ignore[no-untyped-def]
    """The rank (1-based, among distinct documents) of the first relevant document, else None."""
    seen: list[str] = []
    for hit in hits:
        key = hit.chunk.document.document_key
        if key not in seen:
            seen.append(key)
        if key in relevant:
            return seen.index(key) + 1
    return None


def scores(found: list[int | None]) -> tuple[float, float]:
    recall = sum(1 for r in found if r is not None and r <= 5) / len(found)
    mrr = sum(1 / r for r in found if r is not None and r <= 10) / len(found)
    return recall, mrr


def main() -> None:
    corpora = Path(sys.argv[1])
    top_k = int(sys.argv[sys.argv.index("--top-k") + 1]) if "--top-k" in sys.argv else 10
    setup()
    from knowledge.ingest import pipeline
    from knowledge.search.retrieval import retrieve
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    tenant = tenant_create(slug="crosslingual", name="Cross-lingual")
    for corpus in CORPORA:
        source = pipeline.folder_source_get_or_create(tenant=tenant, name=corpus, path=corpora / corpus)
        job = pipeline.sync_folder(source=source, root=corpora / corpus)
        print(f"{corpus}: {job.state}, {job.chunks_total} chunks")
    viewer = Viewer.everything(tenant)
    asked = [json.loads(line) for line in SET.open()]
    retrieve(viewer=viewer, query="warm up", top_k=top_k)
    times: list[float] = []

    def rank_of(query: str, relevant: list[str]) -> int | None:
        started = time.perf_counter()
        hits = retrieve(viewer=viewer, query=query, top_k=top_k)
        times.append(time.perf_counter() - started)
        return ranks(hits, relevant)

    rows = []
    for q in asked:
        rank = rank_of(q["question"], q["relevant_docs"])
        twin = rank_of(q["en_question"], q["relevant_docs"]) if q.get("en_question") else None
        rows.append((q, rank, twin))
        print(f"{q['id']} {q['lang']} {q['split']:8} rank {rank} (English twin {twin if q.get('en_question') else '-'})"
              f" | {q['question']}")  # fmt: skip
    groups = {
        "es over English": lambda q: q["lang"] == "es",
        "pt/fr/de/it over English": lambda q: q["lang"] in ("pt", "fr", "de", "it"),
        "en over Spanish": lambda q: q["corpus"] == "es-docs",
    }
    for name, member in groups.items():
        for split in ("tune", "held_out", None):
            chosen = [(q, r, t) for q, r, t in rows if member(q) and (split is None or q["split"] == split)]
            if not chosen:
                continue
            recall, mrr = scores([r for _, r, _ in chosen])
            line = f"{name:26} {split or 'all':8} n={len(chosen):2}  recall@5 {recall:.3f}  MRR@10 {mrr:.3f}"
            if chosen[0][0].get("en_question"):
                twin_recall, twin_mrr = scores([t for _, _, t in chosen])
                ratio = recall / twin_recall if twin_recall else float("nan")
                line += f"  | English twins recall@5 {twin_recall:.3f} MRR@10 {twin_mrr:.3f}  ratio {ratio:.2f}"
            print(line)
    print(f"retrieve p50 {statistics.median(times) * 1000:.1f} ms over {len(times)} queries")


if __name__ == "__main__":
    main()
