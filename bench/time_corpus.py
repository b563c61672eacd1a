"""Build the time fixtures of bench/data/time/README.md: `python bench/time_corpus.py DEST STAGE` (1, then 2).

Stage 1 writes DEST/policies, DEST/handbook and the git repository DEST/order-service (7 dated commits); stage 2
edits two policies in place, as a company edits a file that is synced again. Deterministic: fixed dates and authors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TRAVEL_2025 = """---
valid_from: 2025-01-01
valid_until: 2025-12-31
---
# Travel policy 2025

The per diem for business travel is 42 EUR a day.

The hotel allowance is 120 EUR a night in every city.

Private cars are reimbursed at 0.30 EUR per kilometre.

Trips that cost more than 500 EUR need the approval of the team lead.
"""
TRAVEL_2026 = """---
valid_from: 2026-01-01
supersedes: travel-2025.md
---
# Travel policy 2026

The per diem for business travel is 55 EUR a day.

The hotel allowance is 140 EUR a night in every city.

Private cars are reimbursed at 0.35 EUR per kilometre.

Trips that cost more than 800 EUR need the approval of the team lead.
"""
LEAVE_2024 = """---
valid_from: 2024-01-01
valid_until: 2024-12-31
---
# Parental leave 2024

Every parent may take 16 weeks of paid parental leave.

Leave must be requested 30 days before it starts.
"""
LEAVE_2025 = """---
valid_from: 2025-01-01
supersedes: parental-leave-2024.md
---
# Parental leave from 2025

Every parent may take 20 weeks of paid parental leave.

Leave must be requested 45 days before it starts.
"""
REMOTE = {
    1: "# Remote work\n\nStaff work from the office 2 days a week.\n\nThe home-office allowance is 25 EUR a month.\n",
    2: "# Remote work\n\nStaff work from the office 3 days a week.\n\nThe home-office allowance is 30 EUR a month.\n",
}
EXPENSES = {
    1: "# Expenses\n\nExpense reports are due within 30 days of the purchase.\n\nReceipts under 15 EUR need no scan.\n",
    2: "# Expenses\n\nExpense reports are due within 14 days of the purchase.\n\nReceipts under 15 EUR need no scan.\n",
}
EQUIPMENT = (
    "# Equipment\n\nEvery new employee gets a laptop and a second monitor.\n\nLaptops are replaced every 4 years.\n"
)
HANDBOOK = {
    "support.md": "# Support\n\nSupport answers every ticket within one business day.\n\n"
    "The support line opens at 8:00.\n",
    "office.md": "# Office\n\nThe Lisbon office is on Rua Augusta 12.\n\nVisitors sign in at the reception desk.\n",
    "security.md": "# Security\n\nPasswords must be at least 14 characters long.\n\n"
    "Badges are renewed every 2 years.\n",
}
# A second company's files for a fresh held-out set (questions in bench/data/time/fresh.jsonl), written after the
# method was built and run once: shipping superseded by date, a training policy edited in place, a billing repository.
SHIPPING_2024 = """---
valid_from: 2024-01-01
valid_until: 2024-12-31
---
# Shipping 2024

Standard shipping within Portugal costs 4.90 EUR.

Orders over 60 EUR ship free.

Returns are accepted within 14 days of delivery.
"""
SHIPPING_2025 = """---
valid_from: 2025-01-01
supersedes: shipping-2024.md
---
# Shipping from 2025

Standard shipping within Portugal costs 5.50 EUR.

Orders over 75 EUR ship free.

Returns are accepted within 30 days of delivery.
"""
TRAINING = {
    1: "# Training\n\nEach employee has a training budget of 800 EUR a year.\n\nCourses need the approval of the "
    "employee's manager.\n",
    2: "# Training\n\nEach employee has a training budget of 1000 EUR a year.\n\nCourses need the approval of the "
    "HR team.\n",
}
BILLING = [  # (date, message, billing.yaml values)
    (
        "2025-03-10T10:00:00+00:00",
        "Initial billing settings",
        {"grace_period_days": "7", "late_fee_percent": "2", "currencies": "[EUR]"},
    ),
    (
        "2025-09-01T09:00:00+00:00",
        "Grace period 10 days: customers paying by bank transfer were charged late fees for weekend delays",
        {"grace_period_days": "10"},
    ),
    (
        "2026-03-15T15:30:00+00:00",
        "Late fee 1.5 percent: the new consumer credit rules cap late fees",
        {"late_fee_percent": "1.5"},
    ),
    ("2026-07-20T08:45:00+00:00", "Add GBP to the currencies for the UK launch", {"currencies": "[EUR, GBP]"}),
]
COMMITS = [  # (date, message, settings.toml values)
    (
        "2025-02-03T10:00:00+00:00",
        "Initial order service settings",
        {"payment_timeout_s": 30, "max_items_per_order": 50, "retry_attempts": 3, "invoice_prefix": '"INV"'},
    ),
    (
        "2025-05-12T09:30:00+00:00",
        "Raise the payment timeout to 60 s: the card provider's 3-D Secure step takes up to 45 seconds",
        {"payment_timeout_s": 60},
    ),
    (
        "2025-08-20T14:10:00+00:00",
        "Lower max items per order to 40 after warehouse pick errors on large orders",
        {"max_items_per_order": 40},
    ),
    (
        "2025-11-04T16:45:00+00:00",
        "Retry attempts 5 so that transient gateway 502 errors stop failing checkouts",
        {"retry_attempts": 5},
    ),
    (
        "2026-02-17T11:20:00+00:00",
        "Payment timeout 90 s: bank redirects in Brazil take longer than 60 seconds (incident INC-2291)",
        {"payment_timeout_s": 90},
    ),
    (
        "2026-04-01T08:00:00+00:00",
        "Invoice prefix ORD, as finance asked for the new accounting system",
        {"invoice_prefix": '"ORD"'},
    ),
    (
        "2026-06-09T13:00:00+00:00",
        "Max items per order back to 60: the new pick-to-light system handles large orders",
        {"max_items_per_order": 60},
    ),
]


def _git(repo: Path, *args: str, when: str = "2025-01-01T00:00:00+00:00") -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Marta Silva", "GIT_AUTHOR_EMAIL": "marta@example.com",
           "GIT_COMMITTER_NAME": "Marta Silva", "GIT_COMMITTER_EMAIL": "marta@example.com",
           "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def stage_one(dest: Path) -> None:
    policies = {"travel-2025.md": TRAVEL_2025, "travel-2026.md": TRAVEL_2026, "parental-leave-2024.md": LEAVE_2024,
                "parental-leave-2025.md": LEAVE_2025, "remote-work.md": REMOTE[1], "expenses.md": EXPENSES[1],
                "equipment.md": EQUIPMENT}  # fmt: skip
    _write(dest / "policies", policies)
    _write(dest / "handbook", HANDBOOK)
    repo = dest / "order-service"
    (repo / "config").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    values: dict[str, object] = {}
    for when, message, changed in COMMITS:
        values.update(changed)
        lines = ["# Order service settings", *(f"{name} = {value}" for name, value in values.items())]
        (repo / "config" / "settings.toml").write_text("\n".join(lines) + "\n")
        (repo / "README.md").write_text("# Order service\n\nTakes orders, charges cards and sends invoices. "
                                        "Its settings are in config/settings.toml.\n")  # fmt: skip
        _git(repo, "add", "-A", when=when)
        _git(repo, "commit", "-q", "-m", message, when=when)

    _write(dest / "company-b", {"shipping-2024.md": SHIPPING_2024, "shipping-2025.md": SHIPPING_2025,
                                "training.md": TRAINING[1]})  # fmt: skip
    billing = dest / "billing-service"
    (billing / "config").mkdir(parents=True)
    _git(billing, "init", "-q", "-b", "main")
    settings: dict[str, str] = {}
    for when, message, changed in BILLING:
        settings.update(changed)
        (billing / "config" / "billing.yaml").write_text(
            "# Billing settings\n" + "".join(f"{name}: {value}\n" for name, value in settings.items()))  # fmt: skip
        _git(billing, "add", "-A", when=when)
        _git(billing, "commit", "-q", "-m", message, when=when)


def stage_two(dest: Path) -> None:
    _write(dest / "policies", {"remote-work.md": REMOTE[2], "expenses.md": EXPENSES[2]})
    _write(dest / "company-b", {"training.md": TRAINING[2]})


if __name__ == "__main__":
    target, stage = Path(sys.argv[1]), sys.argv[2]
    (stage_one if stage == "1" else stage_two)(target)
