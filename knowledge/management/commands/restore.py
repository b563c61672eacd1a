from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser

from inference.embedders import get_embedder
from knowledge.backup import BackupError, clear_embedded_store, refuse_if_store_owned, restore_files
from knowledge.index.vectorstore import Scope, get_store, is_shared_server, reset_store
from knowledge.management.commands._store import StoreCommand
from tenants.models import Tenant


class Command(StoreCommand):
    help = ("Restore a `manage.py backup` folder into this instance's database (SQLite or PostgreSQL; the server "
            "stopped), then rebuild the vector store from the chunks' stored vectors (no re-embedding).")  # fmt: skip

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder")
        parser.add_argument("--replace", action="store_true", help="overwrite a database that already has tenants")

    def run(self, *args: Any, folder: str, replace: bool, **options: Any) -> None:
        try:
            reset_store()
            if not is_shared_server():
                refuse_if_store_owned()
            # The database first: a restore that fails (pg_restore is one transaction) leaves the store as it was.
            manifest = restore_files(Path(folder), replace=replace)
            if not is_shared_server():
                clear_embedded_store()
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", verbosity=0)  # a backup from an older release gets this release's schema
        reset_store()
        for tenant in Tenant.objects.order_by("slug"):
            if is_shared_server():  # its points may hold another moment's payloads: rebuilt from SQL like the rest
                get_store().delete(get_embedder().identity, Scope(tenant=str(tenant.public_id), statuses=None))
            report = io.StringIO()
            call_command("index_check", tenant.slug, repair=True, stdout=report)
            call_command("index_check", tenant.slug, stdout=report)  # fails (CommandError) if any drift is left
            self.stdout.write(report.getvalue().strip())
        counts = manifest["counts"]
        self.stdout.write(f"Restored {counts['tenants']} tenant(s), {counts['documents']} document(s), "
                          f"{counts['chunks']} chunk(s) from {folder}.")  # fmt: skip
