"""A fourth held-out set for answers that compute (issue 51), written after the third set had shown two kinds of
wrong answers and before the changes made for them: those changes are judged on this set alone.

    python bench/table_questions4.py [OUT_DIR]    (default bench/data/tables)

New question templates (none a rewording of the first three sets') over the same four workbooks, re-made from
their seeds; every answer computed here in Python; every question `split: "fourth"` in `questions4.jsonl`.
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

    for department in ("Engineering", "Operations"):
        ask("planned_department", "budget.xlsx", f"What is the planned budget of {department} for the whole year?",
            sum(r["Planned"] for r in lines if r["Department"] == department), "sum")  # fmt: skip
    ask("events_actual", "budget.xlsx", "How much was actually spent on Events in total?",
        round(sum(r["Actual"] for r in lines if r["Category"] == "Events"), 2), "sum")  # fmt: skip
    ask("biggest_line", "budget.xlsx", "What is the largest single planned amount in the budget?",
        max(r["Planned"] for r in lines), "max")  # fmt: skip
    for region in ("East", "South"):
        ask("orders_region", "ledger.xlsx", f"How many orders came from the {region} region?",
            sum(1 for r in orders if r["Region"] == region), "count")  # fmt: skip
    ask("units_pending", "ledger.xlsx", "How many units are waiting in pending orders?",
        sum(r["Units"] for r in orders if r["Status"] == "pending"), "sum")  # fmt: skip
    for customer in ("Acme Ltd", "Wayne Retail"):
        ask("largest_order_customer", "ledger.xlsx", f"What was the biggest order amount from {customer}?",
            max(r["Amount"] for r in orders if r["Customer"] == customer), "max")  # fmt: skip
    amounts = defaultdict(float)
    for r in orders:
        amounts[r["Customer"]] += r["Amount"]
    ask("least_total_customer", "ledger.xlsx", "Which customer has the lowest total order amount?",
        min(amounts, key=lambda c: amounts[c]), "rank")  # fmt: skip
    for warehouse in ("Madrid", "Porto"):
        ask("products_warehouse", "inventory.xlsx", f"How many different products does the {warehouse} warehouse "
            "hold?", sum(1 for r in stock if r["Warehouse"] == warehouse), "count")  # fmt: skip
    ask("average_price_category", "inventory.xlsx", "What is the average unit price of Cables products?",
        round(statistics.mean(r["Unit price"] for r in stock if r["Category"] == "Cables"), 2), "avg")  # fmt: skip
    ask("reorder_60", "inventory.xlsx", "How many products have a reorder level of 60?",
        sum(1 for r in stock if r["Reorder level"] == 60), "count")  # fmt: skip
    for office in ("Lyon", "Porto"):
        ask("staff_office", "roster.xlsx", f"How many employees are based in the {office} office?",
            sum(1 for r in staff if r["Office"] == office), "count")  # fmt: skip
    offices = Counter(r["Office"] for r in staff if r["Remote"] == "no")
    if len(set(offices.values())) == len(offices):  # one answer, not a tie
        ask("office_on_site", "roster.xlsx", "Which office has the most employees who do not work remotely?",
            offices.most_common(1)[0][0], "rank")  # fmt: skip
    ask("hours_remote", "roster.xlsx", "What is the average weekly hours of remote employees?",
        round(statistics.mean(r["Hours a week"] for r in staff if r["Remote"] == "yes"), 2), "avg")  # fmt: skip
    return out


def main() -> None:
    later_set(questions, "questions4.jsonl", "G", "fourth")


if __name__ == "__main__":
    main()
