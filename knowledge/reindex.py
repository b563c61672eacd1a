"""Re-embedding a tenant's documents for the configured index (after the embedder changed, when an upgrade adds the
multilingual leg, or code indexed before its path was embedded with it). The stored text is embedded again from
SQL: no file is read.

Every version a read can serve is re-embedded: the active ones, and the superseded and retired ones an `as_of` read
finds. The vectors, each chunk's language and its lexical vector go to SQL, and the version is marked
`reindex_pending`; the store's owner writes its points into the new index at its next drain (indexer.py), so this
runs anywhere: in the CLI, or in a worker in the background (`reindex --all --background`, what up.sh runs).

An upgrade that only adds the multilingual leg keeps each chunk's stored vector and embeds the multilingual one
alone; until every version is in the new index, reads search the previous one (retrieval.check_index), and the
sources page says so (`upgrade_state`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from core import languages
from inference import embedders
from knowledge.index import indexer
from knowledge.index.lexical import document_vector
from knowledge.ingest import prepare
from knowledge.models import Chunk, Document, DocumentVersion, Status
from tenants.models import Tenant

SERVED = (Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED)  # what a read, now or as of a past day, can find
TASK = "knowledge.tasks.reindex_task"


@dataclass(kw_only=True)
class Reindexed:
    stale: int  # versions re-embedded
    live: int  # versions a read can serve
    identity: embedders.EmbedderIdentity


def _identity(version: DocumentVersion) -> embedders.EmbedderIdentity:
    return embedders.EmbedderIdentity(version.embedding_provider, version.embedding_model, version.embedding_dims or 0)


def _is_stale(version: DocumentVersion, identity: embedders.EmbedderIdentity) -> bool:
    old_code = version.document.mode == "code" and version.indexing_version < prepare.CODE_PATH_INDEXING
    return _identity(version) != identity or old_code


def stale_versions(*, tenant: Tenant, identity: embedders.EmbedderIdentity) -> tuple[list[DocumentVersion], int]:
    """The tenant's served versions embedded with another embedder (or code without its path), and how many served
    versions there are."""
    versions = list(
        DocumentVersion.objects.for_tenant(tenant).filter(status__in=SERVED).select_related("document").order_by("pk")
    )
    return [v for v in versions if _is_stale(v, identity)], len(versions)


def reembed_version(version: DocumentVersion, embedder: embedders.Embedder) -> None:
    """One version's chunks embedded for the configured index, in SQL, marked for the owner to write."""
    identity = embedder.identity
    chunks = list(version.chunks.select_related("document", "document_version").order_by("index"))
    inputs = [prepare.stored_embedding_text(c) for c in chunks]
    kept = _identity(version) == identity.primary and not _is_stale(version, identity.primary)
    if kept and identity.multilingual_dims:  # the upgrade: the embedder's vectors stay, the multilingual leg is added
        added = embedder.embed_multilingual(inputs)  # type: ignore[attr-defined]
        vectors = [np.concatenate([np.frombuffer(bytes(c.dense or b""), dtype=np.float32)[: identity.dims], v])
                   for c, v in zip(chunks, added, strict=True)]  # fmt: skip
    else:
        vectors = list(embedders.embed_for_index(embedder, inputs))
    found = languages.detect_many([f"{c.heading}\n{c.text}" for c in chunks])
    for chunk, vector, language in zip(chunks, vectors, found, strict=True):
        document = chunk.document
        chunk.language = languages.DEFAULT if chunk.mode == "code" else language
        indices, values = document_vector(
            prepare.lexical_text(document.display_key, chunk.document_version.title, chunk.heading, chunk.text),
            chunk.language,
        )
        chunk.sparse = {"i": indices, "v": values}
        chunk.dense = np.asarray(vector, dtype=np.float32).tobytes()
        chunk.embedding_provider, chunk.embedding_model = identity.provider, identity.model
        chunk.embedding_dims = identity.dims
    Chunk.objects.bulk_update(
        chunks, ["dense", "sparse", "language", "embedding_provider", "embedding_model", "embedding_dims"]
    )
    DocumentVersion.objects.filter(pk=version.pk).update(
        embedding_provider=identity.provider,
        embedding_model=identity.model,
        embedding_dims=identity.dims,
        indexing_version=max(version.indexing_version, prepare.CODE_PATH_INDEXING),
        reindex_pending=True,
    )


def tenant_reindex(
    *, tenant: Tenant, progress: Callable[[int, int], None] | None = None, wait: bool = True,
    budget_s: float | None = None,
) -> Reindexed:  # fmt: skip
    """Re-embed each stale version, `progress(done, total)` after each; with `wait`, write them to the store now
    (this process owns it) or wait for its owner to. Resumable: a version done is no longer stale; with `budget_s`,
    it stops after that long (`stale` says how many it did)."""
    embedder = embedders.get_embedder()  # looked up now: tests and callers may swap the embedder
    identity = embedder.identity
    stale, live = stale_versions(tenant=tenant, identity=identity)
    deadline = time.monotonic() + budget_s if budget_s is not None else None
    for number, version in enumerate(stale, 1):
        reembed_version(version, embedder)
        if progress is not None:
            progress(number, len(stale))
        if deadline is not None and time.monotonic() > deadline:
            stale = stale[:number]
            break
    Document.objects.for_tenant(tenant).filter(status=Status.RETIRED).update(needs_sync=True)
    if wait:
        indexer.wait_until_written(tenant)
    return Reindexed(stale=len(stale), live=live, identity=identity)


@dataclass(kw_only=True)
class UpgradeState:
    """What the sources page says while a tenant's index is being rebuilt for the configured embedder."""

    done: int
    total: int
    multilingual: bool  # the upgrade adds the multilingual leg (the previous index serves meanwhile)


def upgrade_state(tenant: Tenant) -> UpgradeState | None:
    """None when the tenant's index is the configured one; else how far its re-embedding is."""
    identity = embedders.get_embedder().identity
    served = DocumentVersion.objects.for_tenant(tenant).filter(status__in=SERVED)
    total = served.count()
    current = served.filter(embedding_provider=identity.provider, embedding_model=identity.model,
                            embedding_dims=identity.dims)  # fmt: skip
    done = current.filter(reindex_pending=False).count()
    if done == total:
        return None
    return UpgradeState(done=done, total=total, multilingual=bool(identity.multilingual_dims))


def queue_reindex(tenant: Tenant) -> int:
    """Have a worker re-embed this tenant in the background; how many versions it will (0: nothing queued). A run
    that finds the work done by another does nothing: a version done is no longer stale."""
    from django_q.tasks import async_task

    stale, _ = stale_versions(tenant=tenant, identity=embedders.get_embedder().identity)
    if stale:
        async_task(TASK, tenant.pk, task_name=f"reindex-{tenant.public_id}")
    return len(stale)
