"""question → hybrid search (dense + lexical, fused by RRF in Qdrant) → chunks of the caller's tenant."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.embedders import get_embedder
from knowledge.lexical import query_vector
from knowledge.models import Chunk, Status
from knowledge.vectorstore import Scope, get_store
from tenants.models import Tenant


class IndexMismatch(Exception):
    """The tenant's vectors come from another embedder than the configured one: a reindex is needed."""


@dataclass
class RetrievedChunk:
    chunk: Chunk
    score: float


def check_index(tenant: Tenant) -> None:
    identity = get_embedder().identity
    other = (
        Chunk.objects.for_tenant(tenant)
        .filter(status=Status.ACTIVE)
        .exclude(embedding_provider=identity.provider, embedding_model=identity.model, embedding_dims=identity.dims)
        .values_list("embedding_provider", "embedding_model", "embedding_dims")
        .first()
    )
    if other:
        raise IndexMismatch(
            f"The index of tenant {tenant.slug} was built with {other[0]}/{other[1]} ({other[2]}-d) but the "
            f"configured embedder is {identity.provider}/{identity.model} ({identity.dims}-d). "
            f"Run: manage.py reindex {tenant.slug}"
        )


def retrieve(*, tenant: Tenant, query: str, limit: int = 8, scope: Scope | None = None) -> list[RetrievedChunk]:
    check_index(tenant)
    embedder = get_embedder()
    scope = scope or Scope(tenant=str(tenant.public_id))
    scope.tenant = str(tenant.public_id)  # the tenant always comes from the caller, never from the scope
    hits = get_store().search(
        embedder.identity,
        scope,
        dense=embedder.embed([query])[0].tolist(),
        sparse=query_vector(query),
        limit=limit,
    )
    chunks = {
        c.point_id: c
        for c in Chunk.objects.for_tenant(tenant).filter(point_id__in=[h.id for h in hits]).select_related("document")
    }
    return [RetrievedChunk(chunks[h.id], h.score) for h in hits if h.id in chunks]
