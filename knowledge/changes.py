"""The changes feed: what changed in the documents a viewer sees since an instant or a cursor.

It merges the events knowledge/timeline.py recorded with the ones the calendar makes: a document expires the day
after its `valid_until`, and one is superseded when its successor comes into force (the later of the link and the
successor's `valid_from`). Each item has a cursor; a page ends where the next begins.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from knowledge import validity
from knowledge.models import Document, DocumentEvent
from knowledge.selectors import visible_documents
from tenants.principals import Viewer

Kind = DocumentEvent.Kind


# --- the changes feed --------------------------------------------------------------------------------------------
class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class Change:
    at: dt.datetime
    key: str  # orders changes of one instant: "e<event pk>" or "x<document pk>"
    kind: str
    document: Document
    old_version: int | None = None
    new_version: int | None = None
    actor: str = ""
    detail: dict | None = None

    @property
    def cursor(self) -> str:
        return base64.urlsafe_b64encode(f"{self.at.isoformat()}|{self.key}".encode()).decode().rstrip("=")


def parse_since(value: str) -> tuple[dt.datetime, str]:
    """`since`: an ISO 8601 date or datetime, or a cursor from a previous page."""
    value = (value or "").strip()
    if not value:
        raise BadCursor("since: give an ISO 8601 datetime or a cursor from a previous page.")
    try:
        if len(value) == 10:  # a date: from its start
            day = validity.parse_date(value, field="since")
            if day is not None:
                return validity.day_start(day), ""
        return validity.parse_instant(value, field="since"), ""
    except validity.InvalidValidity:
        pass
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode()
        at, key = raw.split("|", 1)
        return dt.datetime.fromisoformat(at), key
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor(f"since: {value[:60]!r} is neither an ISO 8601 datetime nor a cursor.") from None


def _after(change: Change, since: tuple[dt.datetime, str]) -> bool:
    return (change.at, change.key) > since


def changes(*, viewer: Viewer, since: tuple[dt.datetime, str], limit: int = 100) -> tuple[list[Change], bool]:
    """What changed in the documents the viewer sees after `since`, oldest first; True when more follow."""
    now = timezone.now()
    visible = visible_documents(viewer)
    found: list[Change] = []
    events = (
        DocumentEvent.objects.for_tenant(viewer.tenant)
        .filter(document__in=visible)
        .filter(Q(at__gte=since[0]) | Q(kind=Kind.SUPERSEDED))
        .exclude(kind=Kind.REVIEWED)
        .select_related("document", "document__source")
        .order_by("at", "pk")
    )
    successors = {
        d.supersedes_id: d
        for d in visible.filter(supersedes__isnull=False).only("supersedes_id", "valid_from", "document_id", "readers")
    }
    for event in events.iterator():
        at = event.at
        if event.kind == Kind.SUPERSEDED:
            successor = successors.get(event.document_id)
            if successor is None:
                continue  # the link was since removed, or the viewer cannot see its successor
            if successor.valid_from:
                at = max(at, validity.day_start(successor.valid_from))
        change = Change(at, f"e{event.pk:012d}", event.kind, event.document, event.old_version, event.new_version,
                        event.actor, event.detail)  # fmt: skip
        if at <= now and _after(change, since):
            found.append(change)
    expired = visible.filter(valid_until__isnull=False, valid_until__gte=timezone.localdate(since[0]) - dt.timedelta(
        days=1), valid_until__lt=timezone.localdate(now)).select_related("source")  # fmt: skip
    for document in expired:
        assert document.valid_until is not None  # filtered above
        at = validity.day_start(document.valid_until + dt.timedelta(days=1))
        change = Change(at, f"x{document.pk:012d}", "expired", document, new_version=document.version)
        if at <= now and _after(change, since):
            found.append(change)
    found.sort(key=lambda c: (c.at, c.key))
    return found[:limit], len(found) > limit


def change_shape(change: Change, *, viewer: Viewer) -> dict[str, Any]:
    document = change.document
    item: dict[str, Any] = {
        "cursor": change.cursor,
        "at": change.at.isoformat(),
        "kind": change.kind,
        "document": {
            "id": str(document.public_id),
            "document_id": document.document_id,
            "document_key": document.display_key,
            "title": document.title,
            "source_id": document.source.source_id,
            "status": document.status,
        },  # fmt: skip
        "old_version": change.old_version,
        "new_version": change.new_version,
    }
    if change.kind == Kind.SUPERSEDED:
        by = (change.detail or {}).get("by")
        item["superseded_by"] = by
    if change.kind == "expired":
        item["valid_until"] = validity.iso_date(document.valid_until)
    if change.actor:
        item["actor"] = change.actor
    return item


def changes_page(*, viewer: Viewer, since: str, limit: int = 100) -> dict[str, Any]:
    """One page of the feed, as every door returns it; raises BadCursor for a `since` it cannot read."""
    found, more = changes(viewer=viewer, since=parse_since(since), limit=max(1, min(int(limit), 500)))
    return {
        "changes": [change_shape(change, viewer=viewer) for change in found],
        "next_cursor": found[-1].cursor if found else since,
        "has_more": more,
    }
