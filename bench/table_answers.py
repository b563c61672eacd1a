"""Answers that compute, scored on issue 51's own set (bench/table_questions.py → bench/data/tables/).

    RAG_MODELS_DIR=… python bench/table_answers.py [tune|held_out|fresh|third|fourth|all] [--lookups]

`fresh` is the second held-out set (bench/table_questions2.py), kept for changes made after the first held-out half
had been used; `third` (bench/table_questions3.py) the one kept for changes chosen on `fresh`; `fourth`
(bench/table_questions4.py) for those chosen on `third`. Ingests the four workbooks into a throw-away tenant through
the real pipeline and asks every question of the split through the answer the doors give (retrieval, the table
chosen, the packaged 1.5B writing the query, the engine, the checks), then prints per question what was answered
and, per split: right, answered wrong (a stated answer that is not the expected one: a wrong number counts), refused
or fell back, and the p50 time of an answer.

--lookups also asks one lookup question per workbook row kind (an order's status, a product's warehouse, an
employee's team), made from the rows: they must stay lookups (not computed) and be answered right; their p50 is
the lookup answer's time on the same machine, to compare a computed answer's with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _django import setup

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "tables"
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?")


def fold(text: str) -> str:
    return text.casefold().replace("’", "'")


def right(answer: str, expected: object) -> bool:
    """The expected value is stated: a number within a cent (to the expected's own rounding), or every expected
    name (a list's every item)."""
    if isinstance(expected, (int, float)):
        numbers = [float(n.replace(",", "")) for n in NUMBER.findall(answer)]
        return any(abs(n - float(expected)) <= 0.011 for n in numbers)
    items = expected if isinstance(expected, list) else [expected]
    return all(fold(str(item)) in fold(answer) for item in items)


def lookups(root: Path) -> list[dict]:
    import openpyxl

    out = []
    for workbook, key, column, template in (
        ("ledger.xlsx", 0, 4, "What is the status of order {key}?"),
        ("inventory.xlsx", 0, 3, "Which warehouse holds {key}?"),
        ("roster.xlsx", 0, 1, "Which team is {key} in?"),
    ):
        rows = list(openpyxl.load_workbook(root / workbook).active.iter_rows(values_only=True))[1:]
        for row in rows[5::40][:3]:
            out.append({"id": f"L-{row[key]}", "question": template.format(key=row[key]), "answer": row[column],
                        "kind": "lookup", "split": "lookup"})  # fmt: skip
    return out


def main() -> None:
    split = next((a for a in sys.argv[1:] if not a.startswith("--")), "all")
    setup()
    from chat.excerpts import AnswerSettings
    from chat.services import answer_question
    from inference.llm import ModelUnavailable, get_gateway
    from knowledge.ingest import pipeline
    from tenants.principals import Viewer
    from tenants.services import tenant_create

    folder = Path(tempfile.mkdtemp(prefix="tables-"))
    for book in DATA.glob("*.xlsx"):
        shutil.copy(book, folder / book.name)
    tenant = tenant_create(slug="tables", name="Tables")
    source = pipeline.folder_source_get_or_create(tenant=tenant, name="workbooks", path=folder)
    job = pipeline.sync_folder(source=source, root=folder)
    print(f"ingested: {job.state}, {job.chunks_total} chunks")
    viewer = Viewer.everything(tenant)
    server = subprocess.Popen([sys.executable, "manage.py", "llm_serve"], cwd=ROOT, env=os.environ.copy())
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            if get_gateway().model() is not None:
                break
        except ModelUnavailable:
            pass
        time.sleep(2)
    sets = ("questions.jsonl", "questions2.jsonl", "questions3.jsonl", "questions4.jsonl")
    asked = [json.loads(line) for name in sets for line in (DATA / name).open()]
    asked = [q for q in asked if split == "all" or q["split"] == split]
    if "--lookups" in sys.argv:
        asked += lookups(folder)
    answer_question(viewer=viewer, question="How many orders are there?", options=AnswerSettings.from_assistant(None))
    tally: dict[str, dict[str, list]] = {}
    for q in asked:
        started = time.perf_counter()
        result = answer_question(viewer=viewer, question=q["question"], options=AnswerSettings.from_assistant(None))
        seconds = time.perf_counter() - started
        computed = (result.computed or {}).get("status", "")
        answered = result.status in ("answered", "partial")
        outcome = "right" if answered and right(result.answer, q["answer"]) else "wrong" if answered else "refused"
        group = tally.setdefault(q["split"], {"right": [], "wrong": [], "refused": [], "seconds": [], "computed": []})
        group[outcome].append(q["id"])
        group["seconds"].append(seconds)
        if computed == "computed":
            group["computed"].append(q["id"])
        sql = (result.computed or {}).get("sql", "")
        print(f"{q['id']:>14} {outcome:7} {seconds:5.1f}s {computed or '-':9} | {q['question']}\n"
              f"{'':>14} expected {q['answer']!r}; said {result.answer[:200]!r}\n{'':>14} {sql}")  # fmt: skip
    for name, group in tally.items():
        n = len(group["seconds"])
        print(f"{name}: {n} questions: right {len(group['right']) / n:.2f}, answered wrong "
              f"{len(group['wrong']) / n:.2f}, refused or fell back {len(group['refused']) / n:.2f}; computed "
              f"{len(group['computed'])}; p50 {statistics.median(group['seconds']):.1f} s")  # fmt: skip
    server.terminate()
    server.wait(60)


if __name__ == "__main__":
    main()
