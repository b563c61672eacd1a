"""A third held-out set for answers that compute (issue 51), written after the second (`fresh`) set had been used to
choose, and before the change chosen on it: that change is judged on this set alone.

    python bench/table_questions3.py [OUT_DIR]    (default bench/data/tables)

New question templates (none a rewording of the first two sets') over the same four workbooks, re-made from their
seeds; every answer computed here in Python; every question `split: "third"` in `questions3.jsonl`.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

from table_questions2 import later_set


def questions(orders: list[dict], stock: list[dict], staff: list[dict], lines: list[dict]) -> list[dict]:
    out: list[dict] = []

    def ask(template: str, workbook: str, question: str, answer: object, kind: str) -> None:
        out.append({"template": template, "workbook": workbook, "question": question, "answer": answer,
                    "kind": kind})  # fmt: skip

    spent = defaultdict(float)
    for r in lines:
        if r["Department"] == "Operations":
            spent[r["Quarter"]] += r["Actual"]
    ask("top_quarter", "budget.xlsx", "Which quarter had the highest total actual spending in Operations?",
        max(spent, key=lambda q: spent[q]), "rank")  # fmt: skip
    for department, quarter in (("Sales", "Q4"), ("Marketing", "Q1")):
        ask("difference", "budget.xlsx", f"By how much did {department}'s actual spending differ from the plan in "
            f"{quarter} (actual minus planned)?", round(sum(r["Actual"] - r["Planned"] for r in lines
            if r["Department"] == department and r["Quarter"] == quarter), 2), "sum")  # fmt: skip
    ask("line_count", "budget.xlsx", "How many budget lines does Marketing have?",
        sum(1 for r in lines if r["Department"] == "Marketing"), "count")  # fmt: skip
    ask("cancelled_units", "ledger.xlsx", "What is the total number of units in cancelled orders?",
        sum(r["Units"] for r in orders if r["Status"] == "cancelled"), "sum")  # fmt: skip
    for status in ("pending", "delivered", "shipped"):
        counted = Counter(r["Customer"] for r in orders if r["Status"] == status).most_common(2)
        if counted[0][1] > counted[1][1]:  # one answer, not a tie
            ask("most_by_status", "ledger.xlsx", f"Which customer has the most {status} orders?", counted[0][0],
                "rank")  # fmt: skip
            break
    for customer in ("Hooli", "Initech"):
        ask("average_units", "ledger.xlsx", f"What is the average number of units per order for {customer}?",
            round(statistics.mean(r["Units"] for r in orders if r["Customer"] == customer), 2), "avg")  # fmt: skip
    ask("big_orders", "ledger.xlsx", "Which orders have an amount above 2,450? Give the order numbers.",
        sorted(r["Order"] for r in orders if r["Amount"] > 2450), "filter")  # fmt: skip
    for limit in (50, 20):
        ask("low_stock", "inventory.xlsx", f"How many products have fewer than {limit} units in stock?",
            sum(1 for r in stock if r["Stock"] < limit), "count")  # fmt: skip
    ask("stock_category_warehouse", "inventory.xlsx", "What is the total stock of Adapters in the Lyon warehouse?",
        sum(r["Stock"] for r in stock if r["Category"] == "Adapters" and r["Warehouse"] == "Lyon"), "sum")  # fmt: skip
    categories = Counter(r["Category"] for r in stock)
    ask("largest_category", "inventory.xlsx", "Which category has the most products?",
        categories.most_common(1)[0][0], "rank")  # fmt: skip
    for year in (2025, 2019):
        ask("joined_in_year", "roster.xlsx", f"How many people joined in {year}?",
            sum(1 for r in staff if r["Start date"][:4] == str(year)), "count")  # fmt: skip
    ask("team_hours", "roster.xlsx", "What is the total number of weekly hours of the Warehouse team?",
        sum(r["Hours a week"] for r in staff if r["Team"] == "Warehouse"), "sum")  # fmt: skip
    teams = Counter(r["Team"] for r in staff)
    ask("smallest_team", "roster.xlsx", "Which team has the fewest people?", min(teams, key=lambda t: teams[t]),
        "rank")  # fmt: skip
    ask("part_time_office", "roster.xlsx", "How many employees in Porto work under 37.5 hours a week?",
        sum(1 for r in staff if r["Office"] == "Porto" and r["Hours a week"] < 37.5), "count")  # fmt: skip
    return out


def main() -> None:
    later_set(questions, "questions3.jsonl", "H", "third")


if __name__ == "__main__":
    main()
