"""Jobs that outlive their process: one sync per source at a time, and recovery of jobs whose worker died.

A job records the process running it (host and pid, in `params["worker"]`), and the source it syncs is
locked by a SourceLock row naming the same holder. A worker killed with SIGKILL runs no cleanup, so
both are checked from outside:

- a lock whose holder is gone is taken over by the next sync of that source;
- `recover_orphaned_jobs()` is called by the web process's indexer loop and by every task before it
  starts. It finds RUNNING jobs whose process is gone and queues them again, once (the sync resumes: what
  was indexed stays, unchanged files are skipped). A job that already had its attempts is marked failed,
  with the reason. On another host, where a pid cannot be checked, a job counts as gone once it has run
  longer than the task timeout.

Documents are never half-indexed: a version and all its chunks are written in one transaction, and a
version becomes visible only once all its points are stored (knowledge/indexer.py).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from knowledge.models import IngestJob, Source, SourceLock

logger = logging.getLogger(__name__)

LOCK_POLL_S = 1.0
MAX_ATTEMPTS = 2  # a job whose worker died is run once more, then marked failed


class SourceBusy(Exception):
    """Another job holds the source for longer than RAG_SOURCE_LOCK_WAIT_S."""


def this_worker() -> dict[str, object]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def holder_alive(host: str, pid: int, since) -> bool:  # type: ignore[no-untyped-def]
    """Whether the process that took a lock or started a job still runs (on this host: asked; elsewhere: by age)."""
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return since is None or timezone.now() - since < timedelta(seconds=settings.Q_CLUSTER["timeout"])


@contextmanager
def source_locked(source: Source, job: IngestJob) -> Iterator[None]:
    """Hold the source for the duration of a sync; wait for another job's sync to end (its message says so)."""
    started = time.monotonic()
    waiting_for: int | None = None
    while True:
        try:
            with transaction.atomic():
                lock = SourceLock.objects.create(tenant=source.tenant, source=source, job=job, **this_worker())
            break
        except IntegrityError:
            held = SourceLock.objects.filter(source=source).select_related("job").first()
            if held is None:
                continue  # released meanwhile
            if held.job_id == job.pk or not holder_alive(held.host, held.pid, held.acquired_at):
                SourceLock.objects.filter(pk=held.pk).delete()  # our own stale lock, or its holder is gone
                continue
            if time.monotonic() - started > settings.RAG_SOURCE_LOCK_WAIT_S:
                raise SourceBusy(f"Another job is syncing this source ({_job_label(held.job)}); this one waited "
                                 f"{settings.RAG_SOURCE_LOCK_WAIT_S} s and was not run. Retry it once that one "
                                 "has finished.") from None  # fmt: skip
            if waiting_for != held.job_id:
                waiting_for = held.job_id
                job.message = f"Waiting for {_job_label(held.job)} to finish syncing this source."
                IngestJob.objects.filter(pk=job.pk).update(message=job.message)
            time.sleep(LOCK_POLL_S)
    try:
        yield
    finally:
        SourceLock.objects.filter(pk=lock.pk).delete()


def report_activity(job: IngestJob | None, text: str) -> None:
    """Say what the running job is doing now (shown while it runs). A row update of that one column, so a
    thread working ahead of the job's own (the sync's lookahead) can report too; best effort: a locked
    database loses a report, never the work."""
    if job is None or job.pk is None:
        return
    try:
        IngestJob.objects.filter(pk=job.pk).update(activity=text[:300])
    except DatabaseError:
        logger.debug("Job %s: activity not recorded (%s)", job.public_id, text, exc_info=True)


def _job_label(job: IngestJob | None) -> str:
    return f"job {job.public_id}" if job is not None else "a command-line sync"


def recover_orphaned_jobs() -> list[IngestJob]:
    """Queue again (or fail, past MAX_ATTEMPTS) every running job whose worker process is gone."""
    recovered = []
    for job in IngestJob.objects.filter(state=IngestJob.State.RUNNING).select_related("source"):
        worker = (job.params or {}).get("worker") or {}
        if not worker or holder_alive(str(worker.get("host")), int(worker.get("pid", 0)), job.started_at):
            continue
        gone = f"process {worker.get('pid')} on {worker.get('host')}"
        if job.params.get("operator"):  # a command-line sync: nobody to hand it to
            retry = False
        else:
            retry = job.attempts < MAX_ATTEMPTS
        rows = IngestJob.objects.filter(pk=job.pk, state=IngestJob.State.RUNNING)
        if retry:
            message = f"The worker running this job stopped ({gone}); queued again to resume where it stopped."
            changed = rows.update(state=IngestJob.State.QUEUED, message=message)
        else:
            message = (f"The worker running this job stopped ({gone}) after {job.attempts} attempt(s). What was "
                       "indexed is kept; retry the job to resume.")  # fmt: skip
            changed = rows.update(state=IngestJob.State.FAILED, message=message, finished_at=timezone.now())
        if not changed:
            continue  # another process recovered it first
        SourceLock.objects.filter(job=job).delete()
        logger.warning("Job %s: %s", job.public_id, message)
        if retry:
            from django_q.tasks import async_task

            transaction.on_commit(lambda pk=job.pk: async_task("knowledge.tasks.ingest_job_task", pk))
        job.refresh_from_db()
        recovered.append(job)
    return recovered
