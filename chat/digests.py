"""A member's digest: what changed in the documents they asked about or were cited to them, daily or weekly by their
choice (DigestChoice), by e-mail through the mail settings and on a page. Each line is a sentence taken from the
change's own note (a commit message, an edit summary) or from the document itself (a sentence the new version has
and the old one had not), with its citation; only documents the member may read now, from the changes feed
(knowledge/changes.py), which decides visibility once."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.utils import timezone, translation

from chat.models import AnswerGround, DigestChoice
from knowledge import changes
from knowledge.models import Chunk
from tenants.models import Membership
from tenants.principals import viewer_for

PERIOD = {DigestChoice.Every.DAILY: dt.timedelta(days=1), DigestChoice.Every.WEEKLY: dt.timedelta(days=7)}
MAX_LINES = 50
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass
class Line:
    kind: str
    at: dt.datetime
    document_key: str
    document_id: str
    title: str
    version: int | None
    sentences: list[str] = field(default_factory=list)
    superseded_by: str | None = None
    valid_until: str | None = None


def digest(membership: Membership, *, since: dt.datetime) -> list[Line]:
    """The changes since `since` in the documents this member asked about or was cited, as they may read them."""
    viewer = viewer_for(tenant=membership.tenant, membership=membership)
    asked_about = set(
        AnswerGround.objects.filter(answer__tenant=membership.tenant, answer__user=membership.user).values_list(
            "document_id", flat=True
        )
    )
    if not asked_about:
        return []
    lines: list[Line] = []
    cursor: tuple[dt.datetime, str] = (since, "")
    while len(lines) < MAX_LINES:
        found, more = changes.changes(viewer=viewer, since=cursor, limit=500)
        for change in found:
            if change.document.pk in asked_about and change.kind != "added":
                lines.append(_line(change))
        if not more or not found:
            break
        cursor = (found[-1].at, found[-1].key)
    return lines[:MAX_LINES]


def _line(change: changes.Change) -> Line:
    document = change.document
    line = Line(
        kind=change.kind,
        at=change.at,
        document_key=document.display_key,
        document_id=document.document_id,
        title=document.title,
        version=change.new_version,
    )
    detail = change.detail or {}
    note = str(detail.get("message") or detail.get("summary") or detail.get("note") or "").strip()
    if note:
        line.sentences.append(note.splitlines()[0][:300])
    if change.kind == "changed" and change.old_version and change.new_version:
        line.sentences.extend(_new_sentences(document.pk, change.old_version, change.new_version))
    if change.kind == "superseded":
        line.superseded_by = detail.get("by")
    if change.kind == "expired" and document.valid_until:
        line.valid_until = document.valid_until.isoformat()
    return line


def _new_sentences(document: int, old: int, new: int, limit: int = 2) -> list[str]:
    """The sentences the new version has and the old one had not (the first `limit`), word for word."""

    def sentences(version: int) -> list[str]:
        texts = Chunk.objects.filter(document_version__document_id=document, document_version__version=version)
        found: list[str] = []
        for text in texts.order_by("index").values_list("text", flat=True):
            found.extend(s.strip(" #*-") for s in SENTENCE_RE.split(text) if len(s.strip()) > 3)
        return found

    before = {" ".join(s.split()).casefold() for s in sentences(old)}
    return [s for s in sentences(new) if " ".join(s.split()).casefold() not in before][:limit]


def due_members(*, now: dt.datetime) -> list[tuple[DigestChoice, Membership]]:
    choices = DigestChoice.objects.exclude(every=DigestChoice.Every.NEVER).select_related("tenant", "user")
    found = []
    for choice in choices:
        period = PERIOD[DigestChoice.Every(choice.every)]
        if choice.last_sent_at is not None and now - choice.last_sent_at < period - dt.timedelta(minutes=5):
            continue
        membership = Membership.objects.filter(tenant=choice.tenant, user=choice.user, user__is_active=True).first()
        if membership is not None and choice.user.email:
            found.append((choice, membership))
    return found


def send_due(*, now: dt.datetime | None = None) -> int:
    """Send every digest that is due (one with nothing in it is not sent, and still counts as sent)."""
    now = now or timezone.now()
    sent = 0
    for choice, membership in due_members(now=now):
        since = choice.last_sent_at or now - PERIOD[DigestChoice.Every(choice.every)]
        lines = digest(membership, since=since)
        if lines:
            context: dict[str, Any] = {
                "tenant": choice.tenant,
                "user": choice.user,
                "lines": lines,
                "since": since,
                "site": settings.RAG_PUBLIC_URL,
            }
            with translation.override(settings.LANGUAGE_CODE):
                subject = render_to_string("chat/email/digest_subject.txt", context).strip()
                body = render_to_string("chat/email/digest.txt", context)
            send_mail(subject, body, None, [choice.user.email])
            sent += 1
        choice.last_sent_at = now
        choice.save(update_fields=["last_sent_at"])
    return sent
