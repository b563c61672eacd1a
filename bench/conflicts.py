"""Precision and recall of the contradiction check (feedback/conflicts.py) on a written set of document sentence
pairs (bench/data/conflicts.jsonl: 19 true conflicts, 27 pairs that are not). The set is split in two halves by
pair position (tune: rows 0-1, 4-5, …; holdout: rows 2-3, 6-7, …); a change to the rule is kept only if it holds
on the holdout half too. The check runs only if precision on the whole set is at least 0.8 (settings
RAG_CONFLICT_CHECK)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def score(rows: list[dict]) -> dict[str, float]:
    from feedback.conflicts import first_conflict

    tp = fp = fn = tn = 0
    for row in rows:
        found = first_conflict(row["a"], row["b"]) is not None
        tp += found and row["conflict"]
        fp += found and not row["conflict"]
        fn += (not found) and row["conflict"]
        tn += (not found) and not row["conflict"]
    precision = tp / (tp + fp) if tp + fp else 1.0
    return {"pairs": len(rows), "conflicts": tp + fn, "found": tp + fp, "tp": tp, "fp": fp, "fn": fn,
            "precision": round(precision, 3), "recall": round(tp / (tp + fn), 3) if tp + fn else 1.0}  # fmt: skip


def main() -> None:
    rows = [json.loads(line) for line in (HERE / "data" / "conflicts.jsonl").read_text().splitlines() if line]
    tune = [r for i, r in enumerate(rows) if (i // 2) % 2 == 0]
    holdout = [r for i, r in enumerate(rows) if (i // 2) % 2 == 1]
    for name, part in (("tune", tune), ("holdout", holdout), ("all", rows)):
        print(name, json.dumps(score(part)))
    if "-v" in sys.argv:
        from feedback.conflicts import first_conflict

        for row in rows:
            found = first_conflict(row["a"], row["b"])
            if (found is not None) != row["conflict"]:
                print("MISS" if row["conflict"] else "FALSE", row["a"], "|", row["b"], found)


if __name__ == "__main__":
    main()
