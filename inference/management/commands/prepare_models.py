from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from inference.packaged import PACKAGED_CHAT_CHAIN, prepare_packaged_models
from inference.runtime import runtime_self_test


class Command(BaseCommand):
    help = (
        "Make the packaged models ready to load (assembles the chat GGUFs once; downloads nothing), then ask the "
        "smallest one for one token in a child process: a llama.cpp build that crashes on this CPU says so here."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--strict", action="store_true", help="exit non-zero when the self-test fails")
        parser.add_argument("--no-self-test", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        for model in prepare_packaged_models():
            self.stdout.write(f"{model.name}: {model.path} ({model.size / 1e6:.1f} MB)")
        if options["no_self_test"]:
            return
        result = runtime_self_test(str(PACKAGED_CHAT_CHAIN[-1].target()))
        if result.ok:
            self.stdout.write(f"llama.cpp self-test: one token in {result.seconds:.1f} s ({result.system_info})")
            return
        message = f"llama.cpp self-test FAILED: {result.detail}"
        if options["strict"]:
            raise CommandError(message)
        self.stderr.write(message + "\nRetrieval and extractive answers still work; generated answers will not.")
