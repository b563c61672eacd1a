"""How the answer checks behave on a finished public run, offline: the relevance check and the passages of a refusal.

    RAG_DATA_DIR=<the run's data dir> python bench/answer_checks.py [questions.jsonl] [--relevance-only]

Run it on the data directory of bench/answer_public.sh after its server stopped (it opens the embedded store).
Halves as in bench/eval_halves.py: odd question numbers are the tuning half, even ones held out.

1. **Relevance check** (knowledge/claims.py CLAIM_RELEVANCE_MIN: the cross-encoder's (question, sentence) logit
   below which a supported sentence "does not answer the question"). Every supported sentence of every recorded
   answer is scored again; a sentence *answers* when it holds the question's expected phrase (a strict label: a right
   paraphrase counts as not answering, so false negatives are a lower bound). Prints, per threshold, how many it
   flags, its precision (flagged sentences that do not answer) and the right sentences it rejects (false negatives),
   and lists those at the product's threshold.
2. **Where to look** (chat/verdicts.py WHERE_TO_LOOK_LOGIT): for every question, the passages a refusal would show
   at each threshold: the share of answerable questions whose expected phrase is in them, and the share of
   unanswerable questions that would be shown any.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("RAG_DEBUG", "true")
os.environ["DJANGO_SETTINGS_MODULE"] = "ragsite.settings"

THRESHOLDS = (-8.0, -6.0, -4.0, -2.0, 0.0, 2.0)


def half(qid: str) -> str:
    return "odd" if int(re.sub(r"\D", "", qid)) % 2 else "even"


def main() -> None:
    import django

    django.setup()
    from eval_halves import harness

    from chat import excerpts, verdicts
    from chat.models import AnswerRecord
    from knowledge.claims import CLAIM_RELEVANCE_MIN
    from tenants.models import Tenant
    from tenants.principals import Viewer

    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    questions_path = Path(paths[0]) if paths else ROOT.parent / "shared/eval/questions.jsonl"
    questions = [json.loads(line) for line in questions_path.read_text().splitlines() if line.strip()]
    by_text = {q["question"]: q for q in questions}
    contains_phrase = harness(questions_path).contains_phrase
    cross = excerpts.cross_encoder()
    assert cross is not None, "the packaged cross-encoder is needed"

    # 1. relevance of supported sentences
    rows = []  # (half, logit, answers, question id, sentence)
    for record in AnswerRecord.objects.order_by("created_at"):
        q = by_text.get(record.question)
        if q is None or not q["answerable"]:
            continue
        supported = [c for c in record.claims if c.get("supported") and not c.get("note")]
        if not supported:
            continue
        logits = cross(q["question"], [c["text"] for c in supported])
        for claim, logit in zip(supported, map(float, logits), strict=True):
            quoted = " ".join(str(quote["text"]) for quote in claim.get("quotes") or [])
            rows.append((half(q["id"]), logit, contains_phrase(claim["text"], q["answer"]), q["id"], claim["text"],
                         contains_phrase(f"{claim['text']} {quoted}", q["answer"])))  # fmt: skip
    print("## Relevance check: supported sentences of answerable questions\n")
    print("A sentence *answers* when the expected phrase is in it (strict), or in it or the excerpt sentence it stands")
    print("on (loose: a right paraphrase). Precision: flagged sentences that do not answer (loose label).\n")
    print("| half | threshold | sentences | flagged | precision | answering rejected: strict | loose |")
    print("|---|---|---|---|---|---|---|")
    for name in ("odd", "even"):
        part = [r for r in rows if r[0] == name]
        strict, loose = sum(1 for r in part if r[2]), sum(1 for r in part if r[5])
        for threshold in THRESHOLDS:
            flagged = [r for r in part if r[1] < threshold]
            wrong_strict, wrong_loose = sum(1 for r in flagged if r[2]), sum(1 for r in flagged if r[5])
            precision = f"{1 - wrong_loose / len(flagged):.2f}" if flagged else "-"
            mark = " (product)" if threshold == CLAIM_RELEVANCE_MIN else ""
            print(f"| {name} | {threshold:+.0f}{mark} | {len(part)} | {len(flagged)} | {precision} | "
                  f"{wrong_strict} of {strict} | {wrong_loose} of {loose} |")  # fmt: skip
    print("\nSentences flagged at the product's threshold (L: the expected phrase is in it or its quote):\n")
    for _, logit, _, qid, sentence, loose_ok in sorted(rows, key=lambda r: r[3]):
        if logit < CLAIM_RELEVANCE_MIN:
            print(f"- {qid} ({logit:+.1f}){' L' if loose_ok else ''}: {sentence[:160]}")

    if "--relevance-only" in sys.argv:  # while the run's server still owns the embedded store
        return
    # 2. where to look
    tenant = Tenant.objects.get(slug="bench")
    viewer = Viewer.everything(tenant)
    scored = []  # (half, answerable, [(logit, phrase in it)])
    saved = verdicts.WHERE_TO_LOOK_LOGIT
    verdicts.WHERE_TO_LOOK_LOGIT = -1e9  # every candidate, with its logit; thresholds applied below
    try:
        for q in questions:
            sources = excerpts.prepare(viewer=viewer, question=q["question"], options=excerpts.AnswerSettings())
            passages = verdicts.where_to_look(q["question"], sources)
            scored.append((half(q["id"]), q["answerable"],
                           [(p["score"], contains_phrase(p["text"], q["answer"])) for p in passages]))  # fmt: skip
    finally:
        verdicts.WHERE_TO_LOOK_LOGIT = saved
    print("\n## Where to look: the passages a refusal would show\n")
    print("| half | threshold | answerable: phrase in the passages | unanswerable: any passage shown |")
    print("|---|---|---|---|")
    for name in ("odd", "even"):
        answerable = [p for h, a, p in scored if h == name and a]
        unanswerable = [p for h, a, p in scored if h == name and not a]
        for threshold in THRESHOLDS:
            hit = sum(1 for p in answerable if any(ok for logit, ok in p if logit >= threshold))
            shown = sum(1 for p in unanswerable if any(logit >= threshold for logit, _ in p))
            mark = " (product)" if threshold == saved else ""
            print(f"| {name} | {threshold:+.0f}{mark} | {hit} of {len(answerable)} | {shown} of {len(unanswerable)} |")


if __name__ == "__main__":
    main()
