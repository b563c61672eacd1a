from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge.backup import BackupError, backup


class Command(BaseCommand):
    help = ("Back up the database (a SQLite snapshot, or pg_dump on PostgreSQL) and the queued uploads into a new "
            "folder; safe while the server runs. The vector store is rebuilt from SQL on restore.")  # fmt: skip

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder")

    def handle(self, *args: Any, folder: str, **options: Any) -> None:
        try:
            manifest = backup(Path(folder))
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        counts = manifest["counts"]
        self.stdout.write(f"Backed up {counts['tenants']} tenant(s), {counts['documents']} document(s), "
                          f"{counts['chunks']} chunk(s) to {folder}.")  # fmt: skip
