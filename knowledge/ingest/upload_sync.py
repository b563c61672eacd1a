"""Uploaded files ingested into their source (the bytes come from knowledge/ingest/uploads.py); other documents of
the source are left alone, and a file named like a document its uploader may not see is never written."""

from __future__ import annotations

from inference.embedders import get_embedder
from knowledge import ids, jobs
from knowledge.ingest.sync_run import checkpoint, files_listed, finish, ingest_one, record_failure, stopped_when_full
from knowledge.jobs import report_activity, source_locked
from knowledge.models import (
    Document,
    IngestJob,
    JobFile,
    Source,
)  # fmt: skip
from knowledge.options import DEFAULT_OPTIONS, IngestOptions
from knowledge.selectors import document_writable_by

HIDDEN_WRITE = (
    "Not ingested: access to this source changed while the upload waited; only someone who sees all of "
    "it may upload to it."
)  # the same words whether the name is taken by a hidden document or not


def _hidden_from(writer: list[str], source: Source, key: str) -> bool:
    """Whether the upload's key names a document its uploader may not see (made hidden after the upload was
    accepted): a new version of it would overwrite what its readers are served."""
    try:
        document = Document.objects.filter(source=source, document_key=ids.normalise_document_key(key)).first()
    except ids.InvalidIdentifier:
        return False
    return document is not None and not document_writable_by(writer, document)


def ingest_files(
    *, source: Source, files: list[tuple[str, bytes]], options: IngestOptions = DEFAULT_OPTIONS,
    job: IngestJob | None = None, skips: list[dict] | None = None, errors: list[dict] | None = None,
) -> IngestJob:  # fmt: skip
    """Ingest uploaded (key, bytes) pairs into a source; other documents of the source are left alone."""
    job = job or IngestJob.objects.create(tenant=source.tenant, source=source, kind=IngestJob.Kind.UPLOAD)
    jobs.start(job)
    with source_locked(source, job), stopped_when_full(job):  # one sync of a source at a time (knowledge/jobs.py)
        job.skips, job.skipped = list(skips or []), len(skips or [])
        job.errors, job.failed = list(errors or []), len(errors or [])
        job.documents_total, job.files_total = len(files), len(files) + job.skipped + job.failed
        job.save()  # the totals show at once, not after the first document (an enriched one takes a minute)
        if not job.files.exists():  # uploads list their files when they are stored (knowledge/services.py)
            files_listed(job, [(k, JobFile.Status.WAITING, "") for k, _ in files])
        embedder = get_embedder()
        writer = (job.params or {}).get("writer")
        for number, (key, data) in enumerate(files):
            report_activity(job, f"Document {number + 1} of {len(files)}: {ids.display_name(key)}")
            if writer is not None and _hidden_from(writer, source, key):
                record_failure(job, key, HIDDEN_WRITE, kind="rejected", position=number)
                job.documents_done = number + 1
                continue
            ingest_one(job=job, source=source, key=key, data=data, options=options, embedder=embedder,
                        position=number)  # fmt: skip
            job.documents_done = number + 1
            checkpoint(job, None)
        return finish(job, None)
