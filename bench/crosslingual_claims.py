"""How the answer checks judge sentences written in another language than their evidence (issue 52), replayed.

    RAG_MODELS_DIR=… BENCH_DATA_DIR=D python bench/crosslingual_claims.py record OUT.jsonl CORPORA_DIR [--tenant SLUG]
    RAG_MODELS_DIR=… BENCH_DATA_DIR=D python bench/crosslingual_claims.py score OUT.jsonl [--split tune|held_out]

`record` ingests the three corpora into tenant "claims" of the data directory D (once; `--tenant`: a tenant of D
that already holds them, as bench/crosslingual_tune.py leaves "tune"), asks every question of
bench/data/crosslingual/questions.jsonl that is not in the language of its corpus through the real answer path (the
packaged chat model writes the draft), and keeps for each: the draft's sentences, the answer's status, and the
evidence the verifier was given (each excerpt's text and the sentences the model read).

`score` checks the recorded sentences again with the verifier as the code is now, against the recorded evidence,
and prints per split how many sentences were checked, how many state the expected phrase (the public evaluator's
`contains_phrase`) and how many of those the checks reject, how many sentences without it they accept, and the
questions answered (one supported sentence at least), answered with the phrase, and answered without it (what the
evaluator counts as answered-wrong). So a change to the checks is measured without the model; the end-to-end figures
come from bench/crosslingual_answers.sh.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from _django import setup

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "shared" / "eval"))
SET = Path(__file__).resolve().parent / "data" / "crosslingual" / "questions.jsonl"
CORPORA = ("flask-docs", "click-code", "es-docs")


def record(out: Path, corpora: Path, slug: str) -> None:
    from chat import services
    from chat.excerpts import AnswerSettings
    from knowledge.ingest import pipeline
    from tenants.models import Tenant
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    tenant = Tenant.objects.filter(slug=slug).first()
    if tenant is None:
        tenant = tenant_create(slug=slug, name="Claims")
        for corpus in CORPORA:
            source = pipeline.folder_source_get_or_create(tenant=tenant, name=corpus, path=corpora / corpus)
            print(corpus, pipeline.sync_folder(source=source, root=corpora / corpus).state, flush=True)
    seen: list[tuple] = []
    own = services.answer_verifier

    def keeping(question, evidence, when=None, multilingual=False):  # type: ignore[no-untyped-def]
        seen.append((evidence, multilingual))
        return own(question, evidence, when, multilingual)

    services.answer_verifier = keeping
    viewer = Viewer.everything(tenant)
    with out.open("w") as sink:
        for q in (json.loads(line) for line in SET.open()):
            if q["corpus"] == "es-docs" or q["lang"] == "en":
                continue
            seen.clear()
            result = services.answer_question(viewer=viewer, question=q["question"], options=AnswerSettings())
            evidence, multilingual = seen[-1] if seen else ([], False)
            sink.write(json.dumps({
                "id": q["id"], "split": q["split"], "lang": q["lang"], "question": q["question"],
                "expected": q["answer"], "status": result.status, "multilingual": multilingual,
                "claims": [c["text"] for c in result.claims],
                "evidence": [{"text": e.text, "units": list(e.units), "document": e.document} for e in evidence],
            }, ensure_ascii=False) + "\n")  # fmt: skip
            print(q["id"], result.status, flush=True)


def score(path: Path, split: str | None) -> None:
    from answer_eval import contains_phrase

    from chat.verdicts import answer_verifier
    from knowledge.claims import EvidenceText

    counts: Counter[str] = Counter()
    for row in (json.loads(line) for line in path.open()):
        if split and row["split"] != split:
            continue
        counts["questions"] += 1
        evidence = [EvidenceText(e["text"], e["units"], e["document"]) for e in row["evidence"]]
        if not evidence:
            continue
        verifier = answer_verifier(row["question"], evidence, None, row["multilingual"])
        claims = verifier.check(" ".join(row["claims"]))
        checked = [c for c in claims if c.supported is not None]  # as chat.verdicts.verified decides
        kept = [c for c in checked if c.supported and verifier.addresses_question(c, first=c is checked[0])]
        for claim in claims:
            if claim.supported is None:
                continue
            right = contains_phrase(claim.text, row["expected"])
            counts["checked"] += 1
            counts["right"] += right
            counts["right rejected"] += right and not claim.supported
            counts["other accepted"] += (not right) and bool(claim.supported)
        if kept:
            counts["answered"] += 1
            phrase = any(contains_phrase(c.text, row["expected"]) for c in kept)
            counts["answered with the phrase"] += phrase
            counts["answered without it"] += not phrase
    print(" | ".join(f"{key} {value}" for key, value in counts.items()))


def main() -> None:
    setup()
    if sys.argv[1] == "record":
        record(
            Path(sys.argv[2]),
            Path(sys.argv[3]),
            sys.argv[sys.argv.index("--tenant") + 1] if "--tenant" in sys.argv else "claims",
        )
    else:
        split = sys.argv[sys.argv.index("--split") + 1] if "--split" in sys.argv else None
        score(Path(sys.argv[2]), split)


if __name__ == "__main__":
    main()
