"""Flows that create or change sources, documents and chunks."""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.audit import audit
from core.errors import error_reference
from knowledge import ids, jobs, timeline
from knowledge.access import access_enforce
from knowledge.index.storage import is_storage_full
from knowledge.ingest import sources
from knowledge.ingest.producer import SourceProblem
from knowledge.ingest.uploads import UploadRejected, expand_upload
from knowledge.locations import FolderNotAllowed, drop_folder
from knowledge.models import (
    AllowedLocation,
    Chunk,
    Document,
    DocumentVersion,
    IngestJob,
    JobFile,
    Source,
    Status,
    Tag,
    VersionCarry,
)
from knowledge.options import DEFAULT_OPTIONS, EnrichmentRequest, IngestOptions
from knowledge.schedules import source_permissions_schedule, source_schedule_remove
from knowledge.source_rows import source_create
from tenants.models import Tenant, TenantQuerySet
from tenants.principals import Viewer, principals_check

logger = logging.getLogger(__name__)


# --- access ---------------------------------------------------------------------------------------------------
def access_changed(*, tenant: Tenant, document_pks: Iterable[int]) -> int:
    """The access of these documents changed (their list, their source's, or a group they name is gone): they and
    every note that embeds one of them are enforced anew (a note carrying their text is as strict as that text),
    and every note whose embeds may now render differently is rendered again by a sync of its vault (until then it
    keeps the stricter list, or its placeholder)."""
    pks = set(document_pks)
    embedders = set(
        Document.objects.for_tenant(tenant).filter(links_out__embed=True, links_out__resolved_id__in=list(pks))
        .values_list("pk", flat=True)
    )  # fmt: skip
    # and every note a version of which carries their text, served now or not (its history stays as strict)
    embedders |= set(VersionCarry.objects.for_tenant(tenant).filter(note_id__in=list(pks))
                     .values_list("version__document_id", flat=True))  # fmt: skip
    affected = Document.objects.for_tenant(tenant).filter(pk__in=list(pks | embedders)).select_related("source")
    changed = access_enforce(affected)
    embedding = Document.objects.for_tenant(tenant).filter(
        pk__in=list(pks | embedders), links_out__embed=True, status=Status.ACTIVE
    ).distinct()  # fmt: skip
    _render_again(tenant, list(embedding.select_related("source")))
    return changed


def _render_again(tenant: Tenant, notes: list[Document]) -> None:
    """Vault notes whose embeds render by their readers' access: their next sync reads them again (the fast check
    sees no mtime), and one is queued now where the vault may be read."""
    if not notes:
        return
    DocumentVersion.objects.filter(document__in=notes, status=Status.ACTIVE).update(mtime=None)
    for source in {note.source for note in notes if sources.kind_of(note.source).links}:
        try:
            source_sync_enqueue(tenant=tenant, source=source, trigger="access")
        except SourceProblem as exc:  # the notes keep the stricter list until the vault is synced
            logger.warning("Vault %s was not synced after an access change: %s", source.source_id, exc)


def source_set_access(*, tenant: Tenant, source: Source, access: list[str], actor: str = "") -> int:
    """Who sees the source's documents (those without their own list). Returns how many documents change; no
    document is re-extracted or re-embedded (a payload update). `actor`: who changed it, for the audit stream."""
    if source.tenant_id != tenant.pk:
        raise ValueError("Not a source of this tenant.")
    before = list(source.access or [])
    source.access = principals_check(tenant=tenant, principals=access)
    with transaction.atomic():
        source.save(update_fields=["access"])
        inheriting = Document.objects.for_tenant(tenant).filter(source=source, access__isnull=True)
        changed = access_changed(tenant=tenant, document_pks=inheriting.values_list("pk", flat=True))
    audit("access.changed", tenant=tenant.slug, actor=actor, source=source.source_id, before=before,
          after=source.access, documents=changed)  # fmt: skip
    return changed


def document_set_access(*, tenant: Tenant, document: Document, access: list[str] | None, actor: str = "") -> None:
    """The document's own access list (replacing its source's), or None to inherit the source's again. `actor`: who
    changed it, for the audit stream."""
    if document.tenant_id != tenant.pk:
        raise ValueError("Not a document of this tenant.")
    before = document.access
    document.access = None if access is None else principals_check(tenant=tenant, principals=access)
    with transaction.atomic():
        Document.objects.filter(pk=document.pk).update(access=document.access)
        access_changed(tenant=tenant, document_pks=[document.pk])
    audit("access.changed", tenant=tenant.slug, actor=actor, document=document.document_id,
          before=before if before is not None else "inherited",
          after=document.access if document.access is not None else "inherited")  # fmt: skip
    document.refresh_from_db()


def principal_forget(*, tenant: Tenant, principal: str) -> int:
    """A principal is gone (a deleted group): it leaves every access list of the tenant's sources and documents,
    and the documents they govern are enforced anew (a payload update). Returns how many lists changed."""
    changed_sources = [s for s in Source.objects.for_tenant(tenant) if principal in (s.access or [])]
    changed_documents = [d for d in Document.objects.for_tenant(tenant).filter(access__isnull=False)
                         if principal in (d.access or [])]  # fmt: skip
    for source in changed_sources:
        Source.objects.filter(pk=source.pk).update(access=[p for p in source.access if p != principal])
    for document in changed_documents:
        Document.objects.filter(pk=document.pk).update(access=[p for p in document.access or [] if p != principal])
    governed = set(
        Document.objects.for_tenant(tenant).filter(source__in=changed_sources, access__isnull=True)
        .values_list("pk", flat=True)
    )  # fmt: skip
    access_changed(tenant=tenant, document_pks=governed | {d.pk for d in changed_documents})
    return len(changed_sources) + len(changed_documents)


def access_pending_count(*, tenant: Tenant, source: Source | None = None) -> int:
    """Documents whose access change is still reaching the vector payloads (the change's progress)."""
    pending = Document.objects.for_tenant(tenant).filter(access_pending=True)
    return (pending.filter(source=source) if source is not None else pending).count()


def source_default_get(*, tenant: Tenant) -> Source:
    """The tenant's logical source for loose uploads, created on first use."""
    source_id = ids.source_id(tenant.slug, ids.DEFAULT_SOURCE_KIND, ids.DEFAULT_SOURCE_NAME)
    source, _ = Source.objects.get_or_create(
        tenant=tenant,
        source_id=source_id,
        defaults={
            "kind": ids.DEFAULT_SOURCE_KIND,
            "name": ids.DEFAULT_SOURCE_NAME,
            "label": "Loose uploads",
            "is_default": True,
        },
    )
    return source


def tag_get_or_create(*, tenant: Tenant, name: str) -> Tag:
    normalised = Tag.normalise(name)
    if not normalised:
        raise ValueError("A tag needs a name.")
    tag, _ = Tag.objects.get_or_create(tenant=tenant, name=normalised)
    return tag


def _flag_for_sync(document_pks: Iterable[int]) -> None:
    """Curation changed these documents: the indexer pushes the new payloads to the vector store."""
    from knowledge.index import indexer

    pks = list(document_pks)
    Document.objects.filter(pk__in=pks).update(needs_sync=True)
    transaction.on_commit(lambda: indexer.sync_documents(pks))  # these documents only, never others' backlog


def documents_payload_sync(*, tenant: Tenant, document_pks: Iterable[int]) -> None:
    """Curation outside the services' own setters (the Django admin's change forms) changed these documents:
    push their payloads (critical, tags, titles) to the vector store too."""
    _flag_for_sync(Document.objects.for_tenant(tenant).filter(pk__in=list(document_pks)).values_list("pk", flat=True))


def documents_set_critical(*, tenant: Tenant, documents: TenantQuerySet[Document], critical: bool) -> int:
    scoped = documents.for_tenant(tenant)
    pks = list(scoped.values_list("pk", flat=True))
    count = Document.objects.filter(pk__in=pks).update(critical=critical, updated_at=timezone.now())
    _flag_for_sync(pks)
    return count


def chunks_set_critical(*, tenant: Tenant, chunks: TenantQuerySet[Chunk], critical: bool) -> int:
    scoped = chunks.for_tenant(tenant)
    document_pks = set(scoped.values_list("document_id", flat=True))
    count = scoped.update(critical=critical)
    _flag_for_sync(document_pks)
    return count


def rows_add_tag(*, tenant: Tenant, rows: TenantQuerySet[Any], tag_name: str) -> int:
    """Tag every row of this tenant in rows; returns how many rows it touched."""
    tag = tag_get_or_create(tenant=tenant, name=tag_name)
    scoped = list(rows.for_tenant(tenant))
    with transaction.atomic():
        for row in scoped:
            row.tags.add(tag)
    _flag_for_sync(_documents_of(scoped))
    return len(scoped)


def _documents_of(rows: list[Document] | list[Chunk]) -> set[int]:
    return {row.pk if isinstance(row, Document) else row.document_id for row in rows}


def rows_remove_tag(*, tenant: Tenant, rows: TenantQuerySet[Any], tag_name: str) -> int:
    tag = Tag.objects.for_tenant(tenant).filter(name=Tag.normalise(tag_name)).first()
    if tag is None:
        return 0
    scoped = list(rows.for_tenant(tenant).filter(tags=tag))
    with transaction.atomic():
        for row in scoped:
            row.tags.remove(tag)
    _flag_for_sync(_documents_of(scoped))
    return len(scoped)


def documents_retire(*, tenant: Tenant, documents: TenantQuerySet[Document], actor: str = "") -> int:
    """Retire documents: readers stop seeing them; their versions stay as history."""
    now = timezone.now()
    scoped = documents.for_tenant(tenant).exclude(status=Status.RETIRED)
    with transaction.atomic():
        pks = list(scoped.values_list("pk", flat=True))
        DocumentVersion.objects.filter(document_id__in=pks, status=Status.ACTIVE).update(
            status=Status.RETIRED, status_changed_at=now
        )
        Chunk.objects.filter(document_id__in=pks, status=Status.ACTIVE).update(status=Status.RETIRED)
        Document.objects.filter(pk__in=pks).update(status=Status.RETIRED, updated_at=now)
        timeline.retired(pks, now, actor=actor)
        _flag_for_sync(pks)
    return len(pks)


def document_set_validity(*, tenant: Tenant, document: Document, changes: dict[str, Any], actor: str,
                          viewer: Viewer | None = None) -> Document:  # fmt: skip
    """Set a document's validity dates, review date or `supersedes` (knowledge/timeline.py); raises
    validity.InvalidValidity naming the field. The points' windows follow through the indexer. `supersedes` names
    only a document `viewer` (the caller; None: the tenant itself, an admin's tool) may see: one it may not see is
    answered like one that does not exist."""
    if document.tenant_id != tenant.pk:
        raise PermissionError("Documents of another tenant cannot be changed here.")
    changed = timeline.document_set_validity(document=document, changes=changes, actor=actor,
                                             viewer=viewer or Viewer.everything(tenant))  # fmt: skip
    _flag_for_sync([document.pk])
    return changed


def source_set_review_every(*, tenant: Tenant, source: Source, days: int | None) -> int:
    """A source's review interval: its documents whose review date is not stated (nor set by a review) are due
    `days` after their content last changed (None: no date). Returns how many documents it changed."""
    if source.tenant_id != tenant.pk:
        raise PermissionError("Sources of another tenant cannot be changed here.")
    source.review_every_days = days
    source.save(update_fields=["review_every_days"])
    count = 0
    for document in source.documents.filter(review_by_origin__in=["", "source"]).exclude(status=Status.FAILED):
        changed = document.content_changed_at or document.updated_at
        due = timezone.localdate(changed) + timedelta(days=days) if days else None
        count += Document.objects.filter(pk=document.pk).update(
            review_by=due, review_by_origin="source" if days else ""
        )
    return count


def document_reviewed(*, tenant: Tenant, document: Document, days: int, actor: str) -> Document:
    """ "Still true": reviewed now, due again in `days` days (recorded: who, when)."""
    if document.tenant_id != tenant.pk:
        raise PermissionError("Documents of another tenant cannot be changed here.")
    return timeline.document_reviewed(document=document, days=days, actor=actor)


def source_sync_enqueue(*, tenant: Tenant, source: Source, options: IngestOptions = DEFAULT_OPTIONS,
                        operator: bool = False, trigger: str = "request") -> IngestJob:  # fmt: skip
    """Queue a background sync of a folder, vault or git source; returns the IngestJob that reports on it.

    Where it reads is checked here, where it is used: unless the operator's CLI queues it (`operator`), a folder
    or vault must lie inside RAG_ALLOWED_FOLDER_ROOTS and a repository inside them or under RAG_ALLOWED_GIT_URLS
    (FolderNotAllowed otherwise). The job records the checked location and who queued it; the worker checks again
    before reading, and a retry reads that location, never the source's current one."""
    from django_q.tasks import async_task

    if source.tenant_id != tenant.pk:
        raise PermissionError("Sources of another tenant cannot be synced here.")
    kind, location = sources.sync_params(source, operator=operator)
    params: dict[str, Any] = {**options.to_params(), "operator": operator, "trigger": trigger, **location}
    job = IngestJob.objects.create(tenant=tenant, source=source, kind=kind, params=params)
    transaction.on_commit(
        lambda: async_task("knowledge.tasks.ingest_job_task", job.pk, task_name=f"ingest-{job.public_id}")
    )
    return job


def source_permissions_enqueue(*, tenant: Tenant, source: Source, trigger: str = "request") -> IngestJob:
    """Queue a permission sync of a source whose kind has one (a wiki's read rights, knowledge/ingest/sources.py):
    its location checked here and again by the worker, like a sync's."""
    from django_q.tasks import async_task

    if source.tenant_id != tenant.pk:
        raise PermissionError("Sources of another tenant cannot be synced here.")
    if sources.kind_of(source).permissions is None:
        raise FolderNotAllowed(f"{source.label} has no read rights of its own to sync.")
    _kind, location = sources.sync_params(source, operator=False)
    params: dict[str, Any] = {"operator": False, "trigger": trigger, **location}
    job = IngestJob.objects.create(tenant=tenant, source=source, kind=IngestJob.Kind.PERMISSIONS, params=params)
    transaction.on_commit(
        lambda: async_task("knowledge.tasks.ingest_job_task", job.pk, task_name=f"rights-{job.public_id}")
    )
    return job


def upload_files_remove(job) -> None:
    """Delete an upload job's raw files (their text is in the index by now, or the job is gone)."""
    folder = (job.params or {}).get("dir")
    uploads_root = (Path(settings.MEDIA_ROOT) / "uploads").resolve()
    if folder and uploads_root in Path(folder).resolve().parents:  # only ever inside MEDIA_ROOT/uploads
        shutil.rmtree(folder, ignore_errors=True)


RETRYABLE_KINDS = ("error", "needs_ocr")  # a retry may fix these; not a refused name, a skipped or unreadable file


def upload_files_done(job: IngestJob) -> None:
    """An upload job ended: its raw files go, except those that failed in a way a retry may fix (kept for it)."""
    failed = set(job.files.filter(status=JobFile.Status.FAILED, kind__in=RETRYABLE_KINDS).values_list("key", flat=True))
    if not failed:
        upload_files_remove(job)
        return
    folder = Path((job.params or {}).get("dir") or "/nonexistent")
    for key in (job.params or {}).get("files", []):
        if key not in failed:
            (folder / key).unlink(missing_ok=True)


def job_retry_failed(*, tenant: Tenant, job: IngestJob) -> IngestJob:
    """A new upload job with the files of this one that failed (their raw files were kept); returns it."""
    if job.tenant_id != tenant.pk:
        raise PermissionError("Jobs of another tenant cannot be retried here.")
    folder = Path((job.params or {}).get("dir") or "/nonexistent")
    failed = job.files.filter(status=JobFile.Status.FAILED, kind__in=RETRYABLE_KINDS).values_list("key", flat=True)
    uploads = [(key, (folder / key).read_bytes()) for key in failed if (folder / key).is_file()]
    if not uploads:
        raise UploadFilesGone("No failed file of this job is kept any more; upload them again.")
    options = IngestOptions.from_params(job.params or {})
    retry = upload_enqueue(tenant=tenant, source=job.source, uploads=uploads, options=options,
                           writer=(job.params or {}).get("writer"))  # fmt: skip
    retry.params = {**retry.params, "retry_of": str(job.public_id)}
    retry.save(update_fields=["params"])
    for key, _ in uploads:
        (folder / key).unlink(missing_ok=True)
    job.params = {**(job.params or {}), "retried_as": str(retry.public_id)}
    job.save(update_fields=["params"])
    return retry


def job_cancel(*, tenant: Tenant, job) -> None:
    type(job).objects.for_tenant(tenant).filter(pk=job.pk).update(cancel_requested=True)


def job_retry(*, tenant: Tenant, job):
    """Run a finished or failed job again; incremental sync makes the retry redo only what is missing.

    A folder job reads the path it recorded, checked again now (FolderNotAllowed) unless the operator queued it."""
    from django_q.tasks import async_task

    if job.tenant_id != tenant.pk:
        raise PermissionError("Jobs of another tenant cannot be retried here.")
    if sources.is_sync(job):
        sources.job_location(job)  # checked again now (FolderNotAllowed)
    elif not Path((job.params or {}).get("dir") or "/nonexistent").is_dir():
        raise UploadFilesGone("The uploaded files were removed once they were ingested; upload them again.")
    elif not all((Path(job.params["dir"]) / key).is_file() for key in job.params.get("files", [])):
        return job_retry_failed(tenant=tenant, job=job)  # it ran to its end: only its failed files were kept
    jobs.queue(job)
    transaction.on_commit(lambda: async_task("knowledge.tasks.ingest_job_task", job.pk))
    return job


class UploadFilesGone(ValueError):
    """An upload job's raw files were removed after it ended: it cannot be run again."""


class SourceExists(ValueError):
    """A source of that kind and name exists already in the tenant."""


def source_create_for(
    *,
    tenant: Tenant,
    kind: str,
    name: str,
    location: str = "",
    config: dict | None = None,
    operator: bool = False,
    sync: bool = False,
    owner: Any = None,
) -> Source:
    """The one flow that creates a source of any kind, for REST, the pages and the operator's CLI: its location
    checked by its kind (knowledge/ingest/sources.py; FolderNotAllowed says why) unless the operator creates it, and
    its kind's own options (a git source's branch and history depth; a bad value is a FolderNotAllowed with the
    reason). Raises SourceExists for a name taken, and ids.InvalidIdentifier for a name or kind the id scheme cannot
    hold. `sync`: a kind that syncs has its first sync queued at once (after the caller's transaction commits), so a
    new source never sits at 0 documents. `owner`: who created it (insights/gaps.py sends them its gaps)."""
    if kind not in (sources.KINDS if operator else sources.creatable_kinds()):
        raise ids.InvalidIdentifier(f"Unknown source kind {kind!r}; use one of {', '.join(sources.creatable_kinds())}.")
    source_id = ids.source_id(tenant.slug, kind, name)
    if Source.objects.filter(source_id=source_id).exists():
        raise SourceExists("A source with this name already exists.")
    try:
        options = sources.config_for(kind, config or {})
    except (TypeError, ValueError) as exc:
        raise FolderNotAllowed(str(exc)) from exc
    registered = sources.KINDS[kind]
    path = ""
    if registered.check is not None:
        path = (registered.operator_location(location) if operator
                else sources.location_check(kind, location, tenant.slug))  # fmt: skip
    source = source_create(tenant=tenant, kind=kind, name=name, path=path)
    if options or owner is not None:  # whoever creates a source owns its knowledge until an admin names another
        source.config = options or source.config
        source.owner = owner if owner is not None and owner.is_authenticated else None
        source.save(update_fields=["config", "owner"])
    if sync and sources.kind_of(source).syncable:
        source_sync_enqueue(tenant=tenant, source=source, operator=operator, trigger="created")
    source_permissions_schedule(source)
    return source


def source_set_config(*, source: Source, values: dict) -> Source:
    """Change a source's own options (the operator's command line): only the given ones, checked by its kind."""
    try:
        source.config = sources.config_for(source.kind, {**(source.config or {}), **values})
    except (TypeError, ValueError) as exc:
        raise FolderNotAllowed(str(exc)) from exc
    source.save(update_fields=["config"])
    source_permissions_schedule(source)
    return source


def folder_source_create(*, tenant: Tenant, name: str, path: str, kind: str = "folder") -> Source:
    """Create a folder, vault or website source for a web/API user (`source_create_for`)."""
    return source_create_for(tenant=tenant, kind=kind, name=name, location=path)


def git_source_create(*, tenant: Tenant, name: str, location: str, branch: str = "",
                      history_depth: int | None = None, operator: bool = False) -> Source:  # fmt: skip
    """Create a git source: a local repository or a URL git can reach (checked against what this server allows,
    unless the operator's CLI creates it), a branch (blank: the repository's HEAD) and a history depth."""
    return source_create_for(tenant=tenant, kind="git", name=name, location=location, operator=operator,
                             config={"branch": branch, "history_depth": history_depth})  # fmt: skip


def source_capabilities(source: Source) -> dict[str, Any]:
    """What a source's kind allows, for the apps outside knowledge that never read the kinds themselves: whether files
    may be uploaded into it (`accepts_uploads`), whether it is read again by a sync (`syncable`), and its kind in
    words (`label`)."""
    kind = sources.kind_of(source)
    return {"accepts_uploads": kind.accepts_uploads, "syncable": kind.syncable, "label": str(kind.label)}


def upload_enqueue(*, tenant: Tenant, source: Source | None, uploads: list[tuple[str, bytes]],
                   options: IngestOptions = DEFAULT_OPTIONS, writer: list[str] | None = None) -> IngestJob:  # fmt: skip
    """Keep uploaded files (zip archives expanded safely) and queue their ingestion; returns the job. `writer`: the
    principals of a caller who does not see everything (Viewer.principal_list): the job then changes no document
    they cannot see, should one become hidden before it runs. The files are stored first and the job and its file
    list created in one transaction after: when anything fails (a full disk), no job is left queued and no file is
    left on disk (UploadNotStored)."""
    from django.conf import settings
    from django_q.tasks import async_task

    source = source or source_default_get(tenant=tenant)
    if source.tenant_id != tenant.pk:
        raise PermissionError("Sources of another tenant cannot receive uploads here.")
    refusal = sources.upload_refusal(source)
    if refusal:
        raise UploadRefused(refusal)
    budget = settings.RAG_TENANT_QUEUED_BYTES - queued_upload_bytes(tenant=tenant)
    if budget < sum(len(data) for _, data in uploads):
        raise UploadQuotaExceeded(
            f"This tenant already has {max(0, settings.RAG_TENANT_QUEUED_BYTES - budget) // 2**20} MiB of uploads "
            f"waiting to be indexed (the limit is {settings.RAG_TENANT_QUEUED_BYTES // 2**20} MiB); "
            "retry when the running jobs have finished."
        )
    public_id = uuid.uuid4()
    folder = Path(settings.MEDIA_ROOT) / "uploads" / str(tenant.public_id) / str(public_id)
    try:
        keys, skips, errors, stored, listed = _store_uploads(folder, uploads, budget)
        if keys == [] and any(e.get("kind") == "unstored" for e in errors):
            raise UploadNotStored("no file of the upload could be stored: the disk holding uploads is full or "
                                  "not writable")  # fmt: skip
        params = {**options.to_params(), "dir": str(folder), "files": keys, "skips": skips, "errors": errors,
                  "bytes": stored, **({"writer": sorted(writer)} if writer is not None else {})}  # fmt: skip
        with transaction.atomic():
            job = IngestJob.objects.create(tenant=tenant, source=source, kind=IngestJob.Kind.UPLOAD,
                                           public_id=public_id, params=params, files_total=len(listed),
                                           documents_total=len(keys))  # fmt: skip
            JobFile.objects.bulk_create([JobFile(tenant=tenant, job=job, position=n, **row)
                                         for n, row in enumerate(listed)], batch_size=500)  # fmt: skip
    except Exception as exc:  # never a job queued for ever, nor its files on disk
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(exc, UploadNotStored):
            raise
        reference = error_reference()
        logger.exception("Upload to %s could not be stored (ref %s)", source.source_id, reference)
        reason = "the disk is full" if is_storage_full(exc) else "the details were logged"
        raise UploadNotStored(f"it could not be stored ({reason}; ref {reference})") from exc
    transaction.on_commit(
        lambda: async_task("knowledge.tasks.ingest_job_task", job.pk, task_name=f"ingest-{job.public_id}")
    )
    return job


class UploadNotStored(Exception):
    """An upload that could not be kept (a full disk): nothing of it was kept and no job was created."""

    def __str__(self) -> str:
        return f"The upload was not accepted: {self.args[0]}. Nothing of it was kept; send it again later."


class UploadQuotaExceeded(Exception):
    """The tenant's uploads already waiting for the workers reach RAG_TENANT_QUEUED_BYTES."""


class UploadRefused(ValueError):
    """The source is of a kind that takes no upload (its next sync would retire the file); the message says so."""


upload_kinds = sources.upload_kinds  # the kinds an upload may go into (the registry's answer), for the doors


def queued_upload_bytes(*, tenant: Tenant) -> int:
    """Bytes of this tenant's stored uploads whose jobs have not run yet (their files are removed when they end)."""
    waiting = IngestJob.objects.for_tenant(tenant).filter(
        kind=IngestJob.Kind.UPLOAD, state__in=[IngestJob.State.QUEUED, IngestJob.State.RUNNING]
    )
    return sum(int((params or {}).get("bytes") or 0) for params in waiting.values_list("params", flat=True))


def _store_uploads(
    folder: Path, uploads: list[tuple[str, bytes]], budget: int
) -> tuple[list[str], list[dict], list[dict], int, list[dict]]:
    """Write each uploaded file (zip members expanded) under folder; refusals become skips or errors, per file.

    Files that would take the tenant past its queued-bytes budget are refused by name (an archive can
    expand to far more than was sent); returns the keys, skips, errors, the bytes stored, and the job's file list
    (every file sent, in order: JobFile fields)."""
    keys: list[str] = []
    skips: list[dict] = []
    errors: list[dict] = []
    listed: list[dict] = []
    stored = 0
    for name, data in uploads:
        sent = name[:1000]
        try:
            expanded = expand_upload(name, data)
        except UploadRejected as exc:
            errors.append({"key": name, "error": str(exc), "kind": "rejected"})
            listed.append({"key": sent, "status": JobFile.Status.FAILED, "reason": str(exc), "kind": "rejected"})
            continue
        skips.extend({"key": s.key, "reason": s.reason} for s in expanded.skips)
        single = not name.lower().endswith(".zip")
        renamed = {"sent_as": sent, "notice": expanded.renamed[:300]} if single and expanded.renamed else {}
        listed.extend({"key": s.key[:1000], "status": JobFile.Status.SKIPPED, "reason": s.reason, "kind": "skipped",
                       **renamed} for s in expanded.skips)  # fmt: skip
        for key, content in expanded.files:
            problem, kind = _upload_name_problem(key), "rejected"
            if problem is None and key in keys:
                problem = "its name is the same as another file's of this upload once Unicode-normalised"
            if problem is None and stored + len(content) > budget:
                problem = "the tenant's uploads waiting to be indexed would exceed their limit; upload it again later"
            if problem is None:
                try:
                    target = folder / key
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(content)
                except (FileExistsError, NotADirectoryError, IsADirectoryError):
                    problem = (
                        "its path conflicts with another file of the same upload (a file and a folder of one name)"
                    )
                except OSError as exc:  # disk full, permissions: this file is lost, the others go on
                    problem = f"it could not be stored ({exc.strerror or type(exc).__name__})"
                    kind = "unstored"
            if problem:
                errors.append({"key": key[:1000], "error": f"Not ingested: {problem}.", "kind": kind})
                listed.append({"key": key[:1000], "status": JobFile.Status.FAILED, "kind": kind,
                               "reason": f"Not ingested: {problem}.", **renamed})  # fmt: skip
                continue
            keys.append(key)
            listed.append({"key": key[:1000], "status": JobFile.Status.WAITING, **renamed})
            stored += len(content)
    return keys, skips, errors, stored, listed


MAX_NAME_PART_BYTES = 255  # what Linux file systems allow per path component


def _upload_name_problem(key: str) -> str | None:
    """Why an uploaded file's name cannot be stored as given (None when it can)."""
    for part in key.split("/"):
        if len(part.encode("utf-8")) > MAX_NAME_PART_BYTES:
            return f"a part of its name is longer than {MAX_NAME_PART_BYTES} bytes"
    return None


def source_set_tags(*, tenant: Tenant, source: Source, tags: list[str]) -> None:
    """Replace a source's tags; they apply to every document of the source in retrieval filters."""
    wanted = [tag_get_or_create(tenant=tenant, name=name) for name in tags if Tag.normalise(name)]
    source.tags.set(wanted)
    _flag_for_sync(Document.objects.filter(source=source).values_list("pk", flat=True))


def document_set_tags(*, tenant: Tenant, document: Document, tags: list[str]) -> None:
    if document.tenant_id != tenant.pk:
        raise PermissionError("Documents of another tenant cannot be changed here.")
    document.tags.set([tag_get_or_create(tenant=tenant, name=name) for name in tags if Tag.normalise(name)])
    _flag_for_sync([document.pk])


def _points_delete(*, tenant: Tenant, versions: QuerySet[DocumentVersion], source_ids: list[str] | None) -> None:
    """Remove the tenant's points (of these sources, or all) from every collection these versions were embedded in."""
    from inference.embedders import EmbedderIdentity
    from knowledge.index.vectorstore import Scope, get_store

    identities = {
        EmbedderIdentity(p, m, cast(int, d))  # every version with an embedder has its dimensions
        for p, m, d in versions.exclude(embedding_provider="")
        .values_list("embedding_provider", "embedding_model", "embedding_dims").distinct()
    }  # fmt: skip
    for identity in identities:
        get_store().delete(identity, Scope(tenant=str(tenant.public_id), statuses=None, source_ids=source_ids))


def source_delete(*, tenant: Tenant, source: Source) -> None:
    """Delete a source, its documents, chunks and their vectors (vectors first: SQL is the truth)."""
    if source.tenant_id != tenant.pk:
        raise PermissionError("Sources of another tenant cannot be deleted here.")
    versions = DocumentVersion.objects.for_tenant(tenant).filter(document__source=source)
    _points_delete(tenant=tenant, versions=versions, source_ids=[source.source_id])
    # the raw uploaded files go too: "cannot be undone" means it
    for job in source.jobs.filter(kind=IngestJob.Kind.UPLOAD):
        upload_files_remove(job)
    source_schedule_remove(source)
    _kept_outside_remove(source)
    source.delete()


def _kept_outside_remove(source: Source) -> None:
    """What the source's kind keeps outside the database (a git URL's bare clone) goes with the source."""
    forget = sources.kind_of(source).forget
    if forget is not None:
        forget(source)


def tenant_delete(*, tenant: Tenant) -> None:
    """Delete a tenant with everything it owns: its vectors and raw uploads first, then every SQL row."""
    _points_delete(tenant=tenant, versions=DocumentVersion.objects.for_tenant(tenant), source_ids=None)
    uploads = Path(settings.MEDIA_ROOT) / "uploads" / str(tenant.public_id)
    shutil.rmtree(uploads, ignore_errors=True)
    for source in Source.objects.for_tenant(tenant):
        source_schedule_remove(source)  # django-q2's rows are not the tenant's: no cascade reaches them
        _kept_outside_remove(source)
    tenant.delete()  # sources, documents, chunks, jobs, keys, memberships, chats: by cascade


def documents_restore(*, tenant: Tenant, documents: TenantQuerySet[Document], actor: str = "") -> int:
    """Bring retired documents back: their latest retired version becomes active again."""
    now = timezone.now()
    count = 0
    for document in documents.for_tenant(tenant).filter(status=Status.RETIRED):
        version = document.versions.filter(status=Status.RETIRED).order_by("-version").first()
        if version is None:
            continue
        with transaction.atomic():
            DocumentVersion.objects.filter(pk=version.pk).update(status=Status.ACTIVE, status_changed_at=now)
            Chunk.objects.filter(document_version=version).update(status=Status.ACTIVE)
            Document.objects.filter(pk=document.pk).update(
                status=Status.ACTIVE, version=version.version, updated_at=now
            )
            timeline.restored(document, version, now, actor=actor)
            _flag_for_sync([document.pk])
        count += 1
    return count


def ingest_options(
    *, mode: str = "auto", tags: Iterable[str] = (), enrich_model: str = "", directives: str = "",
    critical: bool = False,
) -> IngestOptions:  # fmt: skip
    """The options of an interactive ingest: no model named means basic (mechanical) ingestion."""
    from inference.models import ModelEntry

    enrichment = None
    if enrich_model:
        entry = ModelEntry.objects.filter(name=enrich_model, kind=ModelEntry.Kind.ENRICHMENT).first()
        if entry is None:
            known = ModelEntry.objects.filter(kind=ModelEntry.Kind.ENRICHMENT).values_list("name", flat=True)
            raise ValueError(f"No enrichment model named {enrich_model!r}; the catalog has: "
                             f"{', '.join(sorted(known)) or 'none'}.")  # fmt: skip
        enrichment = EnrichmentRequest(model_path=entry.path, model_name=entry.name, directives=directives.strip())
    return IngestOptions(mode=mode, tags=tuple(tags), critical=critical, enrichment=enrichment)


class LocationRefused(ValueError):
    """An allowed location the operator's page cannot add; the message says why."""


def allowed_location_add(*, kind: str, value: str, operator: str) -> AllowedLocation:
    """Allow every tenant's web and API users to read under a server folder (absolute, existing; stored resolved), a
    git URL prefix or a website prefix (http or https, no credential). Logged with the operator's name."""
    value = value.strip()
    if not value or len(value) > 1000:
        raise LocationRefused("Give a folder or URL prefix of at most 1,000 characters.")
    if kind == AllowedLocation.Kind.FOLDER:
        given = Path(value).expanduser()
        if not given.is_absolute() or not given.is_dir():
            raise LocationRefused(f"{value!r} is not an absolute path to a folder on this server.")
        value = str(given.resolve())
    elif kind in (AllowedLocation.Kind.GIT, AllowedLocation.Kind.WEB):
        parts = urlsplit(value)
        schemes = ("https", "http", "ssh") if kind == AllowedLocation.Kind.GIT else ("https", "http")
        if parts.scheme not in schemes or not parts.hostname or parts.username or parts.password:
            raise LocationRefused(f"{value[:200]!r} is not a {' or '.join(schemes)} URL without a credential.")
    else:
        raise LocationRefused(f"Unknown kind {kind!r}.")
    found, created = AllowedLocation.objects.get_or_create(kind=kind, value=value, defaults={"added_by": operator})
    if created:
        logger.warning("Operator %s allowed %s %s for every tenant", operator, kind, value)
    return found


def allowed_location_remove(*, pk: int, operator: str) -> None:
    found = AllowedLocation.objects.filter(pk=pk).first()
    if found is not None:
        found.delete()
        logger.warning("Operator %s removed the allowed %s %s", operator, found.kind, found.value)


def _one_top_folder(keys: list[str], folder_name: str) -> str:
    """ "hq-policies/" when every file of the archive is inside one folder of the same name as the one it is unpacked
    into (what "compress this folder" makes of hq-policies/): its files land in the drop folder's `hq-policies/`, not
    `hq-policies/hq-policies/`, so the keys and the files' own `supersedes:` stay as they were written. "" otherwise
    (an archive unpacked under another name keeps its folders)."""
    tops = {key.split("/", 1)[0] for key in keys}
    if len(tops) != 1 or not keys or not all("/" in key for key in keys):
        return ""
    top = tops.pop()
    try:
        same = ids.normalise_source_name(top) == folder_name
    except ids.InvalidIdentifier:
        same = False
    return f"{top}/" if same else ""


def drop_folder_fill(*, tenant: Tenant, name: str, upload_name: str, data: bytes) -> tuple[Path, int, list]:
    """A folder sent as a zip archive, unpacked into the tenant's drop folder under `name` (the archive's name when
    blank), so an admin can add it as a folder or vault source with no shell: the upload's own limits apply (zip
    bombs, unsafe paths, links, what cannot be indexed is left out and named). Returns the folder, how many files it
    received, and the skips. Files already there of the same name are replaced; the others stay. An archive of one
    folder is unpacked as that folder (`_one_top_folder`)."""
    if not upload_name.lower().endswith(".zip"):
        raise UploadRejected("Send the folder as a .zip archive.")
    try:
        folder_name = ids.normalise_source_name(name or Path(upload_name).stem)
    except ids.InvalidIdentifier as exc:
        raise UploadRejected(str(exc)) from exc
    expanded = expand_upload(upload_name, data)
    root = drop_folder(tenant.slug)
    target = (root / folder_name).resolve()
    if root not in target.parents:
        raise UploadRejected(f"{name!r} is not a folder name.")
    inside = _one_top_folder([key for key, _content in expanded.files], folder_name)
    for key, content in expanded.files:
        path = (target / key[len(inside) :]).resolve()
        if target not in path.parents:
            continue  # normalised keys never leave it; checked all the same
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return target, len(expanded.files), expanded.skips
