from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser

from knowledge.backup import BackupError, clear_embedded_store, restore_files
from knowledge.management.commands._store import StoreCommand
from knowledge.vectorstore import is_shared_server, reset_store
from tenants.models import Tenant


class Command(StoreCommand):
    help = ("Restore a `manage.py backup` folder into this data directory (the server stopped), then rebuild the "
            "vector store from the chunks' stored vectors (no re-embedding).")  # fmt: skip

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder")
        parser.add_argument("--replace", action="store_true", help="overwrite a database that already has tenants")

    def run(self, *args: Any, folder: str, replace: bool, **options: Any) -> None:
        if is_shared_server():
            raise CommandError("With QDRANT_URL set, restore the Qdrant snapshot and the database dump instead "
                               "(docs/production.md).")  # fmt: skip
        try:
            reset_store()
            clear_embedded_store()
            manifest = restore_files(Path(folder), replace=replace)
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        call_command("migrate", verbosity=0)  # a backup from an older release gets this release's schema
        reset_store()
        for tenant in Tenant.objects.order_by("slug"):
            report = io.StringIO()
            call_command("index_check", tenant.slug, repair=True, stdout=report)
            call_command("index_check", tenant.slug, stdout=report)  # fails (CommandError) if any drift is left
            self.stdout.write(report.getvalue().strip())
        counts = manifest["counts"]
        self.stdout.write(f"Restored {counts['tenants']} tenant(s), {counts['documents']} document(s), "
                          f"{counts['chunks']} chunk(s) from {folder}.")  # fmt: skip
