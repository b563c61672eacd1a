from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge import ids
from knowledge.search.retrieval import retrieve, retrieve_single_leg
from tenants.models import Tenant

METHODS = ("dense", "lexical", "hybrid", "hybrid+specific", "hybrid+rerank")


def _hit_keys(hits: list[Any]) -> list[tuple[str, str]]:
    return [
        (
            ids.display_name(ids.parse_source_id(h.chunk.document.source.source_id).source_name),
            h.chunk.document.display_key,
        )
        for h in hits
    ]


def _run(method: str, tenant: Tenant, question: str) -> list[Any]:
    if method in ("dense", "lexical"):
        return retrieve_single_leg(tenant=tenant, query=question, top_k=10, leg=method)
    return retrieve(tenant=tenant, query=question, top_k=10, specific=method == "hybrid+specific",
                    rerank=method == "hybrid+rerank")  # fmt: skip


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


class Command(BaseCommand):
    help = "Score retrieval on a question set: recall@5, MRR@10 (document level) and latency, per method."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("questions", help="JSON lines: question, corpus, relevant_docs, answerable, kind")
        parser.add_argument("--methods", default=",".join(METHODS))
        parser.add_argument("--json", dest="json_out", default="", help="write per-question results here")

    def handle(self, *args: Any, tenant: str, questions: str, methods: str, json_out: str, **options: Any) -> None:
        owner = Tenant.objects.filter(slug=tenant).first()
        if owner is None:
            raise CommandError(f"No tenant with slug {tenant!r}.")
        try:
            rows = [
                json.loads(line) for line in Path(questions).read_text(encoding="utf-8").splitlines() if line.strip()
            ]
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"Cannot read {questions}: {exc}") from exc
        chosen = [m.strip() for m in methods.split(",") if m.strip()]
        unknown = set(chosen) - set(METHODS)
        if unknown:
            raise CommandError(f"Unknown method(s) {', '.join(sorted(unknown))}; use {', '.join(METHODS)}.")
        _run("hybrid", owner, "warm up")
        per_question: list[dict[str, Any]] = []
        for row in rows:
            record: dict[str, Any] = {"id": row.get("id"), "corpus": row.get("corpus"), "kind": row.get("kind")}
            relevant = {(row.get("corpus"), key) for key in row.get("relevant_docs") or []}
            for method in chosen:
                started = time.perf_counter()
                hits = _run(method, owner, row["question"])
                latency = (time.perf_counter() - started) * 1000
                keys = _hit_keys(hits)
                first = next((rank for rank, key in enumerate(keys[:10], 1) if key in relevant), None)
                record[method] = {
                    "latency_ms": latency,
                    "recall5": int(bool(first and first <= 5)),
                    "mrr10": 1.0 / first if first else 0.0,
                    "top": [k for _, k in keys[:5]],
                    "answerable": bool(row.get("answerable", True)),
                }
            per_question.append(record)
        self._report(per_question, chosen)
        if json_out:
            Path(json_out).write_text("\n".join(json.dumps(r) for r in per_question) + "\n", encoding="utf-8")

    def _report(self, records: list[dict[str, Any]], methods: list[str]) -> None:
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in records:
            groups[record["corpus"]].append(record)
            groups["all"].append(record)
        corpora = sorted(k for k in groups if k != "all") + ["all"]
        header = (
            "| method | "
            + " | ".join(f"{c} ({sum(1 for r in groups[c] if r[methods[0]]['answerable'])})" for c in corpora)
            + " | p50 ms | p95 ms |"
        )
        self.stdout.write("recall@5 / MRR@10 (answerable questions); latency over all questions")
        self.stdout.write(header)
        self.stdout.write("|" + "---|" * (len(corpora) + 3))
        for method in methods:
            cells = []
            for corpus in corpora:
                scored = [r[method] for r in groups[corpus] if r[method]["answerable"]]
                recall = statistics.mean(s["recall5"] for s in scored) if scored else 0.0
                mrr = statistics.mean(s["mrr10"] for s in scored) if scored else 0.0
                cells.append(f"{recall:.3f} / {mrr:.3f}")
            latencies = [r[method]["latency_ms"] for r in records]
            self.stdout.write(
                f"| {method} | "
                + " | ".join(cells)
                + f" | {_percentile(latencies, 0.5):.0f} | {_percentile(latencies, 0.95):.0f} |"
            )
        misses = [r["id"] for r in records if r.get("hybrid", {}).get("answerable") and not r["hybrid"]["recall5"]]
        if misses:
            self.stdout.write(f"hybrid misses (not in the first 5): {', '.join(misses)}")
