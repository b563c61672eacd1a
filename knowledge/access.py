"""The write side of document access: enforcing a document's list after it changed, in SQL at once and in the
vector payloads through the indexer. Who may read a document is models.enforced_access (its own or its source's
list, made stricter by the notes whose text it carries); who a request reads as is tenants/principals.py."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.dispatch import Signal

from knowledge.models import (
    Document,
    DocumentVersion,
    Source,
    carried_lists,
    enforced_access,
    readers_text,
    stricter_access,
    version_carried_lists,
    version_list,
    versions_carrying,
)

# Sent once the readers of some documents changed (`changed`: how many): what was given from them may need recalling.
readers_changed = Signal()

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
    if changed:
        readers_changed.send(sender=Document, changed=changed)
    return changed


@dataclass(frozen=True)
class AccessChange:
    """One document whose readers changed: the principals its list gained and lost."""

    key: str
    opened: tuple[str, ...]
    closed: tuple[str, ...]


def documents_access_set(source: Source, lists: dict[str, list[str]]) -> list[AccessChange]:
    """The source's documents (by document key) given their own access lists, as their system says now (a wiki's
    page rights): each list that differs is stored and enforced like any access change (access_enforce: the stricter
    of old and new in SQL at once, the payloads by the indexer), never re-embedded. Returns what opened and closed."""
    changed: list[Document] = []
    changes: list[AccessChange] = []
    for document in Document.objects.filter(source=source, document_key__in=list(lists)).select_related("source"):
        new = sorted(set(lists[document.document_key]))
        if document.access is not None and sorted(set(document.access)) == new:
            continue
        old = set(document.effective_access)
        Document.objects.filter(pk=document.pk).update(access=new)
        document.access = new
        changed.append(document)
        if set(new) != old:
            opened, closed = tuple(sorted(set(new) - old)), tuple(sorted(old - set(new)))
            changes.append(AccessChange(document.document_key, opened, closed))
    access_enforce(changed)
    return changes
