"""gunicorn settings for the embedded mode: a web worker owns the embedded vector store.

With the embedded Qdrant Edge store exactly one process may open it. The first web worker takes it at
start-up (so the CLI and the django-q2 workers always defer to it), runs the indexer thread that applies
what those processes wrote to SQL, and serves the searches of the other web workers (RAG_WEB_WORKERS).
With QDRANT_URL set, every worker reaches the server itself.
"""

from __future__ import annotations

import os

bind = f"127.0.0.1:{os.environ.get('PORT', '8000')}"
# The embedded store has a single owner, the first worker to start; other workers read through it (its searches
# cross a local socket: knowledge/index/shared.py). With QDRANT_URL every worker reaches the server itself.
workers = int(os.environ.get("RAG_WEB_WORKERS", "1"))
threads = int(os.environ.get("RAG_WEB_THREADS", "8"))
timeout = 300
# On SIGTERM, requests in flight (an answer streaming) get this long to end; `up.sh` stops within 10 s.
graceful_timeout = int(os.environ.get("RAG_GRACEFUL_TIMEOUT_S", "5"))
accesslog = "-"
errorlog = "-"


def post_worker_init(worker) -> None:
    from feedback.runner import start_runner
    from knowledge.index.indexer import take_store_ownership

    if take_store_ownership(share=True):  # the owner also runs the evaluation runs queued by the page
        start_runner()
    if os.environ.get("RAG_LLM_PRELOAD", "true").lower() not in ("0", "false", "no", "off"):
        import threading

        from chat.services import preload_chat_model

        # Have the model server (its own process) evaluate the fixed system prefix once it is up, not during
        # the first question. Nothing here loads a model: a crash in native code must never take this worker.
        threading.Thread(target=preload_chat_model, name="chat-model-preload", daemon=True).start()
