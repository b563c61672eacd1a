"""The write side of document access: enforcing a document's list after it changed, in SQL at once and in the
vector payloads through the indexer. Who may read a document is models.enforced_access (its own or its source's
list, made stricter by the notes whose text it carries); who a request reads as is tenants/principals.py."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q

from knowledge.models import (
    Document,
    DocumentVersion,
    Status,
    VersionCarry,
    carried_lists,
    enforced_access,
    readers_text,
    stricter_access,
    strictest,
    version_carried_lists,
)

INLINE_ACCESS_DOCUMENTS = 200  # a larger change is left to the background indexer; the sources page shows progress


def access_enforce(documents: Iterable[Document]) -> int:
    """These documents' enforced access may have changed (models.enforced_access: their own or their source's list,
    made stricter by what their text carries): enforce the stricter of old and new in SQL at once and leave the
    vector payloads to the indexer (sync_access), which then enforces the new list alone. A small change is applied
    as the request commits; a large one by the store owner's indexer thread, in the background."""
    from knowledge.index import indexer

    changed = 0
    documents = list(documents)
    carried = carried_lists(d.pk for d in documents)
    versions = versions_carrying(d.pk for d in documents)
    version_lists = version_carried_lists(v.pk for vs in versions.values() for v in vs)
    for document in documents:
        target = sorted(set(enforced_access(document, carried)))
        narrowed = False
        for version in versions.get(document.pk, []):  # an earlier version may carry text the note no longer shows
            version_target = version_list(version, version_lists)
            if version_target != sorted(set(version.reader_list)):
                enforced = stricter_access(version.reader_list, version_target)
                DocumentVersion.objects.filter(pk=version.pk).update(readers=readers_text(enforced))
                narrowed = True
        if target == sorted(set(document.reader_list)) and not document.access_pending and not narrowed:
            continue
        enforced = stricter_access(document.reader_list, target)
        Document.objects.filter(pk=document.pk).update(readers=readers_text(enforced), access_pending=True)
        changed += 1
    if 0 < changed <= INLINE_ACCESS_DOCUMENTS:
        transaction.on_commit(indexer.drain)
    return changed


def versions_carrying(document_pks: Iterable[int]) -> dict[int, list[DocumentVersion]]:
    """The versions of these documents that carry another note's text, or did until a change (a list of their own)."""
    found: dict[int, list[DocumentVersion]] = {}
    rows = DocumentVersion.objects.filter(document_id__in=list(document_pks)).exclude(status=Status.FAILED)
    rows = rows.filter(Q(carries__isnull=False) | ~Q(readers=" tenant ")).distinct().order_by("pk")
    for version in rows:
        found.setdefault(version.document_id, []).append(version)
    return found


def version_list(version: DocumentVersion, lists: dict[int, list[list[str]]] | None = None) -> list[str]:
    """The list a version's own text calls for: the strictest of the notes it carries (["tenant"]: none)."""
    carried = (lists if lists is not None else version_carried_lists([version.pk])).get(version.pk, [])
    return sorted(set(strictest(carried))) if carried else ["tenant"]


def carries_record(version: DocumentVersion, note_pks: Iterable[int]) -> None:
    """This version carries these notes' text (a vault note rendered with their embeds): kept for the version's life."""
    VersionCarry.objects.bulk_create(
        [VersionCarry(tenant_id=version.tenant_id, version=version, note_id=pk) for pk in set(note_pks)],
        ignore_conflicts=True,
    )
