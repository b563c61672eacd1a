"""The ingest job's lifecycle, and jobs that outlive their process.

Every change of `IngestJob.state` is made here, by one of the transitions (an import test checks no other
module assigns it):

    queued ──start──▶ running ──indexing──▶ indexing ──finish_if_indexed──▶ succeeded | partial
      ▲                  │ checkpoint (a cancel request) ──▶ cancelled
      └──queue (retry)───┴─fail(reason, reference)──▶ failed

A failed job says why in plain words; an unexpected error says only that it was logged, with the reference
that finds the log line (never the exception's text, which the job page and the jobs API would show).

One sync per source at a time, and recovery of jobs whose worker died:

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
version becomes visible only once all its points are stored (knowledge/index/indexer.py).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from core.processes import process_alive
from knowledge.models import DocumentVersion, IngestJob, Source, SourceLock, Status

logger = logging.getLogger(__name__)

LOCK_POLL_S = 1.0
MAX_MESSAGE_CHARS = 1000  # a job's message (it may quote an error)
MAX_ATTEMPTS = 2  # a job whose worker died is run once more, then marked failed


class JobCancelled(Exception):
    """The job stopped at a checkpoint because a cancel was requested; it already says so."""


COUNTS = ("added", "updated", "unchanged", "retired", "skipped", "failed", "documents_done", "chunks_done",
          "chunks_total")  # fmt: skip


# --- transitions ---------------------------------------------------------------------------------------------
def queue(job: IngestJob) -> None:
    """Queued again on request (a retry): the worker runs it from the start as a new attempt, which its message says;
    incremental sync redoes only what is missing."""
    retry = int((job.params or {}).get("retries", 0)) + 1
    job.cancel_requested, job.state = False, IngestJob.State.QUEUED
    job.params, job.message = {**(job.params or {}), "retries": retry}, f"Retry {retry}, on request: queued."
    job.save(update_fields=["cancel_requested", "state", "params", "message"])


def start(job: IngestJob) -> None:
    """Running in this process: counts start again, the worker is recorded (how a dead one is found)."""
    job.state, job.started_at, job.attempts = IngestJob.State.RUNNING, timezone.now(), job.attempts + 1
    job.params = {**(job.params or {}), "worker": this_worker()}
    for name in COUNTS:
        setattr(job, name, 0)
    job.errors, job.skips, job.finished_at = [], [], None
    # what an earlier attempt ended with is not this one's: a retry says it is one, never the old failure
    retry = int((job.params or {}).get("retries", 0))
    if retry:
        job.message = f"Retry {retry}, on request."
    elif job.attempts <= 1:
        job.message = ""
    # else: a job queued again by recover_orphaned_jobs keeps the message that says so
    job.save()


def checkpoint(job: IngestJob) -> None:
    """Save the progress; a cancel requested meanwhile ends the job here (JobCancelled)."""
    if IngestJob.objects.filter(pk=job.pk, cancel_requested=True).exists():
        job.state, job.finished_at, job.message = IngestJob.State.CANCELLED, timezone.now(), "Cancelled on request."
        job.save()
        raise JobCancelled()
    job.save()


def fail(job: IngestJob, reason: str, *, reference: str = "") -> None:
    """Failed, with a plain reason; `reference` ties it to the log line that has the details."""
    job.state, job.finished_at = IngestJob.State.FAILED, timezone.now()
    reason = reason if len(reason) <= MAX_MESSAGE_CHARS else reason[: MAX_MESSAGE_CHARS - 1] + "…"
    job.message = f"{reason.rstrip('.')} (ref {reference})." if reference else reason
    job.save(update_fields=["state", "finished_at", "message"])


def indexing(job: IngestJob) -> None:
    """Every file was handled: the job waits for the indexer to make its versions visible."""
    job.state = IngestJob.State.INDEXING
    job.save()
    report_activity(job, "")


def finish_if_indexed(job: IngestJob) -> bool:
    """A job waiting for the indexer is done once none of its versions is pending any more."""
    if job.state != IngestJob.State.INDEXING or DocumentVersion.objects.filter(job=job, status=Status.PENDING).exists():
        return False
    job.state = IngestJob.State.PARTIAL if job.failed else IngestJob.State.SUCCEEDED
    job.finished_at = timezone.now()
    job.save(update_fields=["state", "finished_at"])
    return True


class SourceBusy(Exception):
    """Another job holds the source for longer than RAG_SOURCE_LOCK_WAIT_S."""


def this_worker() -> dict[str, object]:
    return {"host": socket.gethostname(), "pid": os.getpid()}


def holder_alive(host: str, pid: int, since) -> bool:
    """Whether the process that took a lock or started a job still runs (on this host: asked; elsewhere: by age)."""
    if host == socket.gethostname():
        return process_alive(pid)
    return since is None or timezone.now() - since < timedelta(seconds=float(settings.Q_CLUSTER["timeout"]))  # type: ignore[arg-type]  # a number of seconds


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
    logger.debug("Job %s: %s", job.public_id, text or "(activity cleared)")
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

            transaction.on_commit(partial(async_task, "knowledge.tasks.ingest_job_task", job.pk))
        job.refresh_from_db()
        recovered.append(job)
    return recovered
