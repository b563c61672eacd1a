"""Choosing the legs' weights for issue 52 on the tune half only; bench/crosslingual.py then reports the held-out half.

    RAG_MODELS_DIR=… python bench/crosslingual_tune.py CORPORA_DIR

Ingests the three corpora once (as bench/crosslingual.py does), then for each candidate weighting retrieves every
tune-half question of bench/data/crosslingual/questions.jsonl (and its English twin) and every question of the public
set (../shared/eval/questions.jsonl), and prints recall@5 and MRR@10 per group. A question's weights are chosen by its
language and each chunk's (knowledge/search/question.py SAME_ENGLISH, SAME_OTHER, CROSS); each set is varied in
turn, the others as in the code, and every group is printed for each. `--gloss`: a Spanish question's English gloss
off, then each GLOSSED_CROSS weighting (the groups of questions not in English).
The held-out half is never read here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _django import setup
from crosslingual import CORPORA, SET, ranks, scores

PUBLIC = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "questions.jsonl"
SAME_ENGLISH_GRID = [(1.0, ml, 1.0) for ml in (0.5, 1.0)]
CROSS_GRID = [(0.0, ml, lexical) for ml in (1.0, 2.0, 3.0) for lexical in (0.5, 1.0)]
SAME_OTHER_GRID = [(dense, 1.0, 1.0) for dense in (0.0, 0.25, 1.0)]
GLOSSED_GRID = [(dense, ml, lexical) for dense in (0.5, 1.0, 2.0) for ml in (1.0, 2.0) for lexical in (0.5, 1.0)]


def main() -> None:
    corpora = Path(sys.argv[1])
    setup()
    from knowledge.ingest import pipeline
    from knowledge.search import question as retrieval  # the weights live with the question
    from knowledge.search.retrieval import retrieve
    from tenants.models import Tenant
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    tenant = Tenant.objects.filter(slug="tune").first()
    for corpus in CORPORA if tenant is None else ():
        tenant = tenant or tenant_create(slug="tune", name="Tune")
        source = pipeline.folder_source_get_or_create(tenant=tenant, name=corpus, path=corpora / corpus)
        job = pipeline.sync_folder(source=source, root=corpora / corpus)
        print(f"{corpus}: {job.state}, {job.chunks_total} chunks", flush=True)
    assert tenant is not None
    if "--restore" in sys.argv:  # points written by an earlier build of the indexer: their payloads again
        from knowledge.index.indexer import store_version_points
        from knowledge.models import DocumentVersion

        for version in DocumentVersion.objects.filter(tenant=tenant, status="active"):
            store_version_points(version)
    viewer = Viewer.everything(tenant)
    if "--show" in sys.argv:  # each tune question's rank with the weights as they are in the code
        for q in [q for q in (json.loads(line) for line in SET.open()) if q["split"] == "tune"]:
            rank = ranks(retrieve(viewer=viewer, query=q["question"], top_k=10), q["relevant_docs"])
            print(q["id"], q["lang"], rank, q["question"], q["relevant_docs"])
        return
    own = [json.loads(line) for line in SET.open()]
    tune = [q for q in own if q["split"] == "tune"]
    public = [json.loads(line) for line in PUBLIC.open()]
    public = [q for q in public if q.get("relevant_docs") and q.get("answerable", True)]
    english = {
        "twins (tune)": [(q["en_question"], q["relevant_docs"]) for q in tune if q.get("en_question")],
        "en over Spanish (tune)": [(q["question"], q["relevant_docs"]) for q in tune if q["corpus"] == "es-docs"],
        "public English": [(q["question"], q["relevant_docs"]) for q in public if q["lang"] == "en"],
    }
    other = {
        "es over English (tune)": [(q["question"], q["relevant_docs"]) for q in tune if q["lang"] == "es"
                                   and q["corpus"] != "es-docs"],
        "pt/fr/de/it over English (tune)": [(q["question"], q["relevant_docs"]) for q in tune
                                            if q["lang"] in ("pt", "fr", "de", "it")],
        "public Spanish": [(q["question"], q["relevant_docs"]) for q in public if q["lang"] == "es"],
    }  # fmt: skip

    def run(groups: dict[str, list[tuple[str, list[str]]]]) -> str:
        cells = []
        for name, asked in groups.items():
            found = [ranks(retrieve(viewer=viewer, query=text, top_k=10), relevant) for text, relevant in asked]
            recall, mrr = scores(found)
            cells.append(f"{name} n={len(asked)} R@5 {recall:.3f} MRR {mrr:.3f}")
        return " | ".join(cells)

    every = {**english, **other}
    if "--current" in sys.argv:  # the weights as they are in the code
        print(f"as in the code: {run(every)}")
        return
    if "--prefetch" in sys.argv:  # how deep the multilingual leg (or every leg) reads before fusing
        from knowledge.index import vectorstore

        one_leg = vectorstore._Planned._one_leg
        for which, depth in (("multilingual", 100), ("multilingual", 50), ("every leg", 50)):

            def capped(self, m, leg, flt, idf, *, limit, payload, which=which, depth=depth):  # type: ignore[no-untyped-def]
                if which == "every leg" or leg.using == vectorstore.MULTILINGUAL:
                    limit = min(limit, depth)
                return one_leg(self, m, leg, flt, idf, limit=limit, payload=payload)

            vectorstore._Planned._one_leg = capped  # type: ignore[method-assign]
            print(f"{which} reads {depth}: {run(every)}", flush=True)
        return
    if "--english-dense" in sys.argv:  # how much English questions need the English embedder at all
        for dense in (0.0, 0.5, 1.0):
            retrieval.SAME_ENGLISH = retrieval.Weights(dense=dense, multilingual=1.0, lexical=1.0)
            print(f"SAME_ENGLISH {dense}/1/1: {run(english)}", flush=True)
        return
    if "--gloss" in sys.argv:  # a Spanish question's English gloss (inference/translation.py): off, then each weighting
        from inference import translation

        glossing = translation.gloss
        translation.gloss = lambda text, language, **kwargs: None  # type: ignore[assignment]
        print(f"no gloss: {run(other)}", flush=True)
        translation.gloss = glossing  # type: ignore[assignment]
        for dense, multilingual, lexical in GLOSSED_GRID:
            retrieval.GLOSSED_CROSS = retrieval.Weights(dense=dense, multilingual=multilingual, lexical=lexical)
            print(f"GLOSSED_CROSS {dense}/{multilingual}/{lexical}: {run(other)}", flush=True)
        return
    if "--joint" in sys.argv:  # every combination of a smaller grid around the sets in the code
        for cross_ml in (1.5, 2.0, 2.5):
            for other_lexical in (0.5, 1.0):
                for english_ml in (0.5, 1.0):
                    retrieval.CROSS = retrieval.Weights(dense=0.0, multilingual=cross_ml, lexical=0.5)
                    retrieval.SAME_OTHER = retrieval.Weights(dense=0.0, multilingual=1.0, lexical=other_lexical)
                    retrieval.SAME_ENGLISH = retrieval.Weights(dense=1.0, multilingual=english_ml, lexical=1.0)
                    print(
                        f"CROSS 0/{cross_ml}/0.5 SAME_OTHER 0/1/{other_lexical} SAME_ENGLISH 1/{english_ml}/1: "
                        f"{run(every)}",
                        flush=True,
                    )
        return
    for name, grid in (("CROSS", CROSS_GRID), ("SAME_ENGLISH", SAME_ENGLISH_GRID), ("SAME_OTHER", SAME_OTHER_GRID)):
        chosen = getattr(retrieval, name)
        for dense, multilingual, lexical in grid:
            setattr(retrieval, name, retrieval.Weights(dense=dense, multilingual=multilingual, lexical=lexical))
            print(f"{name} {dense}/{multilingual}/{lexical}: {run(every)}", flush=True)
        setattr(retrieval, name, chosen)  # one set at a time, the others as in the code


if __name__ == "__main__":
    main()
