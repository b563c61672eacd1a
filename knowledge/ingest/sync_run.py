"""The steps every source's sync shares: the job's file list, one file ingested into the job's counts, a failure
recorded, a checkpoint, the finish (indexed, then done), and a full disk that stops the job."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.db.models import Q

from core.errors import error_reference
from inference.embedders import Embedder
from knowledge import ids, jobs
from knowledge.index import indexer
from knowledge.index.storage import StorageFull, check_free_space, is_storage_full, storage_full_reason
from knowledge.ingest.extraction import EmptyDocument, ExtractionError, NeedsOCR
from knowledge.ingest.lookahead import Lookahead
from knowledge.ingest.metadata import problem_text
from knowledge.ingest.versions import ingest_bytes
from knowledge.models import (
    IngestJob,
    JobFile,
    Source,
)  # fmt: skip
from knowledge.options import IngestOptions

logger = logging.getLogger(__name__)


@contextmanager
def stopped_when_full(job: IngestJob) -> Iterator[None]:
    """A full disk (or one below RAG_MIN_FREE_BYTES) fails the job with the reason and raises StorageFull."""
    try:
        yield
    except Exception as exc:
        if not isinstance(exc, StorageFull) and not is_storage_full(exc):
            raise
        reason = str(exc) if isinstance(exc, StorageFull) else storage_full_reason(None)
        try:
            jobs.fail(job, reason)
        except Exception:  # noqa: BLE001  (the disk is still full: the log has it, the job stays to be recovered)
            logger.error("Job %s stopped and could not be updated: %s", job.public_id, reason)
        raise StorageFull(reason) from exc


def ingest_one(
    *, job: IngestJob, source: Source, key: str, options: IngestOptions, embedder: Embedder | Lookahead,
    path: Path | None = None, mtime: float | None = None, data: bytes | None = None,
    lookahead: Lookahead | None = None, position: int = 0, commit: dict | None = None, force: bool = False,
    size: int | None = None, location: str | None = None,
) -> bool:  # fmt: skip
    """Ingest one file into the job's counts and its row of the job's file list; False when it was skipped
    (empty), so a sync retires its old version. A failure is recorded on the job and keeps the old version (True),
    as an unreadable file should. A full disk is not one document's failure: it raises StorageFull and stops the
    job."""
    check_free_space(key)
    started = time.monotonic()
    try:
        if data is None:
            assert path is not None
            data = path.read_bytes()
        outcome = ingest_bytes(
            source=source, key=key, data=data, source_path=location or str(path or key), mtime=mtime, options=options,
            size=size,
            job=job, embedder=embedder, lookahead=lookahead, commit=commit, force=force,  # a Lookahead embeds too
        )  # fmt: skip
    except EmptyDocument:
        job.skipped += 1
        job.skips = [*job.skips, {"key": key, "reason": "empty"}]
        _file_record(job, key, position, JobFile.Status.SKIPPED, reason="empty: no text to index", started=started)
        return False
    except NeedsOCR as exc:
        record_failure(job, key, str(exc), kind="needs_ocr", position=position, started=started)
        return True
    except (ExtractionError, ids.InvalidIdentifier, ValueError) as exc:
        record_failure(job, key, str(exc), position=position, started=started)
        return True
    except Exception as exc:
        if is_storage_full(exc):  # every document after this one would fail the same way
            raise StorageFull(storage_full_reason(key)) from exc
        return _record_unexpected(job, key, exc, position=position, started=started)
    if outcome.result == "unchanged":
        job.unchanged += 1
    else:
        setattr(job, outcome.result, getattr(job, outcome.result) + 1)
        job.chunks_total += outcome.chunks
        job.chunks_done += outcome.chunks
    _file_record(job, key, position, outcome.result, chunks=outcome.chunks, ocr_pages=outcome.ocr_pages,
                 document_pk=outcome.document_pk, started=started)  # fmt: skip
    return True


def files_listed(job: IngestJob, rows: list[tuple[str, str, str]]) -> None:
    """The job's file list, at its start: (key, status, reason) in order."""
    JobFile.objects.bulk_create(
        [JobFile(tenant_id=job.tenant_id, job=job, position=n, key=key[:1000], status=status, reason=reason,
                 kind="skipped" if status == JobFile.Status.SKIPPED else "") for n, (key, status, reason) in
         enumerate(rows)], batch_size=500)  # fmt: skip


def _file_record(job: IngestJob, key: str, position: int, status: str, *, reason: str = "", kind: str = "",
                 chunks: int = 0, ocr_pages: int = 0, document_pk: int | None = None,
                 started: float | None = None) -> None:  # fmt: skip
    """What became of one file, on its row of the job's list (created for a file a sync found)."""
    values = {"status": status, "reason": reason, "kind": kind, "chunks": chunks, "ocr_pages": ocr_pages,
              "document_id": document_pk,
              "seconds": round(time.monotonic() - started, 3) if started is not None else None}  # fmt: skip
    if not JobFile.objects.filter(job=job, key=key[:1000]).update(**values):
        JobFile.objects.create(tenant_id=job.tenant_id, job=job, key=key[:1000], position=position, **values)


def _record_unexpected(job: IngestJob, key: str, exc: Exception, *, position: int, started: float) -> bool:
    """A document that failed for a reason of its own (unreadable, a bug): recorded, the batch goes on."""
    if isinstance(exc, OSError):  # the reason, not the server's path
        logger.warning("Reading %s failed: %s", key, exc)
        record_failure(job, key, f"the file could not be read ({exc.strerror or 'input/output error'})",
                        position=position, started=started)  # fmt: skip
        return True
    reference = error_reference()
    logger.error("Ingesting %s failed (ref %s)", key, reference, exc_info=exc)
    record_failure(job, key, f"unexpected error while indexing; the details were logged (ref {reference})",
                    position=position, started=started)  # fmt: skip
    return True


def record_failure(job: IngestJob, key: str, error: str, *, kind: str = "error", position: int = 0,
                    started: float | None = None) -> None:  # fmt: skip
    error = problem_text(error)  # it may quote the file (a parser's message): cut
    job.failed += 1
    job.errors = [*job.errors, {"key": key[:1000], "error": error, "kind": kind}]
    _file_record(job, key, position, JobFile.Status.FAILED, reason=error, kind=kind, started=started)


def checkpoint(job: IngestJob, progress: Callable[[IngestJob], None] | None) -> None:
    jobs.checkpoint(job)
    if progress:
        progress(job)


def finish(job: IngestJob, progress: Callable[[IngestJob], None] | None) -> IngestJob:
    jobs.indexing(job)
    indexer.drain()
    job.refresh_from_db()
    jobs.finish_if_indexed(job)
    if progress:
        progress(job)
    return job


def wait_for_job(job: IngestJob, *, timeout: float = 600.0) -> IngestJob:
    indexer.wait_until_indexed(Q(job=job), timeout=timeout)
    indexer.drain()
    job.refresh_from_db()
    jobs.finish_if_indexed(job)
    return job
