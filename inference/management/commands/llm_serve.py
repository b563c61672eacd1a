from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from inference.llm import configured_paths
from inference.runtime import Supervisor, runtime_dir


class Command(BaseCommand):
    help = (
        "Run the chat model in its own process: llama.cpp's OpenAI-compatible server on the configured chain "
        "(RAG_LLM_MODEL_PATH, RAG_LLM_FALLBACK_PATHS, then the packaged models), restarted when it dies and "
        "falling back along the chain when a model keeps failing. Runs until stopped (SIGTERM or Ctrl-C)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.RAG_LLM_URL:
            raise CommandError(f"RAG_LLM_URL is set ({settings.RAG_LLM_URL}): answers use that server; "
                               "there is no local model to run.")  # fmt: skip
        chain = configured_paths()
        self.stdout.write(f"Chat model server: chain {', '.join(chain)}; state in {runtime_dir()}")
        Supervisor(chain).run()
