"""Score the time questions (bench/data/time/questions.jsonl) against a running server's answer endpoint.

    python bench/score_time.py --base-url URL --api-key KEY [--tenant bench] [--out DIR]

Per question: refused (the product's refusal, or an answer that says it is not in the documents), right (every
phrase of `answer_all`, or one phrase of `answer`; numbers match as whole numbers: "3" is not "3-D"), and
answered-wrong (answered, not right). `stale` counts the answered-wrong ones that state the other time's value
(`wrong`) instead: a current value given for a past question. Printed per half (odd ids tuned on, even ids held
out) and per kind of time; OUT/answers.jsonl keeps every answer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "data" / "time" / "questions.jsonl"
_spec = importlib.util.spec_from_file_location("answer_eval", HERE.parent.parent / "shared" / "eval" / "answer_eval.py")
answer_eval = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(answer_eval)  # type: ignore[union-attr]


def says(text: str, phrase: str) -> bool:
    """The answer states the phrase; a phrase that starts or ends with a digit matches whole numbers only."""
    normal, wanted = answer_eval.normalize(text).replace(",", ""), answer_eval.normalize(phrase).replace(",", "")
    if wanted[:1].isdigit() or wanted[-1:].isdigit():
        return re.search(rf"(?<![\d.\-]){re.escape(wanted)}(?![\d\-]|\.\d)", normal) is not None
    return answer_eval.contains_phrase(text, phrase)


def score(question: dict, body: dict) -> dict:
    answer = str(body.get("answer") or "")
    refused = body.get("status") not in ("answered", "partial") or answer_eval.admits_missing(answer)
    if question["answer_all"]:
        right = all(says(answer, p) for p in question["answer_all"])
    else:
        right = any(says(answer, p) for p in question["answer"])
    right = right and not refused
    stale = not refused and not right and any(says(answer, p) for p in question["wrong"])
    keys = [c.get("document_key") for c in body.get("citations") or []]
    relevant = bool(set(keys) & set(question["relevant_docs"]))
    return {"id": question["id"], "time": question["time"], "refused": refused, "right": right,
            "wrong": not refused and not right, "stale": stale, "cites_relevant": relevant,
            "answer": answer[:1500], "citations": keys, "status": body.get("status"), "reason": body.get("reason"),
            "claims": [[c.get("text"), c.get("supported"), c.get("problem")]
                       for c in body.get("claims") or []]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--tenant", default="bench")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    args = parser.parse_args()
    questions = [json.loads(line) for line in args.questions.read_text().splitlines() if line.strip()]
    rows, latencies = [], []
    for question in questions:
        request = urllib.request.Request(
            f"{args.base_url}/api/v1/tenants/{args.tenant}/answer/", data=json.dumps({"question": question[
                "question"]}).encode(), headers={"Authorization": f"Api-Key {args.api_key}",
                                                 "Content-Type": "application/json"})  # fmt: skip
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=600) as response:
            body = json.loads(response.read())
        latencies.append(time.monotonic() - started)
        rows.append(score(question, body))
        row = rows[-1]
        verdict = "right" if row["right"] else "REFUSED" if row["refused"] else "WRONG"
        print(f"{question['id']} {question['time']:9s} {verdict}  {row['answer'][:110]!r}", flush=True)
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups["tuning (odd)" if int(row["id"][1:]) % 2 else "held out (even)"].append(row)
        groups[f"time: {row['time']}"].append(row)
    groups["all"] = rows
    print("\n| group | n | right | answered wrong | of which stale | refused | cites relevant |")
    print("|---|---|---|---|---|---|---|")
    for name, group in groups.items():
        n = len(group)

        def share(field: str, group: list[dict] = group, n: int = n) -> str:
            return f"{sum(r[field] for r in group) / n:.2f}"

        stale = sum(r["stale"] for r in group)
        print(f"| {name} | {n} | {share('right')} | {share('wrong')} | {stale} | {share('refused')} | "
              f"{share('cites_relevant')} |")  # fmt: skip
    plain = [t for t, r in zip(latencies, rows, strict=True) if r["time"] == "none"]
    print(f"\nlatency p50 {statistics.median(latencies):.1f} s; questions with no time in them: p50 "
          f"{statistics.median(plain):.1f} s")  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "answers.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


if __name__ == "__main__":
    main()
