from __future__ import annotations

import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from feedback import runs
from feedback.evaluation import METRICS, evaluation_run
from feedback.models import EvalQuestion, EvalRun
from feedback.runner import wait_for
from knowledge import ids
from knowledge.search.retrieval import retrieve, retrieve_single_leg
from knowledge.shapes import StoreBusy
from tenants.models import Tenant
from tenants.principals import Viewer

WAIT_S = 3600  # the CLI waits this long for the web server's runner
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
        return retrieve_single_leg(viewer=Viewer.everything(tenant), query=question, top_k=10, leg=method)
    return retrieve(viewer=Viewer.everything(tenant), query=question, top_k=10, specific=method == "hybrid+specific",
                    rerank=method == "hybrid+rerank")  # fmt: skip


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


class Command(BaseCommand):
    help = (
        "Without a questions file: run the tenant's own evaluation set (built from its curation queue), retrieval "
        "and answers, keep the run for the evaluation page's plot and print its figures. With one: score retrieval "
        "on that set, recall@5, MRR@10 (document level) and latency, per method."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("questions", nargs="?", default="",
                            help="JSON lines: question, corpus, relevant_docs, answerable, kind")  # fmt: skip
        parser.add_argument("--methods", default=",".join(METHODS))
        parser.add_argument("--retrieval-only", action="store_true", help="the tenant's set: do not ask the model")
        parser.add_argument("--json", dest="json_out", default="", help="write per-question results here")

    def handle(self, *args: Any, tenant: str, questions: str, methods: str, json_out: str, retrieval_only: bool,
               **options: Any) -> None:  # fmt: skip
        owner = Tenant.objects.filter(slug=tenant).first()
        if owner is None:
            raise CommandError(f"No tenant with slug {tenant!r}.")
        if not questions:
            self.own_set(owner, answers=not retrieval_only, json_out=json_out)
            return
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
        try:
            _run("hybrid", owner, "warm up")
        except StoreBusy as exc:
            raise CommandError(
                f"{exc} Stop the web server first (it owns the embedded store), run with QDRANT_URL, "
                "or put the questions in the tenant's own set (the evaluation page)."
            ) from exc
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

    def own_set(self, owner: Tenant, *, answers: bool, json_out: str) -> None:
        count = EvalQuestion.objects.for_tenant(owner).count()
        if not count:
            raise CommandError(f"{owner.slug} has no evaluation questions yet: close an item of its curation queue.")
        self.stdout.write(f"{owner.slug}: {count} evaluation question(s){'' if answers else ', retrieval only'}…")
        run = runs.queue(tenant=owner, answers=answers, trigger="command", running=True)
        run = evaluation_run(run)  # claimed from the start: no runner takes it meanwhile
        if run.state == EvalRun.State.QUEUED:  # the web server owns the embedded store: its runner runs it
            self.stdout.write(
                "The web server owns the embedded vector store; its evaluation runner runs this. Waiting…"
            )
            run = wait_for(run, timeout=WAIT_S)
        if run.state != EvalRun.State.DONE:
            raise CommandError(
                run.error
                or f"The run is still {run.state} after {WAIT_S // 60} minutes: is the web "
                "server running? It stays queued and the evaluation page shows it when it ends."
            )
        figures = run.metrics
        self.stdout.write("| " + " | ".join(METRICS) + " | errors |")
        self.stdout.write("|" + "---|" * (len(METRICS) + 1))
        cells = [("–" if figures[m] is None else f"{figures[m]:.3f} (n={figures[f'n_{m}']})") for m in METRICS]
        self.stdout.write("| " + " | ".join(cells) + f" | {figures['errors']} |")
        self.stdout.write(f"model: {run.context.get('model')} · {run.context.get('live_documents')} live documents · "
                          f"{run.context.get('fixes')} fixes · run {run.public_id}")  # fmt: skip
        if json_out:
            Path(json_out).write_text("\n".join(json.dumps(r) for r in run.results) + "\n", encoding="utf-8")

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
