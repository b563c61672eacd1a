"""django-q2 entry points of the chat app: the recall scan (every minute, and soon after a document or someone's
access changes), webhook deliveries (every minute), digests (hourly: each member's when it is due) and retention
(daily). The schedules are made by migration chat 0009."""

from __future__ import annotations

from typing import Any

from django.core.cache import caches
from django.db import transaction

from chat import digests, recall, retention, webhooks


def recall_scan_task() -> dict[str, int]:
    caches["throttle"].delete(recall.SCAN_SOON_KEY)
    found = recall.scan()
    if found.webhooks_queued:  # sent by a task of their own: a receiver that hangs holds up no scan
        from django_q.tasks import async_task

        async_task("chat.tasks.webhooks_task", task_name="answer-webhooks")
    return {
        "checked": found.checked,
        "flagged": found.flagged,
        "sessions": found.told_sessions,
        "webhooks": found.webhooks_queued,
    }


def webhooks_task() -> dict[str, int]:
    sent = webhooks.deliver_due()
    return {"delivered": sent.delivered, "failed": sent.failed}


def digests_task() -> int:
    return digests.send_due()


def retention_task() -> dict[str, Any]:
    return retention.apply()


def recall_scan_soon(**_: Any) -> None:
    """After a commit that changed a document or someone's access: one scan, a few seconds later (one per burst)."""

    def queue() -> None:
        if caches["throttle"].add(recall.SCAN_SOON_KEY, 1, timeout=60):  # one queued scan for a burst of changes
            from django_q.tasks import async_task

            async_task("chat.tasks.recall_scan_task", task_name="recall-scan")

    transaction.on_commit(queue)
