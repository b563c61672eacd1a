"""The held-out set for answers that compute (issue 51), made before the computing answers are built.

    python bench/table_questions.py OUT_DIR

Writes three workbooks of different shapes (an order ledger, an inventory, a staff roster with dates), made from a
fixed seed, and `questions.jsonl`: aggregate and filter questions over them (count, sum, average, minimum and
maximum, ranking, distinct values, filtered lists), each with its answer computed here in Python from the very rows
written, and a split: `tune` (what a method may be tuned on) or `held_out` (what decides whether it stays). The
questions are worded the way support staff ask, not as SQL; each names the columns it needs in words.

The split is by question template, not by question: no held-out question is a tuned one with other values, so a
method that learns the tuned wording does not pass the held-out half for free.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

REGIONS = ["North", "South", "East", "West"]
CUSTOMERS = ["Acme Ltd", "Globex", "Initech", "Umbrella", "Hooli", "Stark Supply", "Wayne Retail", "Tyrell"]
STATUSES = ["pending", "shipped", "delivered", "cancelled"]
CATEGORIES = ["Cables", "Adapters", "Storage", "Audio", "Displays"]
WAREHOUSES = ["Madrid", "Lyon", "Porto"]
TEAMS = ["Support", "Sales", "Warehouse", "Finance"]
FIRST = ["Ana", "Bruno", "Carla", "Diego", "Elena", "Fabio", "Gema", "Hugo", "Ines", "Jon", "Karla", "Luis",
         "Marta", "Nuria", "Oscar", "Paula", "Quim", "Rosa", "Sergio", "Teresa", "Ulises", "Vera", "Xavi",
         "Yolanda"]  # fmt: skip


def ledger(rng: random.Random) -> list[dict]:
    rows = []
    for n in range(1, 241):
        month = rng.randint(1, 6)
        rows.append({"Order": f"ORD-{n:04d}", "Date": f"2026-{month:02d}-{rng.randint(1, 28):02d}",
                     "Customer": rng.choice(CUSTOMERS), "Region": rng.choice(REGIONS),
                     "Status": rng.choices(STATUSES, [3, 5, 6, 1])[0], "Units": rng.randint(1, 30),
                     "Amount": round(rng.uniform(20, 2500), 2)})  # fmt: skip
    return rows


def inventory(rng: random.Random) -> list[dict]:
    rows = []
    for n in range(1, 121):
        rows.append({"SKU": f"SKU-{n:03d}", "Product": f"{rng.choice(CATEGORIES)[:-1]} model {n}",
                     "Category": rng.choice(CATEGORIES), "Warehouse": rng.choice(WAREHOUSES),
                     "Stock": rng.randint(0, 400), "Reorder level": rng.choice([20, 40, 60]),
                     "Unit price": round(rng.uniform(3, 480), 2)})  # fmt: skip
    return rows


def roster(rng: random.Random) -> list[dict]:
    rows = []
    for n, first in enumerate(FIRST * 3, 1):
        year = rng.randint(2015, 2026)
        rows.append({"Employee": f"{first} {chr(64 + (n % 26 or 26))}.", "Team": rng.choice(TEAMS),
                     "Start date": f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                     "Hours a week": rng.choice([20, 30, 37.5, 40]), "Office": rng.choice(WAREHOUSES),
                     "Remote": rng.choice(["yes", "no"])})  # fmt: skip
    return rows


def write_workbook(path: Path, sheet: str, rows: list[dict]) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    book.active.title = sheet
    columns = list(rows[0])
    book.active.append(columns)
    for row in rows:
        book.active.append([row[c] for c in columns])
    book.save(path)


def questions(orders: list[dict], stock: list[dict], staff: list[dict]) -> list[dict]:
    out: list[dict] = []

    def ask(template: str, workbook: str, question: str, answer: object, kind: str) -> None:
        out.append({"template": template, "workbook": workbook, "question": question, "answer": answer,
                    "kind": kind})  # fmt: skip

    for customer in CUSTOMERS[:4]:
        pending = sum(1 for r in orders if r["Customer"] == customer and r["Status"] == "pending")
        ask(
            "pending_for_customer",
            "ledger.xlsx",
            f"How many orders from {customer} are still pending?",
            pending,
            "count",
        )
    for region in REGIONS:
        shipped = round(sum(r["Amount"] for r in orders if r["Region"] == region and r["Status"] == "shipped"), 2)
        ask("shipped_value_region", "ledger.xlsx", f"What is the total amount of shipped orders in the {region} "
            "region?", shipped, "sum")  # fmt: skip
    for month, name in ((3, "March"), (5, "May")):
        units = Counter()
        for r in orders:
            if r["Date"][5:7] == f"{month:02d}":
                units[r["Customer"]] += r["Units"]
        ask(
            "top_customer_month",
            "ledger.xlsx",
            f"Which customer ordered the most units in {name} 2026?",
            units.most_common(1)[0][0],
            "rank",
        )
    for region in REGIONS[:2]:
        amounts = [r["Amount"] for r in orders if r["Region"] == region]
        ask(
            "average_order_region",
            "ledger.xlsx",
            f"What is the average order amount in the {region} region?",
            round(statistics.mean(amounts), 2),
            "avg",
        )
    for month, name in ((4, "April"), (6, "June")):
        delivered = round(sum(r["Amount"] for r in orders if r["Date"][5:7] == f"{month:02d}"
                              and r["Status"] == "delivered"), 2)  # fmt: skip
        ask(
            "delivered_month",
            "ledger.xlsx",
            f"What was the total amount of orders delivered in {name} 2026?",
            delivered,
            "sum",
        )
    for customer in CUSTOMERS[4:6]:
        ask(
            "units_customer",
            "ledger.xlsx",
            f"How many units has {customer} ordered in total?",
            sum(r["Units"] for r in orders if r["Customer"] == customer),
            "sum",
        )
    ask(
        "largest_cancelled",
        "ledger.xlsx",
        "What was the largest cancelled order amount?",
        max(r["Amount"] for r in orders if r["Status"] == "cancelled"),
        "max",
    )
    ask(
        "distinct_customers_west",
        "ledger.xlsx",
        "How many different customers ordered in the West region?",
        len({r["Customer"] for r in orders if r["Region"] == "West"}),
        "count",
    )

    for warehouse in WAREHOUSES:
        below = sorted(r["SKU"] for r in stock if r["Warehouse"] == warehouse and r["Stock"] < r["Reorder level"])
        ask("below_reorder", "inventory.xlsx", f"Which products in the {warehouse} warehouse are below their reorder "
            "level? Give the SKUs.", below, "filter")  # fmt: skip
    for category in CATEGORIES[:3]:
        value = round(sum(r["Stock"] * r["Unit price"] for r in stock if r["Category"] == category), 2)
        ask("stock_value_category", "inventory.xlsx", f"What is the total stock value (stock times unit price) of "
            f"{category}?", value, "sum")  # fmt: skip
    for category in CATEGORIES[3:]:
        top = max((r for r in stock if r["Category"] == category), key=lambda r: r["Unit price"])
        ask(
            "priciest_in_category",
            "inventory.xlsx",
            f"Which {category} product has the highest unit price?",
            top["Product"],
            "rank",
        )
    for warehouse in WAREHOUSES:
        ask(
            "warehouse_stock",
            "inventory.xlsx",
            f"How many units are in stock in the {warehouse} warehouse?",
            sum(r["Stock"] for r in stock if r["Warehouse"] == warehouse),
            "sum",
        )
    ask(
        "out_of_stock",
        "inventory.xlsx",
        "How many products are out of stock?",
        sum(1 for r in stock if r["Stock"] == 0),
        "count",
    )
    ask(
        "min_price",
        "inventory.xlsx",
        "What is the lowest unit price in the inventory?",
        min(r["Unit price"] for r in stock),
        "min",
    )

    for team in TEAMS:
        ask(
            "team_size",
            "roster.xlsx",
            f"How many people work in the {team} team?",
            sum(1 for r in staff if r["Team"] == team),
            "count",
        )
    for year in (2020, 2024):
        ask(
            "started_since",
            "roster.xlsx",
            f"How many employees started in {year} or later?",
            sum(1 for r in staff if int(r["Start date"][:4]) >= year),
            "count",
        )
    for team in TEAMS[:2]:
        hours = [r["Hours a week"] for r in staff if r["Team"] == team]
        ask(
            "average_hours_team",
            "roster.xlsx",
            f"What is the average number of hours a week in the {team} team?",
            round(statistics.mean(hours), 2),
            "avg",
        )
    ask(
        "part_time",
        "roster.xlsx",
        "How many employees work fewer than 37.5 hours a week?",
        sum(1 for r in staff if r["Hours a week"] < 37.5),
        "count",
    )
    earliest = min(staff, key=lambda r: r["Start date"])
    ask("longest_serving", "roster.xlsx", "Who has been with the company the longest?", earliest["Employee"], "rank")
    remote = defaultdict(int)
    for r in staff:
        if r["Remote"] == "yes":
            remote[r["Office"]] += 1
    ask(
        "remote_by_office",
        "roster.xlsx",
        "Which office has the most remote employees?",
        max(remote, key=lambda office: remote[office]),
        "rank",
    )
    ask(
        "offices",
        "roster.xlsx",
        "Which offices do employees work from?",
        sorted({r["Office"] for r in staff}),
        "distinct",
    )
    return out


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/data/tables")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(51)
    orders, stock, staff = ledger(rng), inventory(rng), roster(rng)
    write_workbook(out / "ledger.xlsx", "Orders", orders)
    write_workbook(out / "inventory.xlsx", "Stock", stock)
    write_workbook(out / "roster.xlsx", "Staff", staff)
    found = questions(orders, stock, staff)
    templates = sorted({q["template"] for q in found})
    held_out = set(random.Random(7).sample(templates, len(templates) // 2))
    with (out / "questions.jsonl").open("w") as handle:
        for n, question in enumerate(found, 1):
            split = "held_out" if question["template"] in held_out else "tune"
            handle.write(json.dumps({"id": f"T{n:02d}", **question, "split": split}, ensure_ascii=False) + "\n")
    splits = Counter("held_out" if q["template"] in held_out else "tune" for q in found)
    print(f"{len(found)} questions over 3 workbooks in {out}: {splits['tune']} to tune, {splits['held_out']} held out")


if __name__ == "__main__":
    main()
