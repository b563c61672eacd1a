"""What a web worker runs besides its requests, declared in one place (ragsite/gunicorn_conf.py calls `start`).

The process that owns the vector store (the first web worker with the embedded Qdrant Edge store; every web worker
with QDRANT_URL, each duty's work being claimed once):
- opens the store and holds its lock; serves the other web workers' searches over a local socket
  (knowledge/index/shared.py);
- runs the indexer thread (knowledge/index/indexer.py): pending versions to the store, curation payloads, access
  changes, the store's optimization when quiet, jobs whose worker died queued again;
- runs the evaluation runner (feedback/runner.py): queued evaluation runs, runs whose runner died failed, the
  contradiction scan of versions that landed.
Every web worker, owner or not, has the chat model's server (its own process) evaluate the fixed system prompt once
it is up (RAG_LLM_PRELOAD). A request never does any of this for other requests: a curation click pushes its own
documents' payloads only (knowledge.services._flag_for_sync)."""

from __future__ import annotations

import threading

from django.conf import settings

from chat.services import preload_chat_model
from feedback.runner import start_runner
from knowledge.index.indexer import take_store_ownership


def start() -> list[str]:
    """Start this worker's duties; returns their names (for the log)."""
    started = []
    if take_store_ownership(share=True):
        started += ["vector store and its socket", "indexer"]
        start_runner()
        started.append("evaluation runner")
    if settings.RAG_LLM_PRELOAD:
        # The model server (its own process) evaluates the fixed system prefix once it is up, not during the first
        # question. Nothing here loads a model: a crash in native code must never take this worker.
        threading.Thread(target=preload_chat_model, name="chat-model-preload", daemon=True).start()
        started.append("chat model preload")
    return started
