"""The review list: documents past their review date or their validity, ranked by the harm they can do.

Harm is use: how often answers of the last 30 days cited the document, then how often they retrieved it, then
how long it is overdue. Actions ("still true, review again in N days", "retire", "superseded by…") are recorded
with who and when (knowledge/timeline.py). Every read starts from the viewer's documents (knowledge.selectors).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from chat.models import AnswerRecord
from knowledge import selectors, services, validity
from knowledge.models import Document, Status
from tenants.principals import Viewer

USE_WINDOW_DAYS = 30
MAX_ITEMS = 200
MAX_ANSWERS_READ = 20000  # the most recent answers of the window that the use counts read
ACTIONS = ("still_true", "retire", "superseded_by")


@dataclass
class ReviewItem:
    document: Document
    reason: str  # review_due | expired
    overdue_days: int
    cited: int
    retrieved: int

    def shape(self, freshness: dict[str, Any]) -> dict[str, Any]:
        d = self.document
        return {
            "document": {
                "id": str(d.public_id),
                "document_id": d.document_id,
                "document_key": d.display_key,
                "title": d.title,
                "source_id": d.source.source_id,
            },  # fmt: skip
            "reason": self.reason,
            "overdue_days": self.overdue_days,
            "cited_30d": self.cited,
            "retrieved_30d": self.retrieved,
            "freshness": freshness,
            "reviewed_at": d.reviewed_at.isoformat() if d.reviewed_at else None,
            "reviewed_by": d.reviewed_by,
        }


def _use(tenant: Any, since: dt.datetime) -> tuple[Counter[str], Counter[str]]:
    """Document id → times cited, times retrieved, in the answers recorded since then (each answer counts once)."""
    cited: Counter[str] = Counter()
    retrieved: Counter[str] = Counter()
    answers = AnswerRecord.objects.for_tenant(tenant).filter(created_at__gte=since).order_by("-created_at")
    for citations, hits in answers.values_list("citations", "hits")[:MAX_ANSWERS_READ]:
        cited.update({str(c.get("document_id")) for c in citations or [] if isinstance(c, dict)})
        retrieved.update({str(h.get("document_id")) for h in hits or [] if isinstance(h, dict)})
    return cited, retrieved


def review_items(*, viewer: Viewer, limit: int = MAX_ITEMS) -> list[ReviewItem]:
    today = timezone.localdate()
    documents = (
        selectors.visible_documents(viewer)
        .filter(status=Status.ACTIVE)
        .filter(validity.review_due_filter(today))
        .select_related("source", "supersedes")
    )
    cited, retrieved = _use(viewer.tenant, timezone.now() - dt.timedelta(days=USE_WINDOW_DAYS))
    replaced = validity.superseded_at(viewer.tenant, timezone.now())  # what they said is history: nothing to review
    items = []
    for document in documents.exclude(pk__in=list(replaced))[:5000]:
        expired = document.valid_until is not None and document.valid_until < today
        since = document.valid_until if expired else document.review_by
        items.append(ReviewItem(
            document=document, reason="expired" if expired else "review_due",
            overdue_days=(today - since).days if since else 0,
            cited=cited[document.document_id], retrieved=retrieved[document.document_id],
        ))  # fmt: skip
    items.sort(key=lambda i: (-i.cited, -i.retrieved, -i.overdue_days, i.document.document_id))
    return items[:limit]


def review_page(*, viewer: Viewer, limit: int = MAX_ITEMS) -> list[dict[str, Any]]:
    clock = validity.Clock.for_read(viewer.tenant)
    return [
        item.shape(dict(clock.freshness(item.document, sees=viewer.sees)))
        for item in review_items(viewer=viewer, limit=limit)
    ]


class ReviewRefused(ValueError):
    """An action that cannot be done as asked; the message says why."""


def review_act(*, viewer: Viewer, document: Document, action: str, actor: str, days: int | None = None,
               successor: str = "") -> Document:  # fmt: skip
    """One click on the review list: still true (due again in `days`), retire, or superseded by another document."""
    tenant = viewer.tenant
    if action == "still_true":
        if not days or not 1 <= days <= 3650:
            raise ReviewRefused("Say in how many days (1 to 3650) it is due again.")
        return services.document_reviewed(tenant=tenant, document=document, days=days, actor=actor)
    if action == "retire":
        services.documents_retire(tenant=tenant, documents=selectors.document_rows(viewer=viewer, document=document),
                                  actor=actor)  # fmt: skip
        return _fresh(viewer, document)
    if action == "superseded_by":
        newer = selectors.document_get(viewer=viewer, document_id=successor.strip()) if successor.strip() else None
        if newer is None:
            newer = _by_key(viewer, successor)
        if newer is None:
            raise ReviewRefused(f"No document {successor.strip()!r} that you can see names the successor.")
        try:
            link = {"supersedes": str(document.public_id)}
            services.document_set_validity(tenant=tenant, document=newer, changes=link, actor=actor)
        except validity.InvalidValidity as exc:
            raise ReviewRefused(str(exc)) from exc
        return _fresh(viewer, document)
    raise ReviewRefused(f"action: use one of {', '.join(ACTIONS)}.")


def _fresh(viewer: Viewer, document: Document) -> Document:
    found = selectors.document_get(viewer=viewer, document_id=document.public_id)
    return found if found is not None else document


def _by_key(viewer: Viewer, key: str) -> Document | None:
    matches = list(
        selectors.visible_documents(viewer).exclude(status=Status.FAILED).filter(document_key=key.strip())[:2]
    )
    return matches[0] if len(matches) == 1 else None
