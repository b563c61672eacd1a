from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from inference import embedders
from inference.embedders import become_batch_process
from knowledge.management.commands._store import StoreCommand
from knowledge.reindex import stale_versions, tenant_reindex
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
        found = Tenant.objects.filter(slug=tenant).first() if tenant else None
        if found is None:
            raise CommandError(f"No tenant with slug {tenant!r}." if tenant else "Name a tenant, or pass --all.")
        self.reindex(found)

    def reindex(self, owner: Tenant) -> None:
        identity = embedders.get_embedder().identity
        stale, live = stale_versions(tenant=owner, identity=identity)
        self.stdout.write(
            f"{owner.slug}: {len(stale)} of {live} active version(s) need "
            f"{identity.provider}/{identity.model} (or code embedded with its path)."
        )
        done = tenant_reindex(tenant=owner, progress=self._progress)
        self.stdout.write(f"\nReindexed {done.stale} document(s) for {owner.slug} with {done.identity.collection}.")

    def _progress(self, done: int, total: int) -> None:
        sys.stderr.write(f"\r{done}/{total} documents re-embedded")
