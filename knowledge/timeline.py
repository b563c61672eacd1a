"""A document's history: what the indexer and curation record when a version lands, a document is retired or
restored, its validity changes or an admin reviews it (DocumentEvent), and the changes feed built from it.

The feed (`changes`) merges the recorded events with the ones the calendar makes: a document expires the day
after its `valid_until`, and one is superseded when its successor comes into force (the later of the link and
the successor's `valid_from`). Each item has a cursor; a page ends where the next begins.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from knowledge import validity
from knowledge.models import Document, DocumentEvent, DocumentVersion, Status
from tenants.principals import Viewer

Kind = DocumentEvent.Kind


def record(document: Document, kind: str, *, at: dt.datetime | None = None, actor: str = "",
           old_version: int | None = None, new_version: int | None = None, **detail: Any) -> None:  # fmt: skip
    DocumentEvent.objects.create(
        tenant_id=document.tenant_id, document=document, kind=kind, at=at or timezone.now(), actor=actor,
        old_version=old_version, new_version=new_version, detail=detail,
    )  # fmt: skip


# --- a version lands ---------------------------------------------------------------------------------------------
def stage_version(document: Document, version: DocumentVersion, now: dt.datetime) -> None:
    """Before a pending version's points are stored: the window it will be served with (what its file states, else
    the document's current window) and the instant it will be served from."""
    stated = version.stated or {}
    if "valid_from" in stated or "valid_until" in stated:
        version.valid_from = _date(stated.get("valid_from")) if "valid_from" in stated else document.valid_from
        version.valid_until = _date(stated.get("valid_until")) if "valid_until" in stated else document.valid_until
        try:
            validity.check_window(version.valid_from, version.valid_until)
        except validity.InvalidValidity as exc:  # one stated date against the document's other: keep the document's
            version.valid_from, version.valid_until = document.valid_from, document.valid_until
            version.stated = {**stated, "problems": [*stated.get("problems", []), f"{exc} Kept the document's window."]}
            DocumentVersion.objects.filter(pk=version.pk).update(stated=version.stated)
    else:
        version.valid_from, version.valid_until = document.valid_from, document.valid_until
    version.served_from, version.served_until = now, None
    DocumentVersion.objects.filter(pk=version.pk).update(
        valid_from=version.valid_from, valid_until=version.valid_until, served_from=now, served_until=None
    )


def _date(value: Any) -> dt.date | None:
    return dt.date.fromisoformat(value) if value else None


def version_served(document: Document, version: DocumentVersion, previous: list[DocumentVersion],
                   now: dt.datetime) -> None:  # fmt: skip
    """Inside the activation's transaction: the document takes the version's window, its stated review date and
    `supersedes` (or the source's review interval), and the event is recorded."""
    stated = version.stated or {}
    problems = list(stated.get("problems", []))
    fields: dict[str, Any] = {
        "valid_from": version.valid_from, "valid_until": version.valid_until, "content_changed_at": now,
    }  # fmt: skip
    if stated.get("review_by"):
        fields["review_by"], fields["review_by_origin"] = _date(stated["review_by"]), "stated"
    elif document.source.review_every_days:
        due = timezone.localdate(now) + dt.timedelta(days=document.source.review_every_days)
        fields["review_by"], fields["review_by_origin"] = due, "source"
    if "supersedes" in stated:
        fields["supersedes_ref"] = stated["supersedes"]
        try:
            target = validity.resolve_reference(document, stated["supersedes"])
            if document.supersedes_id != target.pk:
                fields["supersedes"] = target
                record(target, Kind.SUPERSEDED, at=now, by=document.document_id)
        except validity.InvalidValidity as exc:
            problems.append(str(exc))
    fields["validity_problems"] = problems
    Document.objects.filter(pk=document.pk).update(**fields)
    old = (
        document.versions.filter(status__in=[Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED])
        .exclude(pk=version.pk).order_by("-version").values_list("version", flat=True).first()
    )  # fmt: skip
    if old is not None:
        record(document, Kind.CHANGED, at=now, old_version=old, new_version=version.version)
    else:
        record(document, Kind.ADDED, at=now, new_version=version.version)


def resolve_pending_links(*, source_pk: int) -> None:
    """After a sync: a `supersedes` that named a document the same sync had not yet read is tried again."""
    for document in Document.objects.filter(source_id=source_pk, supersedes__isnull=True).exclude(supersedes_ref=""):
        try:
            target = validity.resolve_reference(document, document.supersedes_ref)
        except validity.InvalidValidity:
            continue
        problems = [p for p in document.validity_problems if not p.startswith("supersedes:")]
        Document.objects.filter(pk=document.pk).update(supersedes=target, validity_problems=problems)
        record(target, Kind.SUPERSEDED, by=document.document_id)


def retired(document_pks: list[int], now: dt.datetime, *, actor: str = "") -> None:
    """Documents just retired (gone from their folder, or by an admin): their served version stops being served."""
    DocumentVersion.objects.filter(document_id__in=document_pks, status=Status.RETIRED, served_until__isnull=True
                                   ).update(served_until=now)  # fmt: skip
    for document in Document.objects.filter(pk__in=document_pks):
        record(document, Kind.RETIRED, at=now, actor=actor, old_version=document.version)


def restored(document: Document, version: DocumentVersion, now: dt.datetime, *, actor: str = "") -> None:
    DocumentVersion.objects.filter(pk=version.pk).update(served_until=None)
    record(document, Kind.RESTORED, at=now, actor=actor, new_version=version.version)


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
        return validity.parse_instant(value, field="since") if len(value) != 10 else validity.day_start(
            validity.parse_date(value, field="since")), ""  # fmt: skip
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
    from knowledge.selectors import visible_documents

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
        item["valid_until"] = validity._iso(document.valid_until)
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


# --- curation: validity and review -----------------------------------------------------------------------------
def document_set_validity(*, document: Document, changes: dict[str, Any], actor: str) -> Document:
    """Set any of valid_from, valid_until, review_by (dates or None) and supersedes (a reference, or None to clear);
    raises InvalidValidity naming the field. The served version takes the new window; the payloads follow."""
    fresh = Document.objects.select_related("source", "tenant").get(pk=document.pk)
    values = {name: changes[name] for name in validity.FIELDS if name in changes}
    window = (values.get("valid_from", fresh.valid_from), values.get("valid_until", fresh.valid_until))
    validity.check_window(*window)
    target = None
    if changes.get("supersedes"):
        target = validity.resolve_reference(fresh, changes["supersedes"])
    with transaction.atomic():
        update: dict[str, Any] = {**values, "updated_at": timezone.now(), "needs_sync": True}
        if "review_by" in values:
            update["review_by_origin"] = "stated" if values["review_by"] else ""
        if "supersedes" in changes:
            update["supersedes"], update["supersedes_ref"] = target, (changes["supersedes"] or "") if target else ""
            update["validity_problems"] = [p for p in fresh.validity_problems if not p.startswith("supersedes:")]
        Document.objects.filter(pk=fresh.pk).update(**update)
        DocumentVersion.objects.filter(document=fresh, status=Status.ACTIVE).update(
            valid_from=window[0], valid_until=window[1]
        )
        shown = {k: validity._iso(v) if isinstance(v, dt.date) else v for k, v in values.items()}
        if "supersedes" in changes:
            shown["supersedes"] = target.document_id if target else None
        record(fresh, Kind.VALIDITY, actor=actor, **shown)
        if target is not None and target.pk != fresh.supersedes_id:
            record(target, Kind.SUPERSEDED, actor=actor, by=fresh.document_id)
    return Document.objects.get(pk=fresh.pk)


def document_reviewed(*, document: Document, days: int, actor: str) -> Document:
    """ "Still true": the next review is due in `days` days; who and when are kept."""
    now = timezone.now()
    due = timezone.localdate(now) + dt.timedelta(days=days)
    Document.objects.filter(pk=document.pk).update(review_by=due, review_by_origin="reviewed", reviewed_at=now,
                                                  reviewed_by=actor)  # fmt: skip
    record(document, Kind.REVIEWED, at=now, actor=actor, review_by=due.isoformat())
    return Document.objects.get(pk=document.pk)
