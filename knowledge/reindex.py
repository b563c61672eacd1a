"""Re-embedding a tenant's live documents with the configured embedder (after the embedder changed, or code
indexed before its path was embedded with it). The stored text is embedded again from SQL: no file is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inference import embedders
from knowledge.index import indexer
from knowledge.ingest import prepare
from knowledge.models import Chunk, Document, DocumentVersion, Status
from tenants.models import Tenant


@dataclass(kw_only=True)
class Reindexed:
    stale: int  # versions re-embedded
    live: int  # active versions of the tenant
    identity: embedders.EmbedderIdentity


def stale_versions(*, tenant: Tenant, identity: embedders.EmbedderIdentity) -> tuple[list[DocumentVersion], int]:
    """The tenant's active versions embedded with another embedder (or code without its path), and how many
    active versions there are."""
    versions = list(DocumentVersion.objects.for_tenant(tenant).filter(status=Status.ACTIVE).select_related("document"))
    stale = [
        v
        for v in versions
        if (v.embedding_provider, v.embedding_model, v.embedding_dims)
        != (identity.provider, identity.model, identity.dims)
        or (v.document.mode == "code" and v.indexing_version < prepare.CODE_PATH_INDEXING)
    ]
    return stale, len(versions)


def tenant_reindex(*, tenant: Tenant, progress: Callable[[int, int], None] | None = None) -> Reindexed:
    """Re-embed each stale version, store its points and activate it; `progress(done, total)` after each."""
    embedder = embedders.get_embedder()  # looked up now: tests and callers may swap the embedder
    identity = embedder.identity
    stale, live = stale_versions(tenant=tenant, identity=identity)
    for number, version in enumerate(stale, 1):
        chunks = list(version.chunks.select_related("document", "document_version").order_by("index"))
        vectors = embedder.embed([prepare.stored_embedding_text(c) for c in chunks])
        for chunk, vector in zip(chunks, vectors, strict=True):
            chunk.dense = vector.astype("float32").tobytes()
            chunk.embedding_provider, chunk.embedding_model = identity.provider, identity.model
            chunk.embedding_dims = identity.dims
        Chunk.objects.bulk_update(chunks, ["dense", "embedding_provider", "embedding_model", "embedding_dims"])
        DocumentVersion.objects.filter(pk=version.pk).update(
            embedding_provider=identity.provider,
            embedding_model=identity.model,
            embedding_dims=identity.dims,
            indexing_version=max(version.indexing_version, prepare.CODE_PATH_INDEXING),
        )
        version.refresh_from_db()
        indexer.activate_version(version)
        if progress is not None:
            progress(number, len(stale))
    Document.objects.for_tenant(tenant).filter(status=Status.RETIRED).update(needs_sync=True)
    indexer.drain()
    return Reindexed(stale=len(stale), live=live, identity=identity)
