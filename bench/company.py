"""Issue 62's measure: a company's own documents (bench/company_data.py), asked in English and Spanish, through the
answer every door gives (chat.recipe → chat.services.stream_answer: retrieval, computing, the packaged model, the
checks), in this process, against the real model server.

    RAG_MODELS_DIR=… python bench/company.py [tune|held_out|all|fresh|unseen|none] [--concurrency 1,2,4] [--timing-n 8]

`fresh` asks the second company's 16 questions (bench/company_fresh.py), kept for changes made after the held-out
half had been read, `unseen` the third company's 36 (bench/company_unseen.py), written at the start of the second
stop; `none` asks no question (with --concurrency: only the timings).

Prints per question what was answered and, per half and language: right (answered, and the expected value stated:
a number, with a decimal comma or point, or a phrase), answered wrong (answered without it, or answered a question
the documents cannot answer), refused (a refusal, "could not be verified", a fall-back with no answer); computed
answers apart. Then, per concurrency (N questions at once, from `tune`), the time from asking to the first verified
sentence (the first shown `Sentence`; a refusal's final answer when none is shown), p50 and p95, timed here as a
door's client would see it. `held_out` is read only to report: nothing is tuned on it."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _django import setup

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
NUMBER = re.compile(r"(?<![\w.,])-?\d[\d.,]*")


def numbers(text: str) -> list[float]:
    out = []
    for found in NUMBER.findall(text):
        found = found.rstrip(".,")
        for candidate in (found.replace(",", ""), found.replace(".", "").replace(",", "."), found.replace(",", ".")):
            try:
                out.append(float(candidate))
            except ValueError:
                continue
    return out


def fold(text: str) -> str:
    return text.casefold().replace("’", "'")


def outcome(result, expected) -> str:
    answered = result.status in ("answered", "partial")
    if expected is None:
        return "wrong" if answered else "right"
    if not answered:
        return "refused"
    text = result.answer
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        ok = any(abs(n - float(expected)) <= 0.011 for n in numbers(text))
    else:
        ok = fold(str(expected)) in fold(text)
    return "right" if ok else "wrong"


def start_model() -> subprocess.Popen:
    from inference.llm import ModelUnavailable, get_gateway

    server = subprocess.Popen([sys.executable, "manage.py", "llm_serve"], cwd=ROOT, env=os.environ.copy())
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        try:
            if get_gateway().model() is not None:
                return server
        except ModelUnavailable:
            pass
        time.sleep(2)
    raise SystemExit("the model server did not start")


def ask(viewer, question: str):
    """(the Answer, seconds to the first verified sentence, seconds in all)."""
    from chat import recipe, services, verdicts

    started = time.perf_counter()
    first = None
    answering = recipe.Answering(viewer=viewer, asked=recipe.Asked(question=question), channel="bench")
    result = None
    for item in answering.stream():
        if isinstance(item, verdicts.Sentence) and item.shown and first is None:
            first = time.perf_counter() - started
        if isinstance(item, services.Answer):
            result = item
    total = time.perf_counter() - started
    return result, (first if first is not None else total), total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    args = sys.argv[1:]
    split = next((a for a in args if not a.startswith("--") and not a[0].isdigit()), "all")
    levels = [int(n) for n in (args[args.index("--concurrency") + 1].split(",") if "--concurrency" in args else [])]
    timing_n = int(args[args.index("--timing-n") + 1]) if "--timing-n" in args else 8
    setup()

    from knowledge.ingest import pipeline
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    # the second and third companies (bench/company_fresh.py, bench/company_unseen.py)
    name = {"fresh": "company-fresh", "unseen": "company-unseen"}.get(split, "company")
    questions = [json.loads(line) for line in (DATA / f"{name}-questions.jsonl").open()]
    folder = Path(tempfile.mkdtemp(prefix="company-"))
    subprocess.run(["cp", "-r", f"{DATA / name}/.", str(folder)], check=True)
    tenant = tenant_create(slug="company", name="Transportes Ibérica Logística")
    source = pipeline.folder_source_get_or_create(tenant=tenant, name="company", path=folder)
    job = pipeline.sync_folder(source=source, root=folder)
    print(f"ingested: {job.state}, {job.chunks_total} chunks", flush=True)
    viewer = Viewer.everything(tenant)
    server = start_model()
    try:
        run(viewer, questions, split, levels, timing_n)
    finally:
        server.terminate()
        server.wait(60)


def run(viewer, questions: list[dict], split: str, levels: list[int], timing_n: int) -> None:  # type: ignore[no-untyped-def]
    from django.db import connection

    ask(viewer, "How many orders are there?")  # the model warm, as a running server's is
    tally: dict[tuple[str, str], dict[str, list]] = {}
    for q in [q for q in questions if split == "all" or q["split"] == split]:
        result, first, total = ask(viewer, q["question"])
        said = outcome(result, q["expected"])
        computed = (result.computed or {}).get("status", "")
        for key in ((q["split"], q["lang"]), (q["split"], "all")):
            group = tally.setdefault(key, {"right": [], "wrong": [], "refused": [], "first": [], "computed_wrong": []})
            group[said].append(q["id"])
            group["first"].append(first)
            if computed == "computed" and said == "wrong":
                group["computed_wrong"].append(q["id"])
        sql = (result.computed or {}).get("sql", "")
        print(f"{q['id']:>7} {said:7} {result.status:13} first {first:5.1f}s all {total:5.1f}s {computed or '-':9} | "
              f"{q['question']}\n{'':>7} expected {q['expected']!r}; said {result.answer[:240]!r}"
              + (f"\n{'':>7} sql {sql}" if sql else ""), flush=True)  # fmt: skip
    for (half, lang), group in sorted(tally.items()):
        n = len(group["first"])
        print(
            f"{half:8} {lang:3} n={n:2}: right {len(group['right']) / n:.2f}, answered wrong "
            f"{len(group['wrong']) / n:.2f}, refused {len(group['refused']) / n:.2f}; computed answered wrong "
            f"{len(group['computed_wrong'])}; first verified p50 {statistics.median(group['first']):.1f} s"
        )
    timed = [q for q in questions if q["split"] == "tune" and q["expected"] is not None][:timing_n]
    stages = ("sources_ms", "warm_ms", "ttft_ms", "first_verified_ms")
    for level in levels:
        firsts: list[float] = []
        spent: dict[str, list[float]] = {stage: [] for stage in stages}
        lock = threading.Lock()

        said: list[str] = []

        def one(q: dict, firsts=firsts, spent=spent, lock=lock, said=said) -> None:  # type: ignore[no-untyped-def]
            try:
                result, first, _ = ask(viewer, q["question"])
            finally:
                connection.close()
            with lock:
                firsts.append(first)
                said.append(outcome(result, q["expected"]))
                for stage in stages:
                    value = result.ttft_ms if stage == "ttft_ms" else result.timings.get(stage)
                    if value is not None:
                        spent[stage].append(value / 1000)

        started = time.perf_counter()
        with ThreadPoolExecutor(level) as pool:
            list(pool.map(one, timed))
        print(f"concurrency {level}: {len(firsts)} answers in {time.perf_counter() - started:.0f} s; first verified "
              f"sentence p50 {statistics.median(firsts):.1f} s, p95 {pct(firsts, 0.95):.1f} s; right "
              f"{said.count('right')}, answered wrong {said.count('wrong')}, refused {said.count('refused')}",
              flush=True)  # fmt: skip
        # where the time went, from the answer's own clock (median seconds since it was asked): retrieval and focus
        # done, the system prefix warm, the model's first token (its queue and prefill), the first verified sentence
        print("   medians since asked: " + ", ".join(f"{stage.removesuffix('_ms')} {statistics.median(v):.1f} s"
                                                  for stage, v in spent.items() if v), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
