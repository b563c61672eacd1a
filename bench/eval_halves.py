"""Split an answer_eval.py --out file into the tuning half and the held-out half of the public set.

    python bench/eval_halves.py /tmp/answers.jsonl [../shared/eval/questions.jsonl]

Answer-side changes (focus, prompt rules, verifier, rerank) were tuned only on questions with an odd
number (F01, F03, …, C01, …); the even-numbered ones are held out. Prints, for each half, the same
answer metrics as answer_eval.py (its own phrase check, imported), so a change can be kept only when it
wins on the held-out half too. `answered_wrong`: answerable, not refused, and without the expected
phrase — a confident answer that is probably wrong. `phrase_in_answer_or_evidence`: the expected phrase in the answer
text, which carries the quoted evidence under each claim and a refusal's passages; "model's sentences only" drops
those quotes. A refusal is split by what it shows: `not_verified` (passages that may hold the answer) or not.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def harness(questions_path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("answer_eval", questions_path.parent / "answer_eval.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> None:
    results = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
    questions_path = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE.parent.parent / "shared/eval/questions.jsonl"
    questions = {q["id"]: q for q in map(json.loads, questions_path.read_text().splitlines()) if q}
    contains_phrase = harness(questions_path).contains_phrase
    print(
        "| half | n ans | cite_rel | phrase_in_answer_or_evidence | phrase, model's sentences only | false refusal "
        "(not_verified / not_found) | answered_wrong | n unans | abstain | unans with passages shown |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for half, parity in (("tuning (odd ids)", 1), ("held out (even ids)", 0), ("all", None)):
        rows = [r for r in results if parity is None or int(re.sub(r"\D", "", r["id"])) % 2 == parity]
        answerable = [r for r in rows if r["answerable"]]
        unanswerable = [r for r in rows if not r["answerable"]]
        cite_rel = sum(bool(set(r.get("citation_keys", [])) & set(questions[r["id"]]["relevant_docs"]))
                       for r in answerable)  # fmt: skip
        phrase = [contains_phrase(r.get("answer", ""), questions[r["id"]]["answer"]) for r in answerable]
        own = [contains_phrase(model_sentences(r.get("answer", "")), questions[r["id"]]["answer"]) for r in answerable]
        false_abst = sum(bool(r.get("admits_missing")) for r in answerable)
        passages = sum(bool(r.get("admits_missing")) and shows_passages(r) for r in answerable)
        wrong = sum(not r.get("admits_missing") and not p for r, p in zip(answerable, phrase, strict=True))
        abstain = sum(bool(r.get("admits_missing")) for r in unanswerable)
        shown = sum(shows_passages(r) for r in unanswerable)
        share = lambda k, n: f"{k / n:.3f}" if n else "-"  # noqa: E731
        n, u = len(answerable), len(unanswerable)
        print(
            f"| {half} | {n} | {share(cite_rel, n)} | {share(sum(phrase), n)} | {share(sum(own), n)} | "
            f"{share(false_abst, n)} ({passages} / {false_abst - passages}) | {share(wrong, n)} | {u} | "
            f"{share(abstain, u)} | {shown} |"
        )


def model_sentences(answer: str) -> str:
    """The answer without the quoted evidence lines (`> [n] “…”`) and a refusal's passages."""
    return "\n".join(line for line in answer.splitlines() if not line.startswith("> ["))


def shows_passages(row: dict) -> bool:
    """A refusal that quotes where the answer may be (status not_verified): its heading, then `> [n]` lines."""
    answer = row.get("answer", "")
    return bool(row.get("admits_missing")) and answer.startswith(PASSAGES_HEADINGS)


PASSAGES_HEADINGS = ("I could not find a verifiable answer", "No se encuentra una respuesta verificable")


if __name__ == "__main__":
    main()
