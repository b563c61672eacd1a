"""A source's row: created with its id, name and access checked, by every flow that makes one (the services' create
flow, the operator's CLI and setup, the pipeline's in-process syncs). Below services and the pipeline, so both use
it without importing each other."""

from __future__ import annotations

from pathlib import Path

from knowledge import ids
from knowledge.models import Source
from tenants.models import Tenant
from tenants.principals import principals_check


def source_create(
    *, tenant: Tenant, kind: str, name: str, path: str = "", ref: str = "", access: list[str] | None = None
) -> Source:
    """Create a source (open to the tenant unless `access` says otherwise); raises ids.InvalidIdentifier for a
    name the id scheme cannot hold, UnknownPrincipal for an access list naming what the tenant lacks."""
    source_id = ids.source_id(tenant.slug, kind, name)
    source = Source(
        tenant=tenant,
        kind=kind,
        name=ids.parse_source_id(source_id).source_name,
        label=name.strip(),
        source_id=source_id,
        ref=ref,
        access=principals_check(tenant=tenant, principals=access if access is not None else ["tenant"]),
    )
    source.set_location(path)  # a URL's credential sealed apart (knowledge/sealed.py)
    source.save(force_insert=True)
    return source


def folder_source_get_or_create(*, tenant: Tenant, name: str, path: Path, kind: str = "folder") -> Source:
    """The tenant's folder (or vault) source of this name, reading `path` (the operator's CLI and setup)."""
    source_id = ids.source_id(tenant.slug, kind, name)
    source = Source.objects.for_tenant(tenant).filter(source_id=source_id).first()
    if source is None:
        source = source_create(tenant=tenant, kind=kind, name=name, path=str(path))
    elif source.path != str(path):
        source.path = str(path)
        source.save(update_fields=["path"])
    return source
