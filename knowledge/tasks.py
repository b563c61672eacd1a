"""django-q2 entry points. The tenant comes from the job row, never from the caller."""

from __future__ import annotations

import logging
from pathlib import Path

from core.errors import error_reference
from knowledge import jobs, schedules
from knowledge.index.storage import StorageFull
from knowledge.ingest import pipeline, sources
from knowledge.ingest.producer import SourceProblem
from knowledge.jobs import SourceBusy, recover_orphaned_jobs
from knowledge.models import IngestJob, Source
from knowledge.options import IngestOptions
from knowledge.services import source_permissions_enqueue, source_sync_enqueue, upload_files_done

logger = logging.getLogger(__name__)


def ingest_job_task(job_id: int) -> None:
    recover_orphaned_jobs()  # jobs whose worker died (kill -9) are queued again before this one starts
    job = IngestJob.objects.select_related("tenant", "source").filter(pk=job_id).first()  # unscoped: id is ours
    if job is None or job.source is None or job.state != IngestJob.State.QUEUED:
        # Finished (a failed job runs again only when someone queues it: jobs.queue), or delivered twice (the
        # broker's retry) while the first delivery runs it; a running job whose worker died was queued again above.
        return
    params = job.params or {}
    options = IngestOptions.from_params(params)
    try:
        if not sources.is_sync(job):  # an upload: the files it stored
            folder = Path(params["dir"])
            files = [(key, (folder / key).read_bytes()) for key in params.get("files", [])]
            pipeline.ingest_files(source=job.source, files=files, options=options, job=job,
                                  skips=params.get("skips", []), errors=params.get("errors", []))  # fmt: skip
            upload_files_done(job)  # ingested: only failed files are kept, for a retry (a crash above keeps them all)
        elif sources.is_sync(job):
            sources.run_sync(job, options)  # its location checked again here, right before reading
    except (SourceProblem, SourceBusy) as exc:  # a refusal with its reason, not a crash (every kind's: one base)
        jobs.fail(job, str(exc))
        return
    except (jobs.JobCancelled, StorageFull):  # stopped, and the job already says why
        return
    except Exception:  # the text of an exception is for the log, not for the job page: a reference ties them
        reference = error_reference()
        logger.exception("Job %s stopped on an unexpected error (ref %s)", job.public_id, reference)
        jobs.fail(job, "The job stopped on an unexpected error; the details were logged.", reference=reference)
        raise


REINDEX_PART_S = 600.0


def reindex_task(tenant_id: int) -> None:
    """A tenant's re-embedding in the background (knowledge/reindex.py): every core, below the web server; the
    store's owner writes the points."""
    from inference.embedders import become_batch_process
    from knowledge.reindex import queue_reindex, tenant_reindex
    from tenants.models import Tenant

    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return
    become_batch_process()
    # A part at a time, well within the task timeout; the rest is queued again (a version done stays done).
    done = tenant_reindex(tenant=tenant, wait=False, budget_s=REINDEX_PART_S)
    logger.info("Re-embedded %d version(s) of %s for %s", done.stale, tenant.slug, done.identity.collection)
    if done.stale:
        queue_reindex(tenant)


def scheduled_sync_task(source_id: int, operator: bool = False) -> None:
    """A source's scheduled sync (knowledge/schedules.py), queued by the worker's scheduler."""
    source = Source.objects.select_related("tenant").filter(pk=source_id).first()  # unscoped: the id is ours
    if source is not None:
        sync_due(source, operator)


def scheduled_permissions_task(source_id: int) -> None:
    """A source's scheduled permission sync (knowledge/schedules.py): skipped while any sync of the source is queued
    or running (a sync applies the rights too). The quiet runs before it (nothing opened or closed) are pruned to the
    last PERMISSION_JOBS_KEPT: a run every 5 minutes leaves no 288 jobs a day."""
    source = Source.objects.select_related("tenant").filter(pk=source_id).first()  # unscoped: the id is ours
    if source is None or IngestJob.objects.filter(source=source, state__in=schedules.BUSY).exists():
        return
    permission_jobs_prune(source)
    try:
        source_permissions_enqueue(tenant=source.tenant, source=source, trigger="schedule")
    except SourceProblem as exc:
        job = IngestJob.objects.create(
            tenant=source.tenant, source=source, kind=IngestJob.Kind.PERMISSIONS, params={"trigger": "schedule"}
        )
        jobs.fail(job, f"The scheduled permission sync was not run: {exc}")


PERMISSION_JOBS_KEPT = 20


def permission_jobs_prune(source: Source) -> int:
    """Delete the source's finished permission syncs that opened and closed nothing, but the newest
    PERMISSION_JOBS_KEPT; those that changed someone's access are kept. Returns how many went."""
    finished = IngestJob.objects.filter(
        source=source, kind=IngestJob.Kind.PERMISSIONS, state__in=(IngestJob.State.SUCCEEDED, IngestJob.State.FAILED)
    ).order_by("-created_at")
    quiet = []
    for pk, params in finished.values_list("pk", "params"):
        access = (params or {}).get("access") or {}
        if not access.get("opened") and not access.get("closed"):
            quiet.append(pk)
    return IngestJob.objects.filter(pk__in=quiet[PERMISSION_JOBS_KEPT:]).delete()[0]


def sync_due(source: Source, operator: bool) -> IngestJob | None:
    """One scheduled run: the sync's job, or None when a sync of the source is already queued or running (or the
    source is no longer scheduled). A folder no longer allowed fails the run's job with the reason."""
    busy = IngestJob.objects.filter(source=source, state__in=schedules.BUSY).exclude(kind=IngestJob.Kind.PERMISSIONS)
    if source.sync_every_minutes is None or busy.exists():
        return None
    try:
        return source_sync_enqueue(tenant=source.tenant, source=source, operator=operator, trigger="schedule")
    except SourceProblem as exc:
        kind = sources.kind_of(source).job_kind
        job = IngestJob.objects.create(tenant=source.tenant, source=source, kind=kind,
                                       params={"trigger": "schedule", "path": source.path})  # fmt: skip
        jobs.fail(job, f"The scheduled sync was not run: {exc}")
        return job
