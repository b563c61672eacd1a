"""A third company for issue 62, written at the start of its second stop, before any change of that stop, after the
first company's held-out half and the second company (bench/company_fresh.py) had both been read: its 36 questions
are what that stop's changes are measured on, once before and once after, and never tuned on (only the summary lines
are read before the last run). A solar installer in Barcelona: an English commission table of ranges (a Word
document), English remote-work and expense rules, Spanish installation and safety procedures, an installations
workbook (customers, statuses Completed / Scheduled / Cancelled, provinces, kWp, prices, dates) and a team targets
workbook (target against installed kWp).

    python bench/company_unseen.py   # writes bench/data/company-unseen/, bench/data/company-unseen-questions.jsonl
    python bench/company.py unseen   # asks them (split "unseen")
"""

from __future__ import annotations

import datetime
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent / "data" / "company-unseen"

TEXTS = {
    "hr/remote-work.md": """# Remote work

Office staff may work from home up to 3 days per week. Installers work on site.

Each employee who works from home receives a one-off equipment allowance of 250 EUR. Everyone is reachable during
the core hours, 9:30 to 14:30.
""",
    "finance/expenses.md": """# Expenses

Use of a private car for company trips is reimbursed at 0.26 EUR per kilometre. Hotels are reimbursed up to
110 EUR per night. Expense reports are submitted within 30 days of the trip.
""",
    "procedimientos/instalaciones.md": """# Instalaciones residenciales

La visita técnica previa es gratuita. El cliente firma el acta de conformidad en un plazo de 7 días desde el final
de la instalación. La garantía de mano de obra es de 10 años.
""",
    "seguridad/trabajo-en-altura.md": """# Trabajo en altura

El arnés es obligatorio en cualquier trabajo a más de 2 metros de altura. Los arneses se revisan cada 6 meses y se
sustituyen a los 5 años de uso.
""",
}
COMMISSION = [("Sale amount", "Commission"), ("Under 10,000 EUR", "2 %"), ("10,000 to 24,999 EUR", "3 %"),
              ("25,000 to 49,999 EUR", "4 %"), ("50,000 EUR or more", "5 %")]  # fmt: skip
CUSTOMERS = ["Casa Roca", "Hotel Miramar", "Granja Puig", "Escola Sant Jordi", "Bodega Ferrer"]
STATUSES = ["Completed", "Scheduled", "Cancelled"]
PROVINCES = ["Barcelona", "Girona", "Tarragona", "Lleida"]
TEAMS = [("North", 120, 131), ("South", 150, 118), ("Coast", 90, 96), ("Mountain", 80, 61), ("City", 200, 214)]


def installations() -> list[tuple]:
    rng = random.Random(6202)
    start = datetime.date(2025, 6, 1)
    return [(f"P-{700 + n}", rng.choice(CUSTOMERS), rng.choice(STATUSES), rng.choice(PROVINCES),
             round(rng.uniform(3, 40), 1), round(rng.uniform(4000, 60000), 2),
             start + datetime.timedelta(days=rng.randrange(0, 540))) for n in range(1, 46)]  # fmt: skip


def questions(rows: list[tuple]) -> list[dict]:
    scheduled_girona = sum(1 for r in rows if r[2] == "Scheduled" and r[3] == "Girona")
    completed_tarragona = round(sum(r[5] for r in rows if r[2] == "Completed" and r[3] == "Tarragona"), 2)
    largest_barcelona = max(r[4] for r in rows if r[3] == "Barcelona")
    cancelled_2026 = sum(1 for r in rows if r[2] == "Cancelled" and r[6].year == 2026)
    miramar_completed = sum(1 for r in rows if r[1] == "Hotel Miramar" and r[2] == "Completed")
    below = min(TEAMS, key=lambda t: t[2] - t[1])[0]
    topics = [
        ("How many days a week may office staff work from home?",
         "¿Cuántos días a la semana se puede teletrabajar?", 3),
        ("How much is the equipment allowance for working from home?",
         "¿De cuánto es la ayuda para el equipo de teletrabajo?", 250),
        ("When do the core hours end?", "¿A qué hora termina el horario de disponibilidad obligatoria?", "14:30"),
        ("What commission does a sale of 30,000 EUR earn?", "¿Qué comisión se gana con una venta de 30.000 EUR?", 4),
        ("How much is a kilometre by private car reimbursed?", "¿Cuánto se paga por kilómetro con coche propio?", 0.26),
        ("What is the maximum hotel cost per night?", "¿Cuál es el máximo que se reembolsa por noche de hotel?", 110),
        ("Within how many days does the customer sign the acceptance report?",
         "¿En cuántos días firma el cliente el acta de conformidad?", 7),
        ("How long is the workmanship warranty?", "¿Cuántos años dura la garantía de mano de obra?", 10),
        ("Above what height is a harness mandatory?", "¿A partir de qué altura es obligatorio el arnés?", 2),
        ("How often are harnesses inspected?", "¿Cada cuántos meses se revisan los arneses?", 6),
        ("How many installations are scheduled in Girona?", "¿Cuántas instalaciones hay programadas en Girona?",
         scheduled_girona),
        ("What is the total price of the completed installations in Tarragona?",
         "¿Cuál es el precio total de las instalaciones completadas en Tarragona?", completed_tarragona),
        ("What is the largest installation in Barcelona, in kWp?",
         "¿Cuál es la instalación más grande de Barcelona en kWp?", largest_barcelona),
        ("How many installations were cancelled in 2026?", "¿Cuántas instalaciones se cancelaron en 2026?",
         cancelled_2026),
        ("How many completed installations does Hotel Miramar have?",
         "¿Cuántas instalaciones completadas tiene Hotel Miramar?", miramar_completed),
        ("Which team is furthest below its target?", "¿Qué equipo está más por debajo de su objetivo?", below),
        ("What is the company's VAT number?", "¿Cuál es el NIF de la empresa?", None),
        ("How many parking spaces does the office have?", "¿Cuántas plazas de aparcamiento tiene la oficina?", None),
    ]  # fmt: skip
    out = []
    for t, (en, es, expected) in enumerate(topics, 1):
        for lang, text in (("en", en), ("es", es)):
            out.append({"id": f"U{t:02d}-{lang}", "topic": t, "lang": lang, "question": text, "expected": expected,
                        "split": "unseen"})  # fmt: skip
    return out


def write() -> None:
    import docx
    import openpyxl

    for name, text in TEXTS.items():
        (HERE / name).parent.mkdir(parents=True, exist_ok=True)
        (HERE / name).write_text(text)
    (HERE / "sales").mkdir(parents=True, exist_ok=True)
    document = docx.Document()
    document.add_heading("Sales commission", level=1)
    document.add_paragraph("A salesperson's commission on a signed sale depends on the sale amount, before VAT:")
    table = document.add_table(rows=0, cols=2)
    for left, right in COMMISSION:
        cells = table.add_row().cells
        cells[0].text, cells[1].text = left, right
    document.add_paragraph("Commission is paid with the payroll of the month after the customer pays.")
    document.save(HERE / "sales" / "commission.docx")
    rows = installations()
    (HERE / "sheets").mkdir(parents=True, exist_ok=True)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Installations"
    sheet.append(["Project", "Customer", "Status", "Province", "kWp", "Price EUR", "Date"])
    for row in rows:
        sheet.append(list(row))
    book.save(HERE / "sheets" / "installations.xlsx")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Targets"
    sheet.append(["Team", "Target kWp", "Installed kWp"])
    for team in TEAMS:
        sheet.append(list(team))
    book.save(HERE / "sheets" / "targets.xlsx")
    with open(HERE.parent / "company-unseen-questions.jsonl", "w") as out:
        for q in questions(rows):
            out.write(json.dumps(q, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    write()
