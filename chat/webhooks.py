"""An API key's webhook: where its recalled answers are posted (chat/recall.py queues them).

Each delivery is a POST of the recall notice as JSON, signed like Stripe's and GitHub's webhooks: the header
`X-Ragsite-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the webhook's secret>`, so a receiver
checks the body and refuses a replay of an old one. A 2xx is delivered; anything else (an error status, a refused
connection, a receiver that hangs past RAG_WEBHOOK_TIMEOUT_S) is retried after 1, 2, 4 … minutes, RAG_WEBHOOK_ATTEMPTS
times in all; every failure is kept on the delivery, which the keys page shows. Deliveries are sent by their own task,
never by the scan or an ingestion job, so a receiver that hangs delays nothing else."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chat.models import AnswerWebhook, WebhookDelivery
from core.sealed import seal, unseal
from knowledge import outbound
from tenants.models import ApiKey

PURPOSE = "answer webhook secret"
BACKOFF_MINUTES = (1, 2, 4, 8, 16, 32, 64, 128)


class WebhookRefused(ValueError):
    """A webhook URL this server will not post to (outside RAG_ALLOWED_WEB_PREFIXES)."""


def webhook_set(*, api_key: ApiKey, url: str) -> tuple[AnswerWebhook, str]:
    """Set (or replace) a key's webhook: the URL checked as a website source's is; a new secret, returned once."""
    try:
        checked = outbound.location_check(url, api_key.tenant.slug)
    except outbound.FolderNotAllowed as exc:
        raise WebhookRefused(str(exc)) from exc
    secret = "whsec_" + secrets.token_urlsafe(32)
    webhook, _ = AnswerWebhook.objects.update_or_create(
        api_key=api_key, defaults={"tenant": api_key.tenant, "url": checked, "secret": seal(secret, purpose=PURPOSE)}
    )
    return webhook, secret


def webhook_remove(*, api_key: ApiKey) -> None:
    AnswerWebhook.objects.filter(api_key=api_key).delete()


def signature(secret: str, body: bytes, at: int) -> str:
    mac = hmac.new(secret.encode(), f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={mac}"


@dataclass
class Sent:
    delivered: int = 0
    failed: int = 0


def deliver_due(*, now: dt.datetime | None = None, limit: int = 100) -> Sent:
    """Send the deliveries that are due (each claimed first, so two workers never send one twice)."""
    now = now or timezone.now()
    sent = Sent()
    due = WebhookDelivery.objects.filter(next_at__lte=now).order_by("next_at", "pk").values_list("pk", flat=True)
    for pk in list(due[:limit]):
        with transaction.atomic():
            delivery = (
                WebhookDelivery.objects.select_for_update(skip_locked=True)
                .filter(pk=pk, next_at__lte=now)
                .select_related("webhook", "answer")
                .first()
            )
            if delivery is None:
                continue
            delivery.attempts += 1
            delivery.next_at = None  # claimed: set again below when it must be retried
            delivery.save(update_fields=["attempts", "next_at"])
        error = _send(delivery)
        if error:
            sent.failed += 1
            more = delivery.attempts < settings.RAG_WEBHOOK_ATTEMPTS
            wait = BACKOFF_MINUTES[min(delivery.attempts - 1, len(BACKOFF_MINUTES) - 1)]
            delivery.next_at = now + dt.timedelta(minutes=wait) if more else None  # from the run's own clock
            delivery.last_error = error[:500]
        else:
            sent.delivered += 1
            delivery.delivered_at, delivery.last_error = now, ""
        delivery.save(update_fields=["next_at", "last_error", "delivered_at"])
    return sent


def _send(delivery: WebhookDelivery) -> str:
    """Post one delivery; "" when the receiver took it, else why not."""
    body = json.dumps({"event": "answer.recalled", "delivery": str(delivery.pk), **delivery.payload}).encode()
    at = int(time.time())
    try:
        secret = unseal(delivery.webhook.secret, purpose=PURPOSE)
        headers = {
            "Content-Type": "application/json",
            "X-Ragsite-Event": "answer.recalled",
            "X-Ragsite-Delivery": str(delivery.pk),
            "X-Ragsite-Signature": signature(secret, body, at),
        }
        status = outbound.post(delivery.webhook.url, body, headers, timeout_s=settings.RAG_WEBHOOK_TIMEOUT_S)
    except Exception as exc:  # a refused connection, a timeout, an address no longer allowed: kept, retried
        return f"{type(exc).__name__}: {exc}"[:500]
    return "" if 200 <= status < 300 else f"the receiver answered {status}"


def key_webhook_state(api_key: ApiKey) -> dict[str, Any]:
    """What the keys page shows of a key's webhook: its URL, its last deliveries and their failures."""
    webhook = AnswerWebhook.objects.filter(api_key=api_key).first()
    if webhook is None:
        return {"webhook": None}
    recent = list(webhook.deliveries.all()[:10])
    return {
        "webhook": webhook,
        "deliveries": recent,
        "failing": sum(1 for d in recent if d.last_error),
        "pending": webhook.deliveries.filter(next_at__isnull=False).count(),
    }
