"""When does a reader see a verified sentence? Streamed answers through the real server, timed at the client.

    python bench/answer_stream.py --base-url URL --api-key KEY --tenant SLUG [--questions FILE] [--n 12]

Sends the first N answerable questions of the public set (../shared/eval/questions.jsonl, flask-docs first) to
POST /answer/ with "stream": true and reads the Server-Sent Events as a browser would. Per question, in seconds from
the request:
- model_sentence: when the model had written its first sentence. With `sentence` events (this code) the server says
  it (`timings.model_first_sentence_ms`: the arrival of the token that ended it); with `token` events (the code before
  it) the client sees it itself, in the tokens;
- first_verified: the first sentence a reader sees that has been checked against the excerpts: the first shown
  `sentence` event; before, the `done` event (the draft was not an answer);
- done: the `done` event.
Prints p50/p95 of each and of first_verified / model_sentence (the goal: at most 1.2), so two commits can be compared
on the same machine (bench/answer_stream.sh runs the server for a checkout).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
SENTENCE_END = re.compile(r"(?<=[.!?])(?:\s*\[[\d ,;-]+\])*\s+(?=[^\s\[])|\n+")  # knowledge/claims.py CLAIM_SPLIT_RE


def events(response):  # type: ignore[no-untyped-def]
    name, data = "", ""
    for raw in response:
        line = raw.decode("utf-8").rstrip("\n")
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and name:
            yield name, json.loads(data or "{}")
            name, data = "", ""


def one(base: str, key: str, tenant: str, question: str) -> dict[str, float | None]:
    request = urllib.request.Request(
        f"{base}/api/v1/tenants/{tenant}/answer/", data=json.dumps({"question": question, "stream": True}).encode(),
        headers={"Authorization": f"Api-Key {key}", "Content-Type": "application/json", "Accept": "text/event-stream"},
    )  # fmt: skip
    started = time.perf_counter()
    seen: dict[str, float | None] = {"model_sentence": None, "first_verified": None, "done": None}
    draft = ""
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 (a local URL given by the operator)
        for name, payload in events(response):
            at = time.perf_counter() - started
            if name == "token":  # the code before verified streaming: the client finds the sentence end itself
                draft += payload.get("delta", "")
                if seen["model_sentence"] is None and len(SENTENCE_END.split(draft)) > 1:
                    seen["model_sentence"] = at
            elif name == "sentence" and payload.get("shown") and seen["first_verified"] is None:
                seen["first_verified"] = at
            elif name == "done":
                seen["done"] = at
                timings = payload.get("timings") or {}
                if "model_first_sentence_ms" in timings:
                    seen["model_sentence"] = timings["model_first_sentence_ms"] / 1000
                if seen["first_verified"] is None and payload.get("status") in ("answered", "partial"):
                    seen["first_verified"] = at  # before: the verified answer appeared only now
                seen["status"] = payload.get("status")  # type: ignore[assignment]
    return seen


def pct(values: list[float], q: int) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--questions", default=str(HERE.parent.parent / "shared/eval/questions.jsonl"))
    parser.add_argument("--corpus", default="flask-docs")
    parser.add_argument("--n", type=int, default=12)
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.questions).read_text().splitlines() if line.strip()]
    chosen = [q for q in rows if q["answerable"] and q["corpus"] == args.corpus][: args.n]
    results = []
    for q in chosen:
        result = one(args.base_url.rstrip("/"), args.api_key, args.tenant, q["question"])
        results.append(result)
        print(f"{q['id']}: {json.dumps(result)}", file=sys.stderr)
    print(f"| measure ({len(results)} questions, {args.corpus}) | p50 s | p95 s | n |")
    print("|---|---|---|---|")
    for name in ("model_sentence", "first_verified", "done"):
        values = [float(r[name]) for r in results if r.get(name) is not None]  # type: ignore[arg-type]
        print(f"| {name} | {pct(values, 50):.2f} | {pct(values, 95):.2f} | {len(values)} |")
    ratios = [float(r["first_verified"]) / float(r["model_sentence"]) for r in results  # type: ignore[arg-type]
              if r.get("first_verified") and r.get("model_sentence")]  # fmt: skip
    if ratios:
        print(f"| first_verified / model_sentence | {statistics.median(ratios):.2f} | {pct(ratios, 95):.2f} | "
              f"{len(ratios)} |")  # fmt: skip


if __name__ == "__main__":
    main()
