from __future__ import annotations

from typing import Any, cast

from django.core.management.base import CommandError, CommandParser

from inference.embedders import EmbedderIdentity
from knowledge.index import indexer
from knowledge.index.vectorstore import Scope, get_store
from knowledge.management.commands._store import StoreCommand
from knowledge.models import Chunk, DocumentVersion, Status
from tenants.models import Tenant


class Command(StoreCommand):
    help = "Check that SQL chunks and vector store points agree for a tenant; --repair fixes any drift."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("--repair", action="store_true")

    def run(self, *args: Any, tenant: str, repair: bool, **options: Any) -> None:
        owner = Tenant.objects.filter(slug=tenant).first()
        if owner is None:
            raise CommandError(f"No tenant with slug {tenant!r}.")
        store = get_store()
        live = [Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED]
        chunks = Chunk.objects.for_tenant(owner).filter(document_version__status__in=live)
        identities = {
            EmbedderIdentity(p, m, cast(int, d))  # every chunk with an embedder has its dimensions
            for p, m, d in chunks.values_list("embedding_provider", "embedding_model", "embedding_dims").distinct()
        }
        missing: set[str] = set()
        extra: set[str] = set()
        for identity in identities:
            expected = set(
                chunks.filter(embedding_provider=identity.provider, embedding_model=identity.model).values_list(
                    "point_id", flat=True
                )
            )
            stored = store.ids(identity, Scope(tenant=str(owner.public_id), statuses=None))
            missing |= expected - stored
            extra |= stored - expected
            if repair and extra:
                store.delete(
                    identity,
                    Scope(tenant=str(owner.public_id), statuses=None, point_ids=sorted(stored - expected)),
                )
        pending = DocumentVersion.objects.for_tenant(owner).filter(status=Status.PENDING).count()
        self.stdout.write(
            f"{owner.slug}: {chunks.count()} chunks in SQL; {len(missing)} missing from the vector store, "
            f"{len(extra)} points without a chunk, {pending} version(s) waiting to be indexed."
        )
        if repair and missing:
            versions = DocumentVersion.objects.for_tenant(owner).filter(chunks__point_id__in=missing, status__in=live)
            # In the order they were first indexed, so that exact ties rank as they did before (a restore).
            for version in versions.distinct().order_by("pk"):
                document = indexer.store_version_points(version)  # each point with its chunk's status from SQL
                indexer.sync_document(document)
            if hasattr(store, "flush"):
                store.flush()
            self.stdout.write(f"Repaired: re-stored {len(missing)} point(s) from SQL (no re-embedding).")
        if repair:
            indexer.drain()
        if (missing or extra) and not repair:
            raise CommandError("Drift found; run again with --repair.")
