"""Flows that create or change sources, documents and chunks."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from knowledge import ids
from knowledge.models import Chunk, Document, DocumentVersion, Source, Status, Tag
from tenants.models import Tenant


def source_create(*, tenant: Tenant, kind: str, name: str, path: str = "", ref: str = "") -> Source:
    """Create a source; raises ids.InvalidIdentifier for a name the id scheme cannot hold."""
    source_id = ids.source_id(tenant.slug, kind, name)
    return Source.objects.create(
        tenant=tenant,
        kind=kind,
        name=ids.parse_source_id(source_id).source_name,
        label=name.strip(),
        source_id=source_id,
        path=path,
        ref=ref,
    )


def source_default_get(*, tenant: Tenant) -> Source:
    """The tenant's logical source for loose uploads, created on first use."""
    source_id = ids.source_id(tenant.slug, ids.DEFAULT_SOURCE_KIND, ids.DEFAULT_SOURCE_NAME)
    source, _ = Source.objects.get_or_create(
        tenant=tenant,
        source_id=source_id,
        defaults={
            "kind": ids.DEFAULT_SOURCE_KIND,
            "name": ids.DEFAULT_SOURCE_NAME,
            "label": "Loose uploads",
            "is_default": True,
        },
    )
    return source


def tag_get_or_create(*, tenant: Tenant, name: str) -> Tag:
    normalised = Tag.normalise(name)
    if not normalised:
        raise ValueError("A tag needs a name.")
    tag, _ = Tag.objects.get_or_create(tenant=tenant, name=normalised)
    return tag


def _check_same_tenant(tenant: Tenant, rows: Iterable[Document | Chunk]) -> None:
    if any(row.tenant_id != tenant.pk for row in rows):
        raise PermissionError("Rows of another tenant cannot be changed here.")


def documents_set_critical(*, tenant: Tenant, documents: QuerySet[Document], critical: bool) -> int:
    return documents.for_tenant(tenant).update(critical=critical, updated_at=timezone.now())


def chunks_set_critical(*, tenant: Tenant, chunks: QuerySet[Chunk], critical: bool) -> int:
    return chunks.for_tenant(tenant).update(critical=critical)


def _tag_through(model: type[Document] | type[Chunk]) -> type:
    return model.tags.through


def rows_add_tag(*, tenant: Tenant, rows: QuerySet[Document] | QuerySet[Chunk], tag_name: str) -> int:
    """Tag every row of this tenant in rows; returns how many rows it touched."""
    tag = tag_get_or_create(tenant=tenant, name=tag_name)
    scoped = list(rows.for_tenant(tenant))
    with transaction.atomic():
        for row in scoped:
            row.tags.add(tag)
    return len(scoped)


def rows_remove_tag(*, tenant: Tenant, rows: QuerySet[Document] | QuerySet[Chunk], tag_name: str) -> int:
    tag = Tag.objects.for_tenant(tenant).filter(name=Tag.normalise(tag_name)).first()
    if tag is None:
        return 0
    scoped = list(rows.for_tenant(tenant).filter(tags=tag))
    with transaction.atomic():
        for row in scoped:
            row.tags.remove(tag)
    return len(scoped)


def documents_retire(*, tenant: Tenant, documents: QuerySet[Document]) -> int:
    """Retire documents: readers stop seeing them; their versions stay as history."""
    now = timezone.now()
    scoped = documents.for_tenant(tenant).exclude(status=Status.RETIRED)
    with transaction.atomic():
        pks = list(scoped.values_list("pk", flat=True))
        DocumentVersion.objects.filter(document_id__in=pks, status=Status.ACTIVE).update(
            status=Status.RETIRED, status_changed_at=now
        )
        Chunk.objects.filter(document_id__in=pks, status=Status.ACTIVE).update(status=Status.RETIRED)
        Document.objects.filter(pk__in=pks).update(status=Status.RETIRED, updated_at=now)
    return len(pks)
