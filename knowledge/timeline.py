"""A document's history, written: what the indexer and curation record when a version lands, a document is
retired or restored, its validity changes or an admin reviews it (DocumentEvent). knowledge/changes.py reads it
as the changes feed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
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


def predecessors_resync(document_pks: list[int], *also: int | None) -> None:
    """The documents these supersede (and `also`) carry their successor's window in their payloads: re-sync them."""
    targets = set(Document.objects.filter(pk__in=document_pks, supersedes__isnull=False).values_list(
        "supersedes_id", flat=True))  # fmt: skip
    targets |= {pk for pk in also if pk}
    if targets:
        Document.objects.filter(pk__in=targets).update(needs_sync=True)


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
    # A git source's version is served from its commit's date (what the repository said then), never after now.
    committed = dt.datetime.fromisoformat(version.commit["date"]) if (version.commit or {}).get("date") else now
    version.served_from, version.served_until = min(committed, now), None
    DocumentVersion.objects.filter(pk=version.pk).update(
        valid_from=version.valid_from,
        valid_until=version.valid_until,
        served_from=version.served_from,
        served_until=None,
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
    elif document.source.review_every_days and document.review_by_origin != "stated":  # a set date is kept
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
    predecessors_resync([document.pk], document.supersedes_id)  # the new window, the new link, the old link
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
        predecessors_resync([document.pk])
        record(target, Kind.SUPERSEDED, by=document.document_id)


def retired(document_pks: list[int], now: dt.datetime, *, actor: str = "") -> None:
    """Documents just retired (gone from their folder, or by an admin): their served version stops being served."""
    DocumentVersion.objects.filter(document_id__in=document_pks, status=Status.RETIRED, served_until__isnull=True
                                   ).update(served_until=now)  # fmt: skip
    for document in Document.objects.filter(pk__in=document_pks):
        record(document, Kind.RETIRED, at=now, actor=actor, old_version=document.version)
    predecessors_resync(document_pks)  # a retired successor supersedes nothing now


def restored(document: Document, version: DocumentVersion, now: dt.datetime, *, actor: str = "") -> None:
    DocumentVersion.objects.filter(pk=version.pk).update(served_until=None)
    predecessors_resync([document.pk])
    record(document, Kind.RESTORED, at=now, actor=actor, new_version=version.version)


# --- curation: validity and review -----------------------------------------------------------------------------
def document_set_validity(*, document: Document, changes: dict[str, Any], actor: str,
                          viewer: Viewer | None = None) -> Document:  # fmt: skip
    """Set any of valid_from, valid_until, review_by (dates or None) and supersedes (a reference, or None to clear);
    raises InvalidValidity naming the field. The served version takes the new window; the payloads follow."""
    fresh = Document.objects.select_related("source", "tenant").get(pk=document.pk)
    values = {name: changes[name] for name in validity.FIELDS if name in changes}
    window = (values.get("valid_from", fresh.valid_from), values.get("valid_until", fresh.valid_until))
    validity.check_window(*window)
    target = None
    if changes.get("supersedes"):
        target = validity.resolve_reference(fresh, changes["supersedes"], viewer)
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
        shown = {k: validity.iso_date(v) if isinstance(v, dt.date) else v for k, v in values.items()}
        if "supersedes" in changes:
            shown["supersedes"] = target.document_id if target else None
        record(fresh, Kind.VALIDITY, actor=actor, changed=shown)
        predecessors_resync([fresh.pk], fresh.supersedes_id)  # the new window or link, and the old link
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
