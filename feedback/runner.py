"""Who runs an evaluation: the process that can search. With the embedded Qdrant Edge store that is the web
worker, which owns it (ragsite/gunicorn_conf.py starts this runner beside the indexer, for the same reason);
with QDRANT_URL every web worker runs one, and a run is claimed by exactly one. The page and the CLI only queue
a run (an EvalRun row); nothing is lost if no runner is up: the run waits, queued, and the page says so.
The same thread compares the versions that landed with the current documents (feedback/conflicts.py)."""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections

from feedback import runs
from feedback.conflicts import scan_pending
from feedback.evaluation import evaluation_run
from feedback.models import EvalRun

logger = logging.getLogger(__name__)

_thread: threading.Thread | None = None


claim = runs.claim


def run_queued(*, limit: int | None = None) -> int:
    """Run the queued evaluation runs, oldest first; returns how many this process ran."""
    done = 0
    while limit is None or done < limit:
        run = EvalRun.objects.select_related("tenant").filter(state=EvalRun.State.QUEUED).order_by("pk").first()
        if run is None or not claim(run):
            return done
        evaluation_run(run)
        done += 1
    return done


def start_runner(*, interval: float = 2.0) -> None:
    """Run queued evaluations in a daemon thread of this (store-owning) process, every `interval` seconds."""
    global _thread
    if _thread is not None:
        return

    def loop() -> None:
        while True:
            try:
                close_old_connections()
                runs.fail_silent()  # a run whose runner died (another process, a restart) is failed, not left running
                run_queued()
                if settings.RAG_CONFLICT_CHECK:  # versions that landed, compared with the current documents
                    scan_pending()
            except Exception:  # keep the runner alive; the failure is logged and the next pass goes on
                logger.exception("Evaluation runner pass failed")
            time.sleep(interval)

    _thread = threading.Thread(target=loop, name="ragsite-evaluations", daemon=True)
    _thread.start()


def wait_for(run: EvalRun, *, timeout: float, poll: float = 2.0) -> EvalRun:
    """Wait for another process's runner to finish this run (the CLI, when the web server owns the store)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in (EvalRun.State.DONE, EvalRun.State.FAILED):
            return run
        time.sleep(poll)
    return run
