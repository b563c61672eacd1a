"""gunicorn settings for the embedded mode: a web worker owns the embedded vector store.

With the embedded Qdrant Edge store exactly one process may open it. The first web worker takes it at
start-up (so the CLI and the django-q2 workers always defer to it), runs the indexer thread that applies
what those processes wrote to SQL, and serves the searches of the other web workers (RAG_WEB_WORKERS).
With QDRANT_URL set, every worker reaches the server itself.
"""

from __future__ import annotations

import os

from core.env import env_int

bind = f"127.0.0.1:{env_int('PORT', default=8000, minimum=1)}"
# The embedded store has a single owner, the first worker to start; other workers read through it (its searches
# cross a local socket: knowledge/index/shared.py). With QDRANT_URL every worker reaches the server itself. One a
# core by default: a process's Python runs under one GIL (bench/retrieve.py: 105 requests/s at concurrency 8 on 2
# cores with two workers, 47 with one), and the throttle counters are shared between them (tenants/counters.py).
workers = env_int("RAG_WEB_WORKERS", default=len(os.sched_getaffinity(0)) or 1, minimum=1)
threads = env_int("RAG_WEB_THREADS", default=8, minimum=1)
timeout = 300
# On SIGTERM, requests in flight (an answer streaming) get this long to end; `up.sh` stops within 10 s.
graceful_timeout = env_int("RAG_GRACEFUL_TIMEOUT_S", default=5, minimum=0)
accesslog = "-"
errorlog = "-"


def post_worker_init(worker) -> None:
    """This worker's duties besides requests, as ragsite/owner.py declares them (Django is set up by now)."""
    from ragsite import owner

    worker.log.info("Worker duties: %s", ", ".join(owner.start()) or "requests only")
