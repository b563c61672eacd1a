"""Reads of the feedback loop: the curation queue, the evaluation set and its runs, always from one tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from chat.models import AnswerRecord, Verdict
from feedback.models import EvalQuestion, EvalRun, Fix
from tenants.models import Tenant, TenantQuerySet

QUEUE_PAGE = 100


@dataclass(frozen=True)
class QueueFilters:
    reason: str = ""
    channel: str = ""  # where the verdict came from: chat, api, mcp
    source_id: str = ""  # a knowledge source among the answer's hits
    closed: bool = False

    @classmethod
    def from_query(cls, params: Any) -> QueueFilters:
        reason = params.get("reason", "")
        channel = params.get("channel", "")
        return cls(
            reason=reason if reason in Verdict.Reason.values else "",
            channel=channel if channel in AnswerRecord.Channel.values else "",
            source_id=str(params.get("source", ""))[:200], closed=params.get("closed") in ("1", "true"),
        )  # fmt: skip


def queue_items(*, tenant: Tenant, filters: QueueFilters = QueueFilters()) -> list[Verdict]:
    """Thumbs-down verdicts, newest first: open ones (no fix yet), or the closed ones with their fix."""
    items = (
        Verdict.objects.for_tenant(tenant)
        .filter(helpful=False, fix__isnull=not filters.closed)
        .select_related("answer", "document", "user", "api_key", "fix")
    )
    if filters.reason:
        items = items.filter(reason=filters.reason)
    if filters.channel:
        items = items.filter(channel=filters.channel)
    if not filters.source_id:
        return list(items[:QUEUE_PAGE])
    # The hits are JSON kept as they were: filter them here, over a bounded window of the newest items.
    window = items[: QUEUE_PAGE * 10]
    return [v for v in window if any(h.get("source_id") == filters.source_id for h in v.answer.hits)][:QUEUE_PAGE]


def queue_counts(*, tenant: Tenant) -> dict[str, int]:
    verdicts = Verdict.objects.for_tenant(tenant)
    return {
        "open": verdicts.filter(helpful=False, fix__isnull=True).count(),
        "closed": verdicts.filter(helpful=False, fix__isnull=False).count(),
        "helpful": verdicts.filter(helpful=True).count(),
    }


def queue_item(*, tenant: Tenant, public_id: Any) -> Verdict:
    """One item of this tenant's queue, open or closed; 404 for anything else."""
    items = Verdict.objects.for_tenant(tenant).filter(helpful=False)
    return items.select_related("answer", "document", "user", "api_key").public_or_404(public_id)


def item_fix(*, verdict: Verdict) -> Fix | None:
    return Fix.objects.filter(verdict=verdict).select_related("chunk", "document").first()


def eval_questions(*, tenant: Tenant) -> TenantQuerySet[EvalQuestion]:
    return EvalQuestion.objects.for_tenant(tenant).select_related("fix").order_by("created_at", "pk")


def eval_runs(*, tenant: Tenant) -> QuerySet[EvalRun]:
    """The tenant's runs, newest first (a read only: runs whose runner died are failed by feedback/runs.py)."""
    return EvalRun.objects.for_tenant(tenant).order_by("-created_at", "-pk")


def eval_run(*, tenant: Tenant, public_id: Any) -> EvalRun:
    return EvalRun.objects.for_tenant(tenant).public_or_404(public_id)
