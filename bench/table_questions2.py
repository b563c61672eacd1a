"""A second, fresh held-out set for answers that compute (issue 51), written after the first set's held-out half had
been used once, and before any change made after it: whatever is changed from here on is judged on this set.

    python bench/table_questions2.py [OUT_DIR]    (default bench/data/tables)

It adds a fourth workbook of another shape (a budget: department, quarter, category, planned and actual amounts,
several lines per department and quarter) and `questions2.jsonl`: new question templates, none a rewording of a
first-set template, over all four workbooks (the first three re-made from the same seed, so their rows are the ones
in bench/data/tables). Every answer is computed here in Python. Every question is `split: "fresh"`.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from table_questions import inventory, ledger, roster, write_workbook

DEPARTMENTS = ["Marketing", "Engineering", "Sales", "Operations"]
QUARTERS = ["Q1", "Q2", "Q3", "Q4"]
KINDS = ["Travel", "Software", "Hardware", "Training", "Events"]


def budget(rng: random.Random) -> list[dict]:
    rows = []
    for department in DEPARTMENTS:
        for quarter in QUARTERS:
            for kind in rng.sample(KINDS, 3):
                planned = rng.randrange(2000, 40000, 500)
                rows.append({"Department": department, "Quarter": quarter, "Category": kind, "Planned": planned,
                             "Actual": round(planned * rng.uniform(0.7, 1.3), 2)})  # fmt: skip
    return rows


def questions(orders: list[dict], stock: list[dict], staff: list[dict], lines: list[dict]) -> list[dict]:
    out: list[dict] = []

    def ask(template: str, workbook: str, question: str, answer: object, kind: str) -> None:
        out.append({"template": template, "workbook": workbook, "question": question, "answer": answer,
                    "kind": kind})  # fmt: skip

    for department, kind, quarter in (("Marketing", "Travel", "Q2"), ("Engineering", "Software", "Q3")):
        wanted = (department, kind, quarter)
        spent = [r["Actual"] for r in lines if (r["Department"], r["Category"], r["Quarter"]) == wanted]
        if spent:
            ask("actual_spend", "budget.xlsx", f"How much did {department} actually spend on {kind} in {quarter}?",
                round(sum(spent), 2), "sum")  # fmt: skip
    over = defaultdict(float)
    for r in lines:
        over[r["Department"]] += r["Actual"] - r["Planned"]
    ask("most_over_plan", "budget.xlsx", "Which department went furthest over its planned budget in total?",
        max(over, key=lambda d: over[d]), "rank")  # fmt: skip
    for kind in ("Software", "Training"):
        ask("planned_category", "budget.xlsx", f"What is the total planned budget for {kind} across all departments?",
            sum(r["Planned"] for r in lines if r["Category"] == kind), "sum")  # fmt: skip
    for quarter in ("Q1", "Q3"):
        ask("lines_over_plan", "budget.xlsx", f"In how many budget lines did actual spending exceed the plan in "
            f"{quarter}?", sum(1 for r in lines if r["Quarter"] == quarter and r["Actual"] > r["Planned"]),
            "count")  # fmt: skip
    for month, name in ((2, "February"), (5, "May")):
        ask("orders_in_month", "ledger.xlsx", f"How many orders were placed in {name} 2026?",
            sum(1 for r in orders if r["Date"][5:7] == f"{month:02d}"), "count")  # fmt: skip
    for customer in ("Globex", "Tyrell"):
        ask("smallest_order", "ledger.xlsx", f"What is the smallest order amount from {customer}?",
            min(r["Amount"] for r in orders if r["Customer"] == customer), "min")  # fmt: skip
    delivered = defaultdict(float)
    for r in orders:
        if r["Status"] == "delivered":
            delivered[r["Region"]] += r["Amount"]
    ask("top_region_delivered", "ledger.xlsx", "Which region has the highest total amount of delivered orders?",
        max(delivered, key=lambda k: delivered[k]), "rank")  # fmt: skip
    for category, warehouse in (("Cables", "Porto"), ("Audio", "Madrid")):
        ask("count_category_warehouse", "inventory.xlsx", f"How many {category} products are stored in {warehouse}?",
            sum(1 for r in stock if r["Category"] == category and r["Warehouse"] == warehouse), "count")  # fmt: skip
    for category in ("Storage", "Displays"):
        ask("average_stock_category", "inventory.xlsx", f"What is the average stock of {category} products?",
            round(statistics.mean(r["Stock"] for r in stock if r["Category"] == category), 2), "avg")  # fmt: skip
    for office in ("Madrid", "Lyon"):
        ask("remote_in_office", "roster.xlsx", f"How many remote employees work in {office}?",
            sum(1 for r in staff if r["Office"] == office and r["Remote"] == "yes"), "count")  # fmt: skip
    for team in ("Finance", "Warehouse"):
        newest = max((r for r in staff if r["Team"] == team), key=lambda r: r["Start date"])
        ask("newest_in_team", "roster.xlsx", f"Who in the {team} team started most recently?", newest["Employee"],
            "rank")  # fmt: skip
    for team in ("Sales", "Support"):
        ask("full_time_team", "roster.xlsx", f"How many people in {team} work 40 hours a week?",
            sum(1 for r in staff if r["Team"] == team and r["Hours a week"] == 40), "count")  # fmt: skip
    return out


def later_set(questions_of, name: str, prefix: str, split: str) -> Path:  # type: ignore[no-untyped-def]
    """Write a later set (`name` in OUT_DIR, ids `prefix`NN): `questions_of(orders, stock, staff, budget lines)` over
    the four workbooks' rows, re-made from their seeds (as bench/table_questions.py and `budget` make them)."""
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/data/tables")
    rng = random.Random(51)  # as bench/table_questions.py: the same rows
    orders, stock, staff = ledger(rng), inventory(rng), roster(rng)
    found = questions_of(orders, stock, staff, budget(random.Random(52)))
    with (out / name).open("w") as handle:
        for n, question in enumerate(found, 1):
            handle.write(json.dumps({"id": f"{prefix}{n:02d}", **question, "split": split}, ensure_ascii=False) + "\n")
    print(f"{len(found)} held-out questions ({split}) in {out / name}")
    return out


def main() -> None:
    out = later_set(questions, "questions2.jsonl", "F", "fresh")
    write_workbook(out / "budget.xlsx", "Budget 2026", budget(random.Random(52)))


if __name__ == "__main__":
    main()
