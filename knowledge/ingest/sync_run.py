"""One sync of a source, whatever its kind (`SyncRun`: its kind's producer yields, this writes), and the steps it
shares with an upload's ingest: the job's file list, one file ingested into the job's counts, a failure recorded, a
checkpoint, the finish (indexed, then done), and a full disk that stops the job."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.errors import error_reference
from inference.embedders import Embedder, get_embedder
from knowledge import ids, jobs, timeline
from knowledge import links as link_graph
from knowledge.access import AccessChange, access_enforce, documents_access_set
from knowledge.index import indexer
from knowledge.index.storage import StorageFull, check_free_space, is_storage_full, storage_full_reason
from knowledge.ingest.extraction import EmptyDocument, ExtractionError, NeedsOCR
from knowledge.ingest.lookahead import Lookahead, lookahead_for
from knowledge.ingest.metadata import problem_text
from knowledge.ingest.producer import (
    Access,
    Activity,
    Done,
    Event,
    Failed,
    Gone,
    Item,
    Note,
    Planned,
    Reading,
    Skipped,
    SourceProblem,
    Unchanged,
)
from knowledge.ingest.versions import document_move, ingest_bytes, retire_documents
from knowledge.jobs import report_activity, source_locked
from knowledge.models import Document, DocumentVersion, IngestJob, JobFile, Source, Status
from knowledge.options import IngestOptions
from knowledge.sealed import CredentialUnreadable, split_credential, unseal

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
    size: int | None = None, location: str | None = None, access: list[str] | None = None,
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
            access=access,
        )  # fmt: skip
    except EmptyDocument:
        job.skipped += 1
        job.skips = [*job.skips, {"key": key, "reason": "empty"}]
        _file_record(job, key, position, JobFile.Status.SKIPPED, reason="empty: no text to index", started=started)
        return False
    except NeedsOCR as exc:
        record_failure(job, key, str(exc), kind="needs_ocr", position=position, started=started)
        return True
    except (ExtractionError, ids.InvalidIdentifier, ValueError) as exc:  # its bytes cannot be read: no retry of them
        record_failure(job, key, str(exc), kind=JobFile.UNREADABLE, position=position, started=started)
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


class _Skips:
    """What a sync did not read, with why: listed one by one up to MAX_SKIPS_LISTED, then counted by reason (a page
    of 30,000 links writes a few hundred rows, not 30,000)."""

    def __init__(self) -> None:
        self.listed: list[tuple[str, str, str]] = []
        self.more: dict[str, int] = {}
        self.count = 0

    def add(self, key: str, reason: str) -> None:
        self.count += 1
        if len(self.listed) < MAX_SKIPS_LISTED:
            self.listed.append((key[:1000], JobFile.Status.SKIPPED, reason[:500]))
        else:
            self.more[reason[:200]] = self.more.get(reason[:200], 0) + 1

    def record(self, job: IngestJob) -> None:
        summary: list[tuple[str, str, str]] = [
            (f"… and {n:,} more", JobFile.Status.SKIPPED, reason) for reason, n in self.more.items()
        ]
        job.skipped += self.count
        job.skips = [*job.skips, *({"key": key, "reason": reason} for key, _, reason in self.listed + summary)]
        files_listed(job, self.listed + summary)
        self.listed, self.more, self.count = [], {}, 0


MAX_SKIPS_LISTED = 200


class SyncRun:
    """One sync of a source: its job (made here when the operator's command line runs it in-process), the source's
    lock, the full-disk guard, and everything its kind's producer yields (knowledge/ingest/producer.py) written:
    each item ingested, what the sync no longer saw retired, the links stored, the source stamped, the job finished.

    `location`: where it reads, checked by the caller (a credential it carries goes to the producer only; the job
    records the location without it). A `SourceProblem` from the producer fails the job with its reason and changes
    nothing; it is raised again for the caller."""

    def __init__(
        self,
        kind: Any,
        source: Source,
        location: str,
        *,
        options: IngestOptions,
        job: IngestJob | None = None,
        progress: Callable[[IngestJob], None] | None = None,
    ) -> None:
        self.kind = kind  # its SourceKind (knowledge/ingest/sources.py)
        self.source, self.options, self.job, self.progress = source, options, job, progress
        self.location, given = split_credential(location)
        self.given = given
        self.access = _AccessReport()

    def _started(self, job_kind: str) -> tuple[IngestJob, Reading]:
        """The job (made here for the operator's command line: a retry re-reads this location), started, and what the
        producer reads."""
        source, kind = self.source, self.kind
        job = self.job or IngestJob.objects.create(
            tenant=source.tenant,
            source=source,
            kind=job_kind,
            params={kind.param: self.location, "operator": True},
        )
        self.job = job
        jobs.start(job)
        try:
            credential = self.given or unseal(source.credential)
        except CredentialUnreadable as exc:
            jobs.fail(job, str(exc))
            raise SourceProblem(str(exc)) from exc
        reading = Reading(
            source=source,
            location=self.location,
            config=kind.config_of(source),
            state=dict(source.sync_state or {}),
            options=self.options,
            credential=credential,
        )
        return job, reading

    def run(self) -> IngestJob:
        source, kind = self.source, self.kind
        job, reading = self._started(kind.job_kind)
        assert kind.produce is not None
        wanted = self.options.enrichment is None and kind.reads_ahead  # enrichment adds a chunk: no reading ahead
        embedder = get_embedder()
        with source_locked(source, job), stopped_when_full(job), lookahead_for(embedder if wanted else None) as ahead:
            try:
                done = self._consume(kind.produce(reading), job, ahead or embedder, ahead)
            except SourceProblem as exc:
                jobs.fail(job, str(exc))
                raise
            return self._finish(job, done)

    def _consume(self, events: Iterator[Event], job: IngestJob, embedder: Any, lookahead: Lookahead | None) -> Done:
        """Every event of the producer into the job, until its Done."""
        self.keep: set[str] = set()
        self.links: dict[str, list] = {}
        self.imported = 0
        skips = _Skips()
        done_count = passed = checkpointed = 0  # documents gone through; skips that are not one of them
        for event in events:
            if isinstance(event, Done):
                break
            if isinstance(event, Activity):
                report_activity(job, event.text)
                continue
            if isinstance(event, Note):
                job.skips = [*job.skips, {"key": event.key[:1000], "reason": event.text[:500]}]
                continue
            if isinstance(event, Access):
                self.access.apply(self.source, {event.key: event.access})
                continue
            if isinstance(event, Planned):
                job.documents_total = event.total
                job.files_total = event.total + passed
                skips.record(job)  # what it passed over so far shows while the rest is read
                job.save()
                if event.ahead and lookahead is not None:
                    lookahead.start(self.source.tenant, self.source, list(event.ahead), self.options.mode, job)
                continue
            if isinstance(event, Skipped):
                skips.add(event.key, event.reason)
                done_count += event.counted
                passed += not event.counted
            elif isinstance(event, Unchanged):
                job.unchanged += 1
                self._keep(event.key)
                if event.note:
                    files_listed(job, [(event.key, JobFile.Status.UNCHANGED, event.note)])
                done_count += event.counted
            elif isinstance(event, Failed):
                record_failure(job, event.key, event.reason, kind=event.kind, position=event.position)
                if event.keep:
                    self._keep(event.key)
                done_count += 1
            elif isinstance(event, Gone):
                done_count += 1
            elif isinstance(event, Item):
                self._ingest(event, job, embedder, lookahead)
                done_count += 1
            job.documents_done = done_count
            job.documents_total = max(job.documents_total, done_count)
            job.files_total = max(job.files_total, done_count + passed)
            if done_count and done_count % 20 == 1 and done_count != checkpointed:
                checkpointed = done_count
                checkpoint(job, self.progress)
        else:
            event = Done()
        skips.record(job)
        job.files_total = max(job.files_total, done_count + passed)
        return event

    def _keep(self, key: str) -> None:
        try:
            self.keep.add(ids.normalise_document_key(key))
        except ids.InvalidIdentifier:
            pass

    def _ingest(self, item: Item, job: IngestJob, embedder: Any, lookahead: Lookahead | None) -> None:
        source = self.source
        stored = ids.normalise_document_key(item.key)
        moved = bool(item.moved_from) and document_move(source, item.moved_from, item.key)
        new = (
            not moved
            and bool(item.history)
            and not Document.objects.filter(source=source, document_key=stored).exists()
        )
        if item.access is not None:  # an existing document's readers change before any new text is stored
            self.access.apply(source, {item.key: item.access})
        made = self._history(job, item, embedder) if item.history else 0
        if lookahead is not None:
            lookahead.fill(item.position)
        options = self.options
        if item.tags:
            options = dataclasses.replace(options, tags=tuple(dict.fromkeys([*options.tags, *item.tags])))
        if ingest_one(
            job=job,
            source=source,
            key=item.key,
            path=item.path,
            data=item.data,
            mtime=item.mtime,
            options=options,
            embedder=embedder,
            lookahead=lookahead,
            position=item.position,
            commit=item.commit,
            force=moved and not made,
            size=item.size,
            location=item.location,
            access=None if item.access is None else list(item.access),
        ):
            self.keep.add(stored)
        if lookahead is not None:
            lookahead.forget(item.key)
        if item.links is not None:
            self.links[stored] = list(item.links)
        if moved:
            JobFile.objects.filter(job=job, key=item.key[:1000]).update(
                reason=f"{item.moved_how} from {item.moved_from}"
            )
        elif (
            new
            and made
            and JobFile.objects.filter(job=job, key=item.key[:1000], status=JobFile.Status.UPDATED).update(
                status=JobFile.Status.ADDED, reason=f"with {made} earlier version(s) from its history"
            )
        ):
            job.updated, job.added = job.updated - 1, job.added + 1  # a new document is added, its history with it

    def _history(self, job: IngestJob, item: Item, embedder: Any) -> int:
        """An item's older versions as imported history (each served over its window); an unreadable one is passed
        over (its newest version is what the job reports on). Returns how many were written."""
        made = 0
        for past in item.history:
            data = past.read()  # one old version in memory at a time
            if not data:
                continue
            try:
                outcome = ingest_bytes(
                    source=self.source,
                    key=item.key,
                    data=data,
                    source_path=item.key,
                    mtime=past.mtime,
                    job=job,
                    embedder=embedder,
                    commit=past.commit,
                    history=past.window,
                    access=None if item.access is None else list(item.access),
                )
            except (ExtractionError, ids.InvalidIdentifier, ValueError) as exc:
                logger.info("%s (%s) not imported: %s", item.key, str(past.commit.get("sha", ""))[:12], exc)
                continue
            except Exception as exc:  # one old version's bug never stops the batch; the log has it
                if is_storage_full(exc):  # every version after it would fail the same way: the job stops, says why
                    raise
                logger.exception(
                    "%s (%s) not imported (unexpected error)", item.key, str(past.commit.get("sha", ""))[:12]
                )
                continue
            made += outcome.result != "unchanged"
        self.imported += made
        return made

    def _finish(self, job: IngestJob, done: Done) -> IngestJob:
        """Retire what the sync no longer saw, store the links, stamp the source and finish the job."""
        source = self.source
        job.retired = retire_documents(source=source, keep_keys=self.keep)
        report = {key: dict(value) if isinstance(value, dict) else value for key, value in done.report.items()}
        if done.reachable is not None:
            lost = _mark_unreachable(source, done.reachable)
            for value in report.values():
                if isinstance(value, dict):
                    value.update(history_versions=self.imported, unreachable=lost)
        job.params = {**(job.params or {}), **report, **self.access.report()}
        if self.kind.links:
            link_graph.links_store(source, self.links)
            job.params = {**job.params, "link_problems": link_graph.links_resolve(source)}
            link_graph.carries_store(source)
            access_enforce(
                Document.objects.filter(source=source, links_out__embed=True).distinct().select_related("source")
            )
        job.save()
        timeline.resolve_pending_links(source_pk=source.pk)
        source.last_synced_at = timezone.now()
        fields = ["last_synced_at"]
        if done.state is not None:
            source.sync_state = done.state
            fields.append("sync_state")
        source.save(update_fields=fields)
        return finish(job, self.progress)


class _AccessReport:
    """The access changes of one sync or permission sync: applied as they come (knowledge/access.py), then reported on
    the job — how many documents opened to someone and closed to someone, the first MAX_SKIPS_LISTED by key, and the
    documents its system lets no one here read (admins only)."""

    def __init__(self) -> None:
        self.changes: list[AccessChange] = []
        self.admins_only: list[str] = []
        self.seen = 0

    def apply(self, source: Source, lists: Mapping[str, Sequence[str]]) -> None:
        keyed: dict[str, list[str]] = {}
        for key, access in lists.items():
            try:
                stored = ids.normalise_document_key(key)
            except ids.InvalidIdentifier:
                continue
            keyed[stored] = list(access)
            self.seen += 1
            if not access:
                self.admins_only.append(stored)
        self.changes += documents_access_set(source, keyed)

    def report(self) -> dict[str, Any]:
        if not self.seen:
            return {}
        listed = self.changes[:MAX_SKIPS_LISTED]
        return {
            "access": {
                "documents": self.seen,
                "opened": sum(bool(change.opened) for change in self.changes),
                "closed": sum(bool(change.closed) for change in self.changes),
                "changes": [{"key": c.key, "opened": list(c.opened), "closed": list(c.closed)} for c in listed],
                "admins_only": len(self.admins_only),
                "admins_only_keys": self.admins_only[:MAX_SKIPS_LISTED],
            }
        }


def _mark_unreachable(source: Source, reachable: frozenset[str]) -> int:
    """After a rewritten history (a force-push): the versions of commits it no longer holds are kept, marked."""
    lost = []
    for version in DocumentVersion.objects.filter(document__source=source).exclude(commit={}).only("pk", "commit"):
        sha = (version.commit or {}).get("sha")
        if sha and sha not in reachable and not version.commit.get("unreachable"):
            lost.append((version.pk, {**version.commit, "unreachable": True}))
    with transaction.atomic():
        for pk, commit in lost:
            DocumentVersion.objects.filter(pk=pk).update(commit=commit)
    return len(lost)


class PermissionRun(SyncRun):
    """A permission sync: only who may read each document, as its kind's system says now (`SourceKind.permissions`
    yields an `Access` for every document it still shows), applied as payload changes — nothing read, embedded or
    retired. A document its system no longer shows to the connector closes to all but the tenant's admins until the
    next sync retires it."""

    def run(self) -> IngestJob:
        source, kind = self.source, self.kind
        job, reading = self._started(IngestJob.Kind.PERMISSIONS)
        assert kind.permissions is not None
        lists: dict[str, tuple[str, ...]] = {}
        report: dict[str, Any] = {}
        with source_locked(source, job), stopped_when_full(job):
            try:
                for event in kind.permissions(reading):
                    if isinstance(event, Done):
                        report = dict(event.report)  # what its kind says besides (people it could not map)
                        break
                    if isinstance(event, Activity):
                        report_activity(job, event.text)
                    elif isinstance(event, Access):
                        self._listed(lists, event)
            except SourceProblem as exc:
                jobs.fail(job, str(exc))
                raise
            live = Document.objects.filter(source=source).exclude(status=Status.RETIRED)
            for key in live.values_list("document_key", flat=True):
                lists.setdefault(key, ())
            self.access.apply(source, lists)
            job.documents_total = job.documents_done = self.access.seen
            job.params = {**(job.params or {}), **report, **self.access.report()}
            job.save()
            return finish(job, self.progress)

    @staticmethod
    def _listed(lists: dict[str, tuple[str, ...]], event: Access) -> None:
        try:
            lists[ids.normalise_document_key(event.key)] = event.access
        except ids.InvalidIdentifier:
            pass
