"""A company of our own for issue 62: a 30-person logistics firm in Madrid ("Transportes Ibérica Logística"), its
documents in English and Spanish, two workbooks (orders with statuses and regions, budgets planned against actual)
and a handbook whose vacation table is a table of ranges; and 48 questions in English and Spanish with the value a
right answer states. Written before any change to the answer layer; every document is invented here.

    python bench/company_data.py            # writes bench/data/company/ (documents + questions.jsonl)

Each question belongs to a topic (the same fact asked in both languages) and every topic to one half: `tune` (the
even topics) or `held_out` (the odd ones), so a Spanish question's English twin is never in the other half. Changes
are chosen on `tune`; `held_out` is read only to report (bench/company.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "company"

HANDBOOK = [
    ("Employee handbook", None),
    (
        "Transportes Ibérica Logística employs about thirty people in Madrid and Zaragoza. This handbook applies to "
        "every employee from 1 January 2026.",
        None,
    ),
    ("Working hours", "h"),
    (
        "Core hours are 10:00 to 16:00, Monday to Friday. Outside core hours employees plan their time with their "
        "team lead.",
        None,
    ),
    ("Vacation", "h"),
    ("Vacation days per calendar year depend on completed years of service:", None),
    ("Sick leave", "h"),
    (
        "An employee who is ill notifies Human Resources before 10:00 on the first day of absence. A medical "
        "certificate is required from the fourth day.",
        None,
    ),
    ("Remote work", "h"),
    (
        "Employees may work remotely up to 2 days per week with the approval of their manager. Warehouse staff "
        "work on site.",
        None,
    ),
    ("Equipment", "h"),
    ("Laptops are replaced every 4 years. A lost badge is replaced by Facilities for a fee of 15 EUR.", None),
]
VACATION = [("Years of service", "Vacation days"), ("Less than 1 year", "22"), ("1 to 2 years", "23"),
            ("3 to 5 years", "25"), ("6 to 10 years", "27"), ("More than 10 years", "30")]  # fmt: skip

TEXTS = {
    "policies/travel-policy-2026.md": """---
valid_from: 2026-01-01
supersedes: policies/travel-policy-2025.md
---
# Travel policy 2026

This policy covers business travel by every employee of Transportes Ibérica Logística.

## Per diem

The daily per diem for travel within Spain is 52 EUR per day. The daily per diem for international travel is
85 EUR per day. The per diem covers meals and local transport.

## Hotels

Hotel costs are reimbursed up to 140 EUR per night in Madrid and Barcelona, and up to 110 EUR per night in other
cities.

## Flights

Flights shorter than 6 hours are booked in economy class. Longer flights may be booked in premium economy with the
approval of a director.

## Expense claims

Expense claims are submitted in the Expenses portal within 30 days of the end of the trip, with every receipt
attached.
""",
    "policies/travel-policy-2025.md": """---
valid_from: 2025-01-01
---
# Travel policy 2025

The daily per diem for travel within Spain is 42 EUR per day. The daily per diem for international travel is
70 EUR per day.

Expense claims are submitted within 45 days of the end of the trip.
""",
    "help/tracking.md": """# Tracking a shipment

Every shipment gets a tracking number that starts with TIL- followed by 8 digits, for example TIL-20461873.

Customers follow a shipment on the tracking page. Tracking information is updated every 4 hours while the
shipment is in transit.

## Customer support

Customer support answers from 8:00 to 18:00 CET, Monday to Friday, at support@til.example or by phone.
""",
    "procedimientos/reclamaciones.md": """# Procedimiento de reclamaciones

Este procedimiento se aplica a todos los envíos nacionales de Transportes Ibérica Logística.

## Paquetes dañados

El cliente debe comunicar los daños en un paquete en un plazo de 7 días naturales desde la entrega. La reclamación
incluye fotografías del embalaje y del contenido.

## Reembolsos

El reembolso máximo es de 500 EUR por envío sin seguro adicional. El seguro adicional cuesta el 1,5 % del valor
declarado de la mercancía.

## Plazos

Las reclamaciones se resuelven en un plazo de 15 días hábiles.
""",
    "procedimientos/almacen.md": """# Normas del almacén

La recepción de mercancía en el almacén de Zaragoza es de 7:00 a 15:00, de lunes a viernes.

El casco y el chaleco reflectante son obligatorios en toda la zona de carga. Solo el personal con certificado
puede conducir carretillas elevadoras.

La cámara frigorífica se mantiene entre 2 y 8 grados. El peso máximo por palé es de 1000 kg.
""",
}

CUSTOMERS = ["Acme Retail", "Globex", "Iberia Foods", "Norte Textil"]
STATUSES = ["Pending", "Shipped", "Delivered", "Cancelled"]
REGIONS = ["North", "South", "Centre"]
BUDGETS = [("Operations", 120000, 131500), ("Sales", 80000, 76200), ("IT", 60000, 67900),
           ("Human Resources", 30000, 28100), ("Marketing", 45000, 44000), ("Fleet", 150000, 149000)]  # fmt: skip


def orders() -> list[tuple]:
    rng = random.Random(62)
    rows = []
    for n in range(1, 49):
        rows.append(
            (
                f"ORD-{1000 + n}",
                rng.choice(CUSTOMERS),
                rng.choice(STATUSES),
                rng.choice(REGIONS),
                round(rng.uniform(200, 5000), 2),
                f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}",
            )
        )
    return rows


def questions(rows: list[tuple]) -> list[dict]:
    columns = {"customer": 1, "status": 2, "region": 3}

    def count(**where: str) -> int:
        return sum(1 for r in rows if all(r[columns[k]] == v for k, v in where.items()))

    def total(**where: str) -> float:
        return round(sum(r[4] for r in rows if all(r[columns[k]] == v for k, v in where.items())), 2)

    over = max(BUDGETS, key=lambda b: b[2] - b[1])[0]
    under = max(BUDGETS, key=lambda b: b[1] - b[2])[0]
    topics = [  # (english, spanish, expected: a number, a phrase, or None for "must refuse")
        (
            "What is the daily per diem for travel within Spain?",
            "¿Cuál es la dieta diaria para viajes dentro de España?",
            52,
        ),
        ("What is the per diem for international travel?", "¿Cuál es la dieta para viajes internacionales?", 85),
        (
            "What is the maximum hotel cost per night in Madrid?",
            "¿Cuál es el coste máximo de hotel por noche en Madrid?",
            140,
        ),
        (
            "Within how many days must expense claims be submitted?",
            "¿En cuántos días hay que presentar las notas de gastos?",
            30,
        ),
        (
            "How many vacation days does an employee get after four years of service?",
            "¿Cuántos días de vacaciones tiene un empleado con cuatro años de antigüedad?",
            25,
        ),
        ("How many days per week may employees work remotely?", "¿Cuántos días por semana se puede teletrabajar?", 2),
        (
            "By what time must an ill employee notify Human Resources?",
            "¿Antes de qué hora debe avisar a Recursos Humanos un empleado enfermo?",
            "10:00",
        ),
        ("How do tracking numbers start?", "¿Cómo empiezan los números de seguimiento?", "TIL-"),
        (
            "Until what time does customer support answer?",
            "¿Hasta qué hora atiende el servicio de atención al cliente?",
            "18:00",
        ),
        (
            "How many days do customers have to report a damaged parcel?",
            "¿En cuántos días hay que comunicar los daños de un paquete?",
            7,
        ),
        (
            "What is the maximum refund per shipment without additional insurance?",
            "¿Cuál es el reembolso máximo por envío sin seguro adicional?",
            500,
        ),
        ("How much does the additional insurance cost?", "¿Cuánto cuesta el seguro adicional?", 1.5),
        (
            "Until what time does the Zaragoza warehouse receive goods?",
            "¿Hasta qué hora recibe mercancía el almacén de Zaragoza?",
            "15:00",
        ),
        (
            "What is the maximum temperature of the cold room?",
            "¿Cuál es la temperatura máxima de la cámara frigorífica?",
            8,
        ),
        (
            "How many pending orders does Acme Retail have?",
            "¿Cuántos pedidos pendientes tiene Acme Retail?",
            count(customer="Acme Retail", status="Pending"),
        ),
        (
            "What is the total amount of delivered orders in the North region?",
            "¿Cuál es el importe total de los pedidos entregados en la región North?",
            total(status="Delivered", region="North"),
        ),
        ("Which department is furthest over its budget?", "¿Qué departamento supera más su presupuesto?", over),
        (
            "Which department is furthest under its budget?",
            "¿Qué departamento queda más por debajo de su presupuesto?",
            under,
        ),
        ("How many orders were cancelled?", "¿Cuántos pedidos se cancelaron?", count(status="Cancelled")),
        ("How often are laptops replaced?", "¿Cada cuánto se renuevan los portátiles?", 4),
        (
            "What is the company's parental leave policy?",
            "¿Cuál es la política de permiso parental de la empresa?",
            None,
        ),
        (
            "What is the Wi-Fi password of the Madrid office?",
            "¿Cuál es la contraseña del wifi de la oficina de Madrid?",
            None,
        ),
        (
            "Below how many hours are flights booked in economy class?",
            "¿Por debajo de cuántas horas se reservan los vuelos en clase turista?",
            6,
        ),
        (
            "How many orders does Globex have in the South region?",
            "¿Cuántos pedidos tiene Globex en la región South?",
            count(customer="Globex", region="South"),
        ),
    ]
    out = []
    for t, (en, es, expected) in enumerate(topics, 1):
        split = "tune" if t % 2 == 0 else "held_out"
        for lang, text in (("en", en), ("es", es)):
            out.append(
                {
                    "id": f"T{t:02d}-{lang}",
                    "topic": t,
                    "lang": lang,
                    "question": text,
                    "expected": expected,
                    "split": split,
                }
            )
    return out


def write() -> None:
    import docx
    import openpyxl

    HERE.mkdir(parents=True, exist_ok=True)
    document = docx.Document()
    for text, kind in HANDBOOK:
        if kind == "h":
            document.add_heading(text, level=2)
        elif text == HANDBOOK[0][0]:
            document.add_heading(text, level=1)
        else:
            document.add_paragraph(text)
        if text.startswith("Vacation days per"):
            table = document.add_table(rows=0, cols=2)
            for row in VACATION:
                cells = table.add_row().cells
                cells[0].text, cells[1].text = row
    (HERE / "hr").mkdir(exist_ok=True)
    document.core_properties.title = "Employee handbook"
    document.save(HERE / "hr" / "handbook.docx")
    for name, text in TEXTS.items():
        (HERE / name).parent.mkdir(parents=True, exist_ok=True)
        (HERE / name).write_text(text)
    rows = orders()
    (HERE / "sheets").mkdir(exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Orders"
    sheet.append(["Order ID", "Customer", "Status", "Region", "Amount EUR", "Order date"])
    for row in rows:
        sheet.append(list(row))
    book.save(HERE / "sheets" / "orders.xlsx")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Budget 2026"
    sheet.append(["Department", "Planned EUR", "Actual EUR"])
    for row in BUDGETS:
        sheet.append(list(row))
    book.save(HERE / "sheets" / "budgets.xlsx")
    with open(HERE.parent / "company-questions.jsonl", "w") as out:
        for q in questions(rows):
            out.write(json.dumps(q, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write()
