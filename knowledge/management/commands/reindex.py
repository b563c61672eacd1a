from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from inference import embedders
from inference.embedders import become_batch_process
from knowledge.management.commands._store import StoreCommand
from knowledge.reindex import queue_reindex, stale_versions, tenant_reindex
from tenants.models import Tenant


class Command(StoreCommand):
    help = "Re-embed a tenant's live documents with the configured embedder (after changing it), visibly."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", nargs="?", help="tenant slug (or --all)")
        parser.add_argument("--all", action="store_true", help="every tenant whose index needs it (up.sh runs this)")
        parser.add_argument("--background", action="store_true",
                            help="queue the work for the background worker and return at once; reads use the "
                            "previous index until it is done (an upgrade that adds the multilingual leg)")  # fmt: skip

    def run(self, *args: Any, tenant: str | None, all: bool, background: bool, **options: Any) -> None:  # noqa: A002
        found = Tenant.objects.filter(slug=tenant).first() if tenant else None
        if not all and found is None:
            raise CommandError(f"No tenant with slug {tenant!r}." if tenant else "Name a tenant, or pass --all.")
        owners = list(Tenant.objects.order_by("slug")) if all or found is None else [found]
        if background:
            for owner in owners:
                queued = queue_reindex(owner)
                self.stdout.write(f"{owner.slug}: {queued} version(s) queued for re-embedding in the background."
                                  if queued else f"{owner.slug}: the index is up to date.")  # fmt: skip
            return
        become_batch_process()  # every core for embedding, below the web server's priority
        for owner in owners:
            self.reindex(owner)

    def reindex(self, owner: Tenant) -> None:
        identity = embedders.get_embedder().identity
        stale, live = stale_versions(tenant=owner, identity=identity)
        self.stdout.write(
            f"{owner.slug}: {len(stale)} of {live} version(s) need "
            f"{identity.provider}/{identity.model} (or code embedded with its path)."
        )
        done = tenant_reindex(tenant=owner, progress=self._progress)
        self.stdout.write(f"\nReindexed {done.stale} document(s) for {owner.slug} with {done.identity.collection}.")

    def _progress(self, done: int, total: int) -> None:
        sys.stderr.write(f"\r{done}/{total} documents re-embedded")
