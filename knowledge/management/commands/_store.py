"""Base for maintenance commands that must open the vector store themselves."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from knowledge.index.vectorstore import StoreBusy


class StoreCommand(BaseCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self.run(*args, **options)
        except StoreBusy as exc:
            raise CommandError(
                f"{exc} Stop the web server first (it owns the embedded store), or run with QDRANT_URL."
            ) from exc

    def run(self, *args: Any, **options: Any) -> None:
        raise NotImplementedError
