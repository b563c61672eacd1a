"""A second company for issue 62, written after the first company's held-out half had been read (bench/company.py):
its 16 questions are the set a change made after that reading is measured on, never tuned on. A bakery distributor
in Valencia: an English returns policy and price list (a discount table of ranges by order size), Spanish delivery
and shift rules, an invoices workbook (clients, statuses Paid / Overdue / Open, cities, amounts).

    python bench/company_fresh.py        # writes bench/data/company-fresh/ and bench/data/company-fresh-questions.jsonl
    python bench/company.py fresh        # asks them (split "fresh")
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "company-fresh"

TEXTS = {
    "policies/returns.md": """# Returns policy

Customers may return unopened goods within 14 days of delivery. Refunds are paid within 5 business days of the
return being received. A restocking fee of 10 % applies to returns of more than 50 units.
""",
    "sales/discounts.md": """# Volume discounts

The discount on an order depends on the number of units ordered:

| Order size | Discount |
|---|---|
| Under 100 units | 0 % |
| 100 to 499 units | 5 % |
| 500 to 999 units | 8 % |
| 1000 units or more | 12 % |
""",
    "procedimientos/entregas.md": """# Entregas

Las entregas en Valencia se realizan de 6:00 a 11:00, de lunes a sábado. El pedido mínimo es de 80 EUR.

Los pedidos recibidos antes de las 16:00 se entregan al día siguiente.
""",
    "rrhh/turnos.md": """# Turnos del obrador

El turno de noche empieza a las 22:00 y termina a las 6:00. El plus de nocturnidad es de 3 EUR por hora.
""",
}
CLIENTS = ["Panaderia Sol", "Cafe Mar", "Hotel Turia", "Super Norte"]
STATUSES = ["Paid", "Overdue", "Open"]
CITIES = ["Valencia", "Alicante", "Castellon"]


def invoices() -> list[tuple]:
    rng = random.Random(6201)
    return [(f"INV-{500 + n}", rng.choice(CLIENTS), rng.choice(STATUSES), rng.choice(CITIES),
             round(rng.uniform(50, 900), 2)) for n in range(1, 41)]  # fmt: skip


def questions(rows: list[tuple]) -> list[dict]:
    overdue = sum(1 for r in rows if r[1] == "Hotel Turia" and r[2] == "Overdue")
    paid = round(sum(r[4] for r in rows if r[2] == "Paid" and r[3] == "Alicante"), 2)
    topics = [
        ("What discount does an order of 600 units get?", "¿Qué descuento tiene un pedido de 600 unidades?", 8),
        ("How many overdue invoices does Hotel Turia have?", "¿Cuántas facturas vencidas tiene Hotel Turia?", overdue),
        (
            "What is the total amount of paid invoices in Alicante?",
            "¿Cuál es el importe total de las facturas pagadas en Alicante?",
            paid,
        ),
        ("What is the minimum order?", "¿Cuál es el pedido mínimo?", 80),
        (
            "Until what time are deliveries made in Valencia?",
            "¿Hasta qué hora se hacen las entregas en Valencia?",
            "11:00",
        ),
        ("Within how many days may customers return goods?", "¿En cuántos días se pueden devolver los productos?", 14),
        ("When does the night shift start?", "¿A qué hora empieza el turno de noche?", "22:00"),
        ("What is the phone number of the managing director?", "¿Cuál es el teléfono del director general?", None),
    ]
    out = []
    for t, (en, es, expected) in enumerate(topics, 1):
        for lang, text in (("en", en), ("es", es)):
            out.append(
                {
                    "id": f"F{t:02d}-{lang}",
                    "topic": t,
                    "lang": lang,
                    "question": text,
                    "expected": expected,
                    "split": "fresh",
                }
            )
    return out


def write() -> None:
    import openpyxl

    for name, text in TEXTS.items():
        (HERE / name).parent.mkdir(parents=True, exist_ok=True)
        (HERE / name).write_text(text)
    rows = invoices()
    (HERE / "sheets").mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Invoices"
    sheet.append(["Invoice", "Client", "Status", "City", "Amount EUR"])
    for row in rows:
        sheet.append(list(row))
    book.save(HERE / "sheets" / "invoices.xlsx")
    with open(HERE.parent / "company-fresh-questions.jsonl", "w") as out:
        for q in questions(rows):
            out.write(json.dumps(q, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write()
