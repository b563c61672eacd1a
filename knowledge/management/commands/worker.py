"""The background worker: django-q2's cluster, with a stop that ends within RAG_WORKER_STOP_S.

django-q2's `qcluster` leaves its sentinel process on the default SIGTERM action. A SIGTERM sent to the whole
process group (what a service manager or `up.sh` sends) kills the sentinel while it waits on the cluster's stop
event; the main process then blocks for ever on that event, until SIGKILL. Here the sentinel and its workers run in
a process group of their own, so only this process receives the signal, and it stops them django-q2's own way:
the stop event, the pusher first, then each worker after its current task. A task still running at the deadline is
stopped with its worker, and its ingestion job is queued again (knowledge.jobs.recover_orphaned_jobs: it resumes
where it stopped, as after a crash). If this process dies, the sentinel's group notices and ends itself.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django_q.cluster import Cluster, Sentinel, get_mp_context

logger = logging.getLogger(__name__)


def _sentinel_in_its_own_group(*args: Any) -> None:
    """The sentinel's process: a group of its own (its workers are forked into it), which ends when its parent,
    the worker command, is gone."""
    os.setpgid(0, 0)
    parent = os.getppid()

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    Sentinel(*args)


class StoppableCluster(Cluster):
    def __init__(self) -> None:
        super().__init__()
        self.stop_requested = threading.Event()
        signal.signal(signal.SIGTERM, self.request_stop)  # django-q2's handler would stop inside the handler
        signal.signal(signal.SIGINT, self.request_stop)

    def request_stop(self, signum: int, frame: object) -> None:
        self.stop_requested.set()

    def start(self) -> int:
        self.stop_event, self.start_event = get_mp_context().Event(), get_mp_context().Event()
        self.sentinel = get_mp_context().Process(
            target=_sentinel_in_its_own_group, name="sentinel",
            args=(self.stop_event, self.start_event, self.cluster_id, self.broker, self.timeout),
        )  # fmt: skip
        self.sentinel.start()
        logger.info("Worker %s starting (pid %s).", self.name, self.pid)
        while not self.start_event.is_set() and self.sentinel.is_alive() and not self.stop_requested.is_set():
            time.sleep(0.1)
        return self.pid

    def stop_within(self, seconds: float) -> bool:
        """Stop the cluster; True when it stopped by itself, False when its group had to be killed at the deadline."""
        if self.sentinel is None or not self.sentinel.is_alive():
            return True
        logger.info("Worker %s stopping (at most %s s).", self.name, seconds)
        self.stop_event.set()
        self.sentinel.join(seconds)
        if not self.sentinel.is_alive():
            return True
        try:
            os.killpg(self.sentinel.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.sentinel.join(5)
        return False


class Command(BaseCommand):
    help = "Run the background worker (django-q2); SIGTERM or Ctrl-C stops it within RAG_WORKER_STOP_S seconds."

    def handle(self, *args: Any, **options: Any) -> None:
        settings.SECRET_KEY  # noqa: B018  (django-q2 signs tasks with it: fail now, not at the first task)
        cluster = StoppableCluster()
        cluster.start()
        while not cluster.stop_requested.wait(0.5):
            if not cluster.sentinel.is_alive():
                raise SystemExit(f"The worker's sentinel exited with code {cluster.sentinel.exitcode}.")
        if cluster.stop_within(settings.RAG_WORKER_STOP_S):
            self.stdout.write("The worker stopped.")
            return
        from knowledge.jobs import recover_orphaned_jobs

        recovered = recover_orphaned_jobs()  # their worker is gone now: queued again, to resume where they stopped
        self.stdout.write(f"The worker stopped at the {settings.RAG_WORKER_STOP_S} s deadline; "
                          f"{len(recovered)} running job(s) queued again.")  # fmt: skip
