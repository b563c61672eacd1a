"""django-q2 entry points. The tenant comes from the job row, never from the caller."""

from __future__ import annotations

from pathlib import Path

from knowledge import pipeline
from knowledge.enrichment import EnrichmentRequest
from knowledge.jobs import SourceBusy, holder_alive, recover_orphaned_jobs
from knowledge.models import IngestJob
from knowledge.services import FolderNotAllowed, job_folder, upload_files_remove
from knowledge.storage import StorageFull


def ingest_job_task(job_id: int) -> None:
    recover_orphaned_jobs()  # jobs whose worker died (kill -9) are queued again before this one starts
    job = IngestJob.objects.select_related("tenant", "source").filter(pk=job_id).first()  # unscoped: id is ours
    if job is None or job.is_finished and job.state != IngestJob.State.FAILED:
        return
    worker = (job.params or {}).get("worker") or {}
    if job.state == IngestJob.State.RUNNING and worker and holder_alive(worker["host"], worker["pid"], job.started_at):
        return  # delivered twice (the broker's retry): the first delivery is still running it
    params = job.params or {}
    enrichment = EnrichmentRequest(**params["enrichment"]) if params.get("enrichment") else None
    extra = {"enrichment": enrichment, "critical": bool(params.get("critical"))}
    try:
        if job.kind == IngestJob.Kind.UPLOAD:
            folder = Path(params["dir"])
            files = [(key, (folder / key).read_bytes()) for key in params.get("files", [])]
            pipeline.ingest_files(
                source=job.source, files=files, mode=params.get("mode", "auto"), tags=params.get("tags", []), job=job,
                skips=params.get("skips", []), errors=params.get("errors", []), **extra,
            )  # fmt: skip
            upload_files_remove(job)  # ingested: the raw files are not kept (a crash above keeps them for a retry)
        elif job.kind == IngestJob.Kind.FOLDER:
            root = job_folder(job)  # checked again here, right before reading
            pipeline.sync_folder(
                source=job.source, root=root, mode=params.get("mode", "auto"), tags=params.get("tags", []), job=job,
                **extra,
            )  # fmt: skip
    except (FolderNotAllowed, SourceBusy) as exc:  # a refusal with its reason, not a crash
        job.state, job.message = IngestJob.State.FAILED, str(exc)
        job.save(update_fields=["state", "message"])
        return
    except (pipeline.JobCancelled, StorageFull):  # stopped, and the job already says why
        return
    except Exception as exc:
        job.state, job.message = IngestJob.State.FAILED, f"{type(exc).__name__}: {exc}"
        job.save(update_fields=["state", "message"])
        raise
