"""Retention: a tenant's chats, answers and receipts older than its period (Tenant.answers_keep_days; None: kept) are
deleted by the worker every day, and nothing else is: documents, sources, the evaluation set and the audit log stay.
An answer a 👎 still holds open in the curation queue is kept until the item is closed (an admin sees which); an
answer whose 👎 was fixed goes with its verdict and fix, and the evaluation question the fix made stays. What will go
is shown to the tenant's admins before it goes (`due`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from chat.models import AnswerRecord, ChatSession, Verdict
from tenants.models import Tenant


@dataclass
class Due:
    cutoff: dt.datetime | None
    chats: int = 0
    answers: int = 0
    kept_open: int = 0  # answers kept because a 👎 on them is still open in the curation queue
    oldest: Any = None  # the oldest answer that will go


def _open_verdicts() -> Any:
    return Exists(Verdict.objects.filter(answer=OuterRef("pk"), helpful=False, fix__isnull=True))


def _querysets(tenant: Tenant, cutoff: dt.datetime) -> tuple[Any, Any, Any]:
    answers = AnswerRecord.objects.for_tenant(tenant).filter(created_at__lt=cutoff).annotate(held=_open_verdicts())
    chats = ChatSession.objects.for_tenant(tenant).filter(updated_at__lt=cutoff)
    return chats, answers.filter(held=False), answers.filter(held=True)


def due(tenant: Tenant, *, now: dt.datetime | None = None) -> Due:
    """What the next run will delete for this tenant (nothing when it keeps everything)."""
    if tenant.answers_keep_days is None:
        return Due(cutoff=None)
    cutoff = (now or timezone.now()) - dt.timedelta(days=tenant.answers_keep_days)
    chats, answers, held = _querysets(tenant, cutoff)
    return Due(
        cutoff=cutoff,
        chats=chats.count(),
        answers=answers.count(),
        kept_open=held.count(),
        oldest=answers.order_by("created_at").first(),
    )


def apply(*, now: dt.datetime | None = None) -> dict[str, dict[str, int]]:
    """Delete what is past every tenant's period: {tenant slug: {"chats": n, "answers": n}}."""
    done: dict[str, dict[str, int]] = {}
    for tenant in Tenant.objects.filter(answers_keep_days__isnull=False):
        cutoff = (now or timezone.now()) - dt.timedelta(days=tenant.answers_keep_days or 0)
        chats, answers, _held = _querysets(tenant, cutoff)
        with transaction.atomic():
            n_chats = chats.count()
            chats.delete()  # its messages go with it
            n_answers = answers.count()
            AnswerRecord.objects.filter(pk__in=list(answers.values_list("pk", flat=True))).delete()
        done[tenant.slug] = {"chats": n_chats, "answers": n_answers}
    return done
