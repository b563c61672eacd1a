from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from knowledge import embedders, indexer, pipeline
from knowledge.embedders import become_batch_process
from knowledge.management.commands._store import StoreCommand
from knowledge.models import Chunk, Document, DocumentVersion, Status
from tenants.models import Tenant


class Command(StoreCommand):
    help = "Re-embed a tenant's live documents with the configured embedder (after changing it), visibly."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", nargs="?", help="tenant slug (or --all)")
        parser.add_argument("--all", action="store_true", help="every tenant whose index needs it (up.sh runs this)")

    def run(self, *args: Any, tenant: str | None, all: bool, **options: Any) -> None:  # noqa: A002
        become_batch_process()  # every core for embedding, below the web server's priority
        if all:
            for owner in Tenant.objects.order_by("slug"):
                self.reindex(owner)
            return
        owner = Tenant.objects.filter(slug=tenant).first() if tenant else None
        if owner is None:
            raise CommandError(f"No tenant with slug {tenant!r}." if tenant else "Name a tenant, or pass --all.")
        self.reindex(owner)

    def reindex(self, owner: Tenant) -> None:
        embedder = embedders.get_embedder()  # looked up now: tests and callers may swap the embedder
        identity = embedder.identity
        versions = list(
            DocumentVersion.objects.for_tenant(owner).filter(status=Status.ACTIVE).select_related("document")
        )
        stale = [
            v
            for v in versions
            if (v.embedding_provider, v.embedding_model, v.embedding_dims)
            != (identity.provider, identity.model, identity.dims)
            or (v.document.mode == "code" and v.indexing_version < pipeline.CODE_PATH_INDEXING)
        ]
        self.stdout.write(
            f"{owner.slug}: {len(stale)} of {len(versions)} active version(s) need "
            f"{identity.provider}/{identity.model} (or code embedded with its path)."
        )
        for number, version in enumerate(stale, 1):
            chunks = list(version.chunks.select_related("document", "document_version").order_by("index"))
            vectors = embedder.embed([pipeline.stored_embedding_text(c) for c in chunks])
            for chunk, vector in zip(chunks, vectors, strict=True):
                chunk.dense = vector.astype("float32").tobytes()
                chunk.embedding_provider, chunk.embedding_model, chunk.embedding_dims = (
                    identity.provider,
                    identity.model,
                    identity.dims,
                )
            Chunk.objects.bulk_update(chunks, ["dense", "embedding_provider", "embedding_model", "embedding_dims"])
            DocumentVersion.objects.filter(pk=version.pk).update(
                embedding_provider=identity.provider,
                embedding_model=identity.model,
                embedding_dims=identity.dims,
                indexing_version=max(version.indexing_version, pipeline.CODE_PATH_INDEXING),
            )
            version.refresh_from_db()
            indexer.activate_version(version)
            sys.stderr.write(f"\r{number}/{len(stale)} documents re-embedded")
        Document.objects.for_tenant(owner).filter(status=Status.RETIRED).update(needs_sync=True)
        indexer.drain()
        self.stdout.write(f"\nReindexed {len(stale)} document(s) for {owner.slug} with {identity.collection}.")
