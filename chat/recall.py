"""Recall on change: an answer whose evidence changed is flagged, and those who received it are told.

The scan (every minute, and soon after a document or a membership changes: chat/tasks.py) looks only at the cited
documents (AnswerGround) that are no longer as they were when last checked — another version, retired or restored,
past its validity, superseded by a document in force, other readers — and at the answers of people whose role or
groups changed (the audit log's rows since the last scan began, kept in the shared `throttle` cache; a fresh
cache looks back ten minutes). For each such answer it computes each claim's state exactly as its receipt does
(receipts.claim_states): an answer is flagged when a claim is no longer `unchanged`, and flagged again only when that
state changes. An edit elsewhere in a cited document leaves every claim `unchanged`, so it flags nothing.

Who is told, once per flag:
- the staff member who asked: the answer's badge in their chat and their inbox of recalled answers (the record's
  recall fields; nothing else is stored);
- the agent's session the answer was given in: an `answer` change on its changes feed;
- the key's webhook, when it has one: a signed POST, retried with back-off (chat/webhooks.py).
What the asker is told is masked for the asker now: a claim resting on a document they may no longer read says
`no_longer_available` and nothing more."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.core.cache import caches
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from agent_sessions.models import AgentSession, SessionChange
from chat import receipts, records
from chat.models import AnswerGround, AnswerRecord, AnswerWebhook, WebhookDelivery
from knowledge import validity
from knowledge.models import Document, Status
from tenants.models import MembershipEvent

# Changes of someone's access in the audit log (a revoked key is told nothing more: its answers need no scan).
ACCESS_ACTIONS = ("removed", "role_changed", "group_left", "group_deleted", "deprovisioned")
SCAN_SOON_KEY = "ragsite:recall-scan-queued"
_LAST = "ragsite:recall-scan-last-event"


@dataclass
class Scanned:
    checked: int = 0  # answers whose ground was looked at
    flagged: int = 0  # answers newly flagged (or flagged with a new state)
    told_sessions: int = 0
    webhooks_queued: int = 0


def _moved(today: dt.date) -> Q:
    """Ground rows whose document is no longer as the row says."""
    retired = Q(document__status=Status.RETIRED)
    expired = validity.expired_filter(today, path="document__")
    return (
        ~Q(document__version=F("version"))
        | (retired & Q(retired=False))
        | (~retired & Q(retired=True))
        | (expired & Q(expired=False))
        | (~expired & Q(expired=True))
        | ~Q(document__readers=F("readers"))
    )


def _superseded_moved(now: dt.datetime) -> tuple[set[int], dict[int, int]]:
    """Ground rows whose successor in force is not the one they were checked with, and each document's successor."""
    grounded = AnswerGround.objects.values("document_id")
    candidates = Document.objects.filter(supersedes__in=grounded, status=Status.ACTIVE)
    successors: dict[int, int] = {}
    for tenant_id, pks in _by_tenant(candidates.values_list("tenant_id", "supersedes_id")).items():
        in_force = validity.successors_in_force(pks, tenant_id, now)
        successors.update({pk: successor for pk, (successor, _) in in_force.items()})
    rows = AnswerGround.objects.filter(Q(document_id__in=list(successors)) | Q(superseded_by__isnull=False))
    moved = {
        pk
        for pk, document, was in rows.values_list("pk", "document_id", "superseded_by")
        if successors.get(document) != was
    }
    return moved, successors


def _by_tenant(rows: Any) -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for tenant_id, pk in rows:
        found.setdefault(tenant_id, []).append(pk)
    return found


def _people_moved() -> set[int]:
    """Answers of the people whose access changed since the last scan began (the audit log's rows from then, a few
    seconds' overlap included: looking at an answer twice flags it once)."""
    now, last = timezone.now(), caches["throttle"].get(_LAST)
    since = dt.datetime.fromisoformat(last) - dt.timedelta(seconds=5) if last else now - dt.timedelta(minutes=10)
    events = MembershipEvent.objects.filter(action__in=ACCESS_ACTIONS, at__gte=since)
    answers: set[int] = set()
    for tenant_id, username, action, group in events.values_list("tenant_id", "username", "action", "group"):
        found = AnswerRecord.objects.filter(tenant_id=tenant_id)
        if action == "group_deleted":
            found = found.filter(grounds__readers__contains=f" group:{group} ")
        else:
            found = found.filter(user__username=username)
        answers.update(found.filter(grounds__isnull=False).values_list("pk", flat=True)[:10000])
    caches["throttle"].set(_LAST, now.isoformat(), None)
    return answers


def scan(*, now: dt.datetime | None = None) -> Scanned:
    """Flag every answer whose evidence changed since it was last checked, and tell those who received it."""
    now = now or timezone.now()
    today = timezone.localdate(now)
    report = Scanned()
    superseded, successors = _superseded_moved(now)
    grounds = AnswerGround.objects.filter(_moved(today) | Q(pk__in=superseded))
    answers = set(grounds.values_list("answer_id", flat=True)) | _people_moved()
    for start in range(0, len(answers), 200):
        batch = AnswerRecord.objects.filter(pk__in=sorted(answers)[start : start + 200])
        for record in batch.select_related("tenant", "user", "api_key", "agent_session"):
            report.checked += 1
            with transaction.atomic():
                _check(record, now, report)
    for ground in AnswerGround.objects.filter(answer_id__in=answers).select_related("document"):
        document = ground.document
        ground.version, ground.readers = document.version, document.readers
        ground.retired = document.status == Status.RETIRED
        ground.expired = validity.expired(document.valid_until, today)
        ground.superseded_by = successors.get(document.pk)
        ground.save(update_fields=["version", "readers", "retired", "expired", "superseded_by"])
    return report


def _check(record: AnswerRecord, now: dt.datetime, report: Scanned) -> None:
    states = receipts.claim_states(record, now=now)
    state = receipts.worst(states)
    if state == "unchanged" or state == record.recall_state:
        return
    asker = receipts.asker_viewer(record)
    claims = _told(record, states, asker)
    record.recall_state, record.recalled_at, record.recall_seen_at = state, now, None
    record.recall = {"state": state, "claims": claims}
    record.save(update_fields=["recall_state", "recalled_at", "recall_seen_at", "recall"])
    report.flagged += 1
    if asker is None:
        return  # the asker is gone: nobody to tell
    told = notice(record)
    if record.agent_session is not None and record.agent_session.ended_at is None:
        _tell_session(record.agent_session, record, told, now)
        report.told_sessions += 1
    webhook = AnswerWebhook.objects.filter(api_key_id=record.api_key_id).first() if record.api_key_id else None
    if webhook is not None:
        WebhookDelivery.objects.create(
            tenant_id=record.tenant_id, webhook=webhook, answer=record, payload=told, next_at=now
        )
        report.webhooks_queued += 1


def _told(record: AnswerRecord, states: list[tuple[str, dict[str, Any]]], asker: Any) -> list[dict[str, Any]]:
    """Each claim that is no longer `unchanged`, as its asker may read it: a claim on a document they can no longer
    read is its index and `no_longer_available`, nothing else."""
    shown = (
        records.masked_for(asker, text=record.answer, citations=record.citations, claims=record.claims)[2]
        if asker is not None
        else [{"hidden": True} for _ in record.claims]
    )
    told = []
    for index, ((state, detail), claim) in enumerate(zip(states, shown, strict=True)):
        if state == "unchanged":
            continue
        if claim.get("hidden") or state == "no_longer_available":
            told.append({"index": index, "now": "no_longer_available"})
            continue
        told.append({"index": index, "text": claim.get("text", ""), "now": state, **detail})
    return told


def notice(record: AnswerRecord) -> dict[str, Any]:
    """What the asker and their agents are told of a flagged answer (the webhook's body, the feed's detail)."""
    return {
        "answer_id": str(record.public_id),
        "asked_at": record.created_at.isoformat(),
        "question": record.question if record.recall_state != "no_longer_available" else "",
        "now": record.recall_state,
        "claims": record.recall.get("claims", []),
        "flagged_at": record.recalled_at.isoformat() if record.recalled_at else None,
    }


def _tell_session(session: AgentSession, record: AnswerRecord, told: dict[str, Any], now: dt.datetime) -> None:
    change = SessionChange.objects.create(
        tenant_id=session.tenant_id,
        session=session,
        kind=SessionChange.Kind.ANSWER,
        document_id_text="",
        at=now,
        detail=told,
    )
    AgentSession.objects.filter(pk=session.pk, latest_change__lt=change.pk).update(latest_change=change.pk)


# --- the staff inbox ----------------------------------------------------------------------------------------------
def recalled_for(*, tenant: Any, user: Any) -> Any:
    """A member's answers whose ground changed, the latest flagged first."""
    return (
        AnswerRecord.objects.for_tenant(tenant)
        .filter(user=user, recalled_at__isnull=False)
        .order_by("-recalled_at", "-pk")
    )


def unseen_count(*, tenant: Any, user: Any) -> int:
    return recalled_for(tenant=tenant, user=user).filter(recall_seen_at__isnull=True).count()


def seen(record: AnswerRecord) -> None:
    if record.recalled_at is not None and record.recall_seen_at is None:
        record.recall_seen_at = timezone.now()
        record.save(update_fields=["recall_seen_at"])
