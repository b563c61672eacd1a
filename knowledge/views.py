"""The curation web app for tenant admins (server-rendered, HTMX for the inline parts).

Every view is `tenant_member_required(admin=True)`: the tenant comes from the URL slug and the
user's admin membership; staff members and other tenants' users get 404. Two exceptions: reading a document a
citation names (`document_read`, any member, read only) and the operator's allowed locations (operators only).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core import transport
from core.multipart import raw_name
from inference.catalog import catalog_choices
from inference.models import ModelEntry
from knowledge import ids, locations, reindex, schedules, selectors, services, validity
from knowledge.ingest import sources as source_kinds
from knowledge.ingest.classify import accepted_formats
from knowledge.ingest.uploads import UploadRejected, request_too_large
from knowledge.links import document_links
from knowledge.models import AllowedLocation, Chunk, Document, IngestJob, JobFile, Source, Status
from knowledge.options import IngestOptions
from knowledge.search.bootstrap import bootstrap
from knowledge.search.retrieval import RetrieveFilters, retrieve
from knowledge.shapes import MAX_QUERY_CHARS
from tenants.access import TenantRequest, found_or_404, operator_required, tenant_member_required
from tenants.principals import (
    UnknownPrincipal,
    access_change,
    everyone,
    parse_principal_list,
    principal_names,
    principals_check,
)

admin_required = tenant_member_required(admin=True)


def _is_htmx(request: TenantRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def _tags(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _change_tags(request: TenantRequest, rows: Any) -> None:
    """Apply the inline tag form: `remove` one tag and/or `add` comma-separated tags."""
    if request.POST.get("remove"):
        services.rows_remove_tag(tenant=request.tenant, rows=rows, tag_name=request.POST["remove"])
    for tag in _tags(request.POST.get("add", "")):
        services.rows_add_tag(tenant=request.tenant, rows=rows, tag_name=tag)


def _ingest_options(request: TenantRequest, *, mode: str = "auto") -> IngestOptions:
    enriched = request.POST.get("ingest_mode") == "enriched"
    return services.ingest_options(
        mode=mode,
        tags=_tags(request.POST.get("tags", "")),
        enrich_model=request.POST.get("enrich_model", "") if enriched else "",
        directives=request.POST.get("directives", "") if enriched else "",
        critical=request.POST.get("critical") == "on",
    )


# --- sources -------------------------------------------------------------------------------
@admin_required
@require_http_methods(["GET", "POST"])
def source_list(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    if request.method == "POST":
        kind, name, path = (
            request.POST.get("kind", "upload"),
            request.POST.get("name", ""),
            request.POST.get("path", ""),
        )
        try:
            with transaction.atomic():
                source = services.source_create_for(
                    tenant=tenant, kind=kind, name=name, location=path, sync=True,
                    config={key: request.POST.get(key, "") for key in request.POST if key not in ("kind", "name")},
                    owner=request.user,
                )  # fmt: skip
                services.source_set_tags(tenant=tenant, source=source, tags=_tags(request.POST.get("tags", "")))
            created = _("Created %(source)s.") % {"source": source.source_id}
            syncing = (" " + _("Its first sync is running: the table shows its progress.")
                       if source_kinds.kind_of(source).syncable else "")  # fmt: skip
            messages.success(request, created + syncing)
        except (ids.InvalidIdentifier, services.SourceProblem, services.SourceExists) as exc:
            messages.error(request, str(exc))
        except IntegrityError:
            messages.error(request, _("A source with that name already exists."))
        return redirect("knowledge:source-list", tenant.slug)
    last_jobs = selectors.last_job_by_source(tenant=tenant)
    sources = list(selectors.source_list(viewer=request.viewer))
    upcoming, previous = schedules.next_runs(sources), schedules.last_runs(sources)
    for source in sources:
        source.next_sync_at = upcoming.get(source.pk)  # shown beside its schedule
        source.last_scheduled_at = previous.get(source.pk)
    rows = [(source, last_jobs.get(source.pk), source_kinds.kind_of(source), _options_shown(source),
             _options_editable(source))
            for source in sources]  # fmt: skip
    upgrade = reindex.upgrade_state(tenant)  # the index being rebuilt in the background: how far
    running = any(job is not None and not job.is_finished for _row, job, *_ in rows) or upgrade is not None
    drop = locations.drop_folder(tenant.slug)
    context = {"tenant": tenant, "rows": rows, "syncing": running, "upgrade": upgrade, "drop_folder": drop,
               "drop_entries": locations.drop_entries(drop), "folder_roots": locations.folder_roots(),
               "git_urls": locations.git_prefixes(), "web_prefixes": locations.web_prefixes(),
               "principals": principal_names(tenant), "kinds": source_kinds.offered_kinds(),
               "kind_options": _kind_options()}  # fmt: skip
    return render(request, "knowledge/source_list.html", context)


def _options_shown(source: Source) -> list[tuple[str, Any]]:
    """A source's own options as its row shows them: (label, value), the unset ones left out."""
    described = source_kinds.kind_of(source).config.described()
    return [(entry["label"], source.config[entry["name"]]) for entry in described if source.config.get(entry["name"])]


def _options_editable(source: Source) -> list[dict[str, Any]]:
    """A source's own options with their values, for its row's options form (a people map edited after a sync)."""
    values = source.config or {}
    return [
        {**entry, "value": values.get(entry["name"], "")} for entry in source_kinds.kind_of(source).config.described()
    ]


def _kind_options() -> list[dict[str, Any]]:
    """Every kind's own options once each, for the new-source form (a name two kinds share is one input)."""
    shown: dict[str, dict[str, Any]] = {}
    for kind, options in source_kinds.config_options().items():
        for entry in options:
            shown.setdefault(entry["name"], {**entry, "kinds": []})["kinds"].append(kind)
    return list(shown.values())


@admin_required
@require_POST
def source_drop(request: TenantRequest) -> HttpResponse:
    """A folder sent as a zip archive into the workspace's drop folder (then added as a source like any there)."""
    too_large = request_too_large(request.META)
    if too_large:
        messages.error(request, too_large)
        return redirect("knowledge:source-list", request.tenant.slug)
    sent = request.FILES.get("archive")
    if sent is None:
        messages.error(request, _("Choose a .zip archive of the folder first."))
        return redirect("knowledge:source-list", request.tenant.slug)
    try:
        folder, count, skips = services.drop_folder_fill(tenant=request.tenant, name=request.POST.get("name", ""),
                                                          upload_name=raw_name(sent), data=sent.read())  # fmt: skip
    except (UploadRejected, OSError) as exc:  # a full disk says so; what was unpacked stays, and is listed
        messages.error(
            request,
            str(exc)
            if isinstance(exc, UploadRejected)
            else _("The folder could not be unpacked (%(reason)s).") % {"reason": exc.strerror or type(exc).__name__},
        )
        return redirect("knowledge:source-list", request.tenant.slug)
    left = " " + _("%(count)d file(s) left out (they cannot be indexed).") % {"count": len(skips)} if skips else ""
    unpacked = _("Unpacked %(count)d file(s) into %(folder)s in the drop folder.") % {
        "count": count,
        "folder": folder.name,
    }
    add = _("Add it below: kind Server folder or Obsidian vault, path %(folder)s.") % {"folder": folder.name}
    messages.success(request, f"{unpacked}{left} {add}")
    return redirect("knowledge:source-list", request.tenant.slug)


def _source(request: TenantRequest, source_id: str) -> Source:
    return found_or_404(selectors.source_get(viewer=request.viewer, public_id=source_id))


@admin_required
@require_POST
def source_schedule(request: TenantRequest, source_id: str) -> HttpResponse:
    """Sync a folder source every N minutes (empty: only on request)."""
    source = _source(request, source_id)
    raw = request.POST.get("sync_every_minutes", "").strip()
    try:
        minutes = int(raw) if raw else None
    except ValueError:
        messages.error(request, _("%(value)r is not a number of minutes.") % {"value": raw})
        return redirect("knowledge:source-list", request.tenant.slug)
    try:
        schedules.source_set_sync_every(tenant=request.tenant, source=source, minutes=minutes)
    except (schedules.ScheduleRefused, services.SourceProblem) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            _("%(source)s syncs every %(minutes)d minute(s).") % {"source": source.label, "minutes": minutes}
            if minutes
            else _("%(source)s syncs only on request.") % {"source": source.label},
        )
    return redirect("knowledge:source-list", request.tenant.slug)


@admin_required
@require_POST
def source_tags(request: TenantRequest, source_id: str) -> HttpResponse:
    source = _source(request, source_id)
    services.source_set_tags(tenant=request.tenant, source=source, tags=_tags(request.POST.get("tags", "")))
    return render(request, "knowledge/partials/_source_tags.html", {"tenant": request.tenant, "source": source})


@admin_required
@require_POST
def source_access(request: TenantRequest, source_id: str) -> HttpResponse:
    """Who sees a source's documents (those without their own list): a payload update, never a re-embedding."""
    source = _source(request, source_id)
    context: dict[str, Any] = {"tenant": request.tenant, "source": source}
    try:
        wanted = parse_principal_list(request.POST.get("access", "")) or ["tenant"]
        services.source_set_access(tenant=request.tenant, source=source, access=wanted,
                                   actor=request.user.get_username())  # fmt: skip
    except UnknownPrincipal as exc:
        source.refresh_from_db()
        context["access_error"] = str(exc)
    context["access_pending"] = services.access_pending_count(tenant=request.tenant, source=source)
    return render(request, "knowledge/partials/_source_access.html", context, status=400 if "access_error" in context
                  else 200)  # fmt: skip


def _document_access_context(request: TenantRequest, document: Document) -> dict[str, Any]:
    """The document's access section: its list, and who that is today (members by name, keys by prefix)."""
    members, api_keys = everyone(request.tenant)
    readers = [m.user.get_username() for m, viewer in members  # admins see everything, as the page says
               if not m.is_admin and viewer.sees(document.reader_list)]  # fmt: skip
    keys = [f"{k.prefix}… ({', '.join(k.acts_for)})" for k, viewer in api_keys if viewer.sees(document.reader_list)]
    return {"tenant": request.tenant, "document": document, "readers": readers, "keys": keys,
            "principals": principal_names(request.tenant)}  # fmt: skip


def _access_preview(request: TenantRequest, before: list[str], after: list[str]) -> HttpResponse:
    """Who gains and who loses sight before an access change is saved (tenants.principals.access_change)."""
    context: dict[str, Any] = {"error": ""}
    try:
        wanted = principals_check(tenant=request.tenant, principals=after)
        context["gains"], context["loses"] = access_change(request.tenant, before, wanted)
    except UnknownPrincipal as exc:
        context["error"] = str(exc)
    return render(request, "knowledge/partials/_access_preview.html", context)


@admin_required
@require_POST
def source_access_preview(request: TenantRequest, source_id: str) -> HttpResponse:
    source = _source(request, source_id)
    return _access_preview(
        request, list(source.access), parse_principal_list(request.POST.get("access", "")) or ["tenant"]
    )


@admin_required
@require_POST
def document_access_preview(request: TenantRequest, document_id: str) -> HttpResponse:
    document = _document(request, document_id)
    wanted = parse_principal_list(request.POST.get("access", "")) or list(document.source.access)  # empty: inherit
    return _access_preview(request, document.effective_access, wanted)


@admin_required
@require_POST
def document_access(request: TenantRequest, document_id: str) -> HttpResponse:
    """The document's own access list (replacing its source's), or back to inheriting it."""
    document = _document(request, document_id)
    wanted = None if request.POST.get("inherit") else parse_principal_list(request.POST.get("access", ""))
    error = ""
    try:
        services.document_set_access(tenant=request.tenant, document=document, access=wanted or None,
                                     actor=request.user.get_username())  # fmt: skip
    except UnknownPrincipal as exc:
        error = str(exc)
    document = _document(request, document_id)
    context = {**_document_access_context(request, document), "access_error": error}
    return render(request, "knowledge/partials/_document_access.html", context, status=400 if error else 200)


@admin_required
@require_http_methods(["GET", "POST"])
def source_delete(request: TenantRequest, source_id: str) -> HttpResponse:
    source = _source(request, source_id)
    if request.method == "POST":
        _deleted, problem = transport.attempt(services.source_delete, tenant=request.tenant, source=source)
        if problem is not None:
            messages.error(request, problem.detail)
            return redirect("knowledge:source-list", request.tenant.slug)
        messages.success(
            request, _("Deleted %(source)s with its documents and vectors.") % {"source": source.source_id}
        )
        return redirect("knowledge:source-list", request.tenant.slug)
    context = {"tenant": request.tenant, "source": source, "documents": source.documents.count()}
    return render(request, "knowledge/source_confirm_delete.html", context)


@admin_required
@require_POST
def source_sync(request: TenantRequest, source_id: str) -> HttpResponse:
    source = _source(request, source_id)
    try:  # the service checks the folder against the allowed roots
        job = services.source_sync_enqueue(
            tenant=request.tenant, source=source, options=_ingest_options(request, mode=source.default_mode)
        )
    except (services.SourceProblem, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect("knowledge:source-list", request.tenant.slug)
    return redirect("knowledge:job-detail", request.tenant.slug, job.public_id)


@admin_required
@require_POST
def source_options(request: TenantRequest, source_id: str) -> HttpResponse:
    """Change a source's own options (a connector's people map, its permission interval): checked by its kind, an
    emptied field cleared; a new permission interval reschedules its permission sync."""
    source = _source(request, source_id)
    names = [entry["name"] for entry in source_kinds.kind_of(source).config.described()]
    try:
        services.source_set_config(source=source, values={name: request.POST.get(name, "") for name in names})
    except services.SourceProblem as exc:
        messages.error(request, str(exc))
    else:
        saved = _("The options of %(source)s are saved; the next sync reads with them.")
        messages.success(request, saved % {"source": source.label})
    return redirect("knowledge:source-list", request.tenant.slug)


@admin_required
@require_POST
def source_rights(request: TenantRequest, source_id: str) -> HttpResponse:
    """Sync a source's read rights now (a system with rights of its own), without waiting for its schedule."""
    source = _source(request, source_id)
    try:
        job = services.source_permissions_enqueue(tenant=request.tenant, source=source)
    except services.SourceProblem as exc:
        messages.error(request, str(exc))
        return redirect("knowledge:source-list", request.tenant.slug)
    return redirect("knowledge:job-detail", request.tenant.slug, job.public_id)


# --- upload and jobs -----------------------------------------------------------------------
@admin_required
@require_http_methods(["GET", "POST"])
def upload(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    sources = selectors.upload_sources(viewer=request.viewer, kinds=services.upload_kinds())
    if request.method == "POST":
        too_large = request_too_large(request.META)
        if too_large:
            messages.error(request, too_large)
            return redirect("knowledge:upload", tenant.slug)
        files = request.FILES.getlist("files")
        source_id = request.POST.get("source") or ""
        # Any source the admin sees: one of a kind that takes no upload is refused below, in words, not as a 404.
        source = selectors.source_list(viewer=request.viewer).public_or_404(source_id) if source_id else None
        if not files:
            messages.error(request, _("Choose or drop at least one file."))
            return redirect("knowledge:upload", tenant.slug)
        too_big = [str(f.name) for f in files if (f.size or 0) > settings.RAG_MAX_UPLOAD_BYTES]
        if too_big:
            messages.error(request, _("Larger than the upload limit: %(files)s.") % {"files": ", ".join(too_big)})
            return redirect("knowledge:upload", tenant.slug)
        try:
            options = _ingest_options(request)
            job = services.upload_enqueue(
                tenant=tenant, source=source, uploads=[(raw_name(f), f.read()) for f in files], options=options
            )  # fmt: skip
        except (UploadRejected, services.UploadQuotaExceeded, services.UploadNotStored, ValueError) as exc:
            messages.error(request, str(exc))
            return redirect("knowledge:upload", tenant.slug)
        return redirect("knowledge:job-detail", tenant.slug, job.public_id)
    context = {
        "tenant": tenant,
        "sources": sources,
        "models": catalog_choices(ModelEntry.Kind.ENRICHMENT),
        "max_mb": settings.RAG_MAX_UPLOAD_BYTES // 2**20,
        "formats": accepted_formats(),
    }
    return render(request, "knowledge/upload.html", context)


def _job(request: TenantRequest, job_id: str) -> IngestJob:
    return found_or_404(selectors.job_get(viewer=request.viewer, public_id=job_id))


JOB_FILES_SHOWN = 300


def _job_context(request: TenantRequest, job: IngestJob) -> dict[str, Any]:
    total = job.files_total or job.documents_total or 0
    done = job.files_done if job.files_total else job.documents_done
    percent = 100 if job.is_finished else (int(100 * done / total) if total else 0)
    # Every file skipped or failed: a warning, with the reasons open, never a green "Succeeded — 0 of 0".
    nothing = job.is_finished and not (job.added or job.updated or job.unchanged) and bool(job.skipped or job.failed)
    files = job.files.select_related("document")
    retryable = job.files.filter(status=JobFile.Status.FAILED, kind__in=services.RETRYABLE_KINDS).count()
    unreadable = job.files.filter(status=JobFile.Status.FAILED, kind=JobFile.UNREADABLE).count()
    return {"tenant": request.tenant, "job": job, "percent": percent, "nothing_ingested": nothing, "files_done": done,
            "files_total": total, "files": files[:JOB_FILES_SHOWN], "files_listed": files.count(),
            "files_shown": JOB_FILES_SHOWN, "retryable": retryable if job.is_finished else 0,
            "unreadable": unreadable if job.is_finished else 0,
            "renamed": [f for f in files.exclude(notice="")[:50]]}  # fmt: skip


@admin_required
@require_GET
def job_detail(request: TenantRequest, job_id: str) -> HttpResponse:
    return render(request, "knowledge/job_detail.html", _job_context(request, _job(request, job_id)))


@admin_required
@require_POST
def job_retry(request: TenantRequest, job_id: str) -> HttpResponse:
    """Retry a finished job: an upload's failed files as a new job, a folder sync as a new sync of what is missing."""
    job = _job(request, job_id)
    if not job.is_finished:
        messages.error(request, _("The job is still running."))
        return redirect("knowledge:job-detail", request.tenant.slug, job.public_id)
    try:
        retried = services.job_retry(tenant=request.tenant, job=job)
    except (services.UploadFilesGone, services.SourceProblem, services.UploadQuotaExceeded,
            services.UploadNotStored) as exc:  # fmt: skip
        messages.error(request, str(exc))
        return redirect("knowledge:job-detail", request.tenant.slug, job.public_id)
    return redirect("knowledge:job-detail", request.tenant.slug, retried.public_id)


@admin_required
@require_GET
def job_progress(request: TenantRequest, job_id: str) -> HttpResponse:
    job = _job(request, job_id)
    response = render(request, "knowledge/partials/_job_progress.html", _job_context(request, job))
    if job.is_finished:
        response.status_code = 286  # htmx: stop polling
    return response


# --- documents -----------------------------------------------------------------------------
@admin_required
@require_GET
def document_list(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    params = request.GET
    documents = selectors.document_list(viewer=request.viewer, filters=selectors.DocumentFilters.from_params(params))
    page = Paginator(documents, 50).get_page(params.get("page"))
    clock = validity.Clock.for_read(tenant)
    for document in page:  # a live document not in force today says so beside "Active"
        if document.status == Status.ACTIVE:
            label = validity.in_force_label(clock.freshness(document, sees=request.viewer.sees))
            document.not_in_force = label  # type: ignore[attr-defined]  # for the template
    context = {
        "tenant": tenant,
        "page": page,
        "sources": selectors.source_list(viewer=request.viewer),
        "tags": selectors.tag_list(tenant=tenant),
        "statuses": Status.choices,
        "params": params,
    }
    template = "knowledge/partials/_document_rows.html" if _is_htmx(request) else "knowledge/document_list.html"
    return render(request, template, context)


def _document(request: TenantRequest, document_id: str) -> Document:
    return found_or_404(selectors.document_get(viewer=request.viewer, document_id=document_id))


@admin_required
@require_GET
def document_detail(request: TenantRequest, document_id: str) -> HttpResponse:
    document = _document(request, document_id)
    versions = selectors.visible_versions(request.viewer, document)
    current = selectors.version_get(viewer=request.viewer, document=document, version=document.version)
    chunks = (
        selectors.version_chunks(viewer=request.viewer, version=current).prefetch_related("tags") if current else []
    )
    context = {
        **_document_access_context(request, document),
        **_validity_context(request, document),
        "versions": versions,
        "with_commits": any((version.commit or {}).get("sha") for version in versions),
        "current": current,
        "chunks": chunks,
        **document_links(viewer=request.viewer, document=document),
    }
    return render(request, "knowledge/document_detail.html", context)


def _validity_context(request: TenantRequest, document: Document) -> dict[str, Any]:
    clock = validity.Clock.for_read(request.tenant)
    freshness = clock.freshness(document, sees=request.viewer.sees)
    label = validity.in_force_label(freshness) if document.status == Status.ACTIVE else ""
    document.not_in_force = label  # type: ignore[attr-defined]  # for the template
    return {
        "tenant": request.tenant,
        "document": document,
        "freshness": freshness,
        "can_edit": request.membership.is_admin,
    }


@admin_required
@require_POST
def document_validity(request: TenantRequest, document_id: str) -> HttpResponse:
    """Validity dates, review date and `supersedes` from the document page; a bad value answers 400 with the reason."""
    document = _document(request, document_id)
    error = ""
    try:
        changes: dict[str, Any] = {
            name: validity.parse_date(request.POST.get(name, ""), field=name) for name in validity.FIELDS
        }
        changes["supersedes"] = request.POST.get("supersedes", "").strip() or None
        if changes["supersedes"] and document.supersedes and changes["supersedes"] == document.supersedes.document_key:
            del changes["supersedes"]  # unchanged
        services.document_set_validity(tenant=request.tenant, document=document, changes=changes,
                                       actor=request.user.get_username(), viewer=request.viewer)  # fmt: skip
    except validity.InvalidValidity as exc:
        error = str(exc)
    context = {**_validity_context(request, _document(request, document_id)), "validity_error": error}
    return render(request, "knowledge/partials/_document_validity.html", context, status=400 if error else 200)


def _curation_fragment(request: TenantRequest, document_id: str) -> HttpResponse:
    """The document's critical/tags block, re-read after a change (HTMX swaps it in place)."""
    context = {"tenant": request.tenant, "document": _document(request, document_id)}
    return render(request, "knowledge/partials/_document_curation.html", context)


@admin_required
@require_POST
def document_critical(request: TenantRequest, document_id: str) -> HttpResponse:
    document = _document(request, document_id)
    services.documents_set_critical(
        tenant=request.tenant,
        documents=selectors.document_rows(viewer=request.viewer, document=document),
        critical=not document.critical,
    )
    return _curation_fragment(request, document_id)


@admin_required
@require_POST
def document_tags(request: TenantRequest, document_id: str) -> HttpResponse:
    document = _document(request, document_id)
    _change_tags(request, selectors.document_rows(viewer=request.viewer, document=document))
    return _curation_fragment(request, document_id)


@admin_required
@require_POST
def document_status(request: TenantRequest, document_id: str) -> HttpResponse:
    document = _document(request, document_id)
    rows = selectors.document_rows(viewer=request.viewer, document=document)
    if request.POST.get("action") == "restore":
        services.documents_restore(tenant=request.tenant, documents=rows, actor=request.user.get_username())
        messages.success(request, _("Restored: readers see this document again."))
    else:
        services.documents_retire(tenant=request.tenant, documents=rows, actor=request.user.get_username())
        messages.success(request, _("Retired: readers no longer see this document; its history is kept."))
    return redirect("knowledge:document-detail", request.tenant.slug, document.public_id)


def _chunk(request: TenantRequest, chunk_id: str) -> Chunk:
    return found_or_404(selectors.chunk_get(viewer=request.viewer, public_id=chunk_id))


@admin_required
@require_POST
def chunk_critical(request: TenantRequest, chunk_id: str) -> HttpResponse:
    chunk = _chunk(request, chunk_id)
    services.chunks_set_critical(
        tenant=request.tenant,
        chunks=selectors.chunk_rows(viewer=request.viewer, chunk=chunk),
        critical=not chunk.critical,
    )
    return render(
        request, "knowledge/partials/_chunk.html", {"tenant": request.tenant, "chunk": _chunk(request, chunk_id)}
    )


@admin_required
@require_POST
def chunk_tags(request: TenantRequest, chunk_id: str) -> HttpResponse:
    chunk = _chunk(request, chunk_id)
    _change_tags(request, selectors.chunk_rows(viewer=request.viewer, chunk=chunk))
    return render(
        request, "knowledge/partials/_chunk.html", {"tenant": request.tenant, "chunk": _chunk(request, chunk_id)}
    )


# --- search preview ------------------------------------------------------------------------
@admin_required
@require_GET
def search_preview(request: TenantRequest) -> HttpResponse:
    query = (request.GET.get("q") or "").strip()[:MAX_QUERY_CHARS]
    context: dict[str, Any] = {"tenant": request.tenant, "query": query, "hits": [], "error": "", "pack": None}
    if query:
        filters = RetrieveFilters(mode=request.GET.get("mode") or "auto")
        hits, problem = transport.attempt(retrieve, viewer=request.viewer, query=query, top_k=10, filters=filters,
                                          specific=request.GET.get("specific") == "1")  # fmt: skip
        context["hits"], context["error"] = hits or [], problem.detail if problem else ""
    if request.GET.get("bootstrap") == "1":
        context["pack"] = bootstrap(viewer=request.viewer, intent=query)
    template = "knowledge/partials/_search_results.html" if _is_htmx(request) else "knowledge/search.html"
    return render(request, template, context)


# --- the operator's allowed locations (server-wide) --------------------------------------------
@operator_required
@require_http_methods(["GET", "POST"])
def allowed_locations(request: HttpRequest) -> HttpResponse:
    """Operators (superusers) allow every workspace to read under a server folder, a git URL prefix or a website
    prefix, beside what the settings name; anyone else gets 404. Each workspace's drop folder needs nothing here."""
    operator = request.user.get_username()
    if request.method == "POST":
        if request.POST.get("remove"):
            if request.POST["remove"].isdigit():
                services.allowed_location_remove(pk=int(request.POST["remove"]), operator=operator)
            messages.success(request, _("Removed."))
        else:
            try:
                kind, value = request.POST.get("kind", ""), request.POST.get("value", "")
                added = services.allowed_location_add(kind=kind, value=value, operator=operator)
                messages.success(request, _("Allowed for every workspace: %(value)s.") % {"value": added.value})
            except services.LocationRefused as exc:
                messages.error(request, str(exc))
        return redirect("knowledge:allowed-locations")
    context = {"added": selectors.allowed_locations(), "kinds": AllowedLocation.Kind.choices,
               "settings_roots": settings.RAG_ALLOWED_FOLDER_ROOTS, "settings_git": settings.RAG_ALLOWED_GIT_URLS,
               "settings_web": settings.RAG_ALLOWED_WEB_PREFIXES, "drop_dir": settings.RAG_DROP_DIR}  # fmt: skip
    return render(request, "knowledge/allowed_locations.html", context)


# --- reading a document (staff and admins) ---------------------------------------------------------------------
member_required = tenant_member_required(admin=False)


@member_required
@require_GET
def document_read(request: TenantRequest, document_id: str) -> HttpResponse:
    """Any member reads a document they may see, as the answer that cites it read it (its document_id or public id), the
    cited `chunk` highlighted and scrolled to, the `version` cited (else the current one), with that version's
    window and the document's freshness. A document hidden from the reader is a 404, like a missing one. Read only:
    the curation view stays the admins'."""
    document = _document(request, document_id)
    wanted = request.GET.get("version", "")
    number = int(wanted) if wanted.isdigit() else document.version  # a version hidden from the reader: the current
    version = selectors.version_get(viewer=request.viewer, document=document, version=number)
    version = version or selectors.version_get(viewer=request.viewer, document=document, version=document.version)
    if version is None:
        raise Http404("This document has no readable version.")
    context = {
        **_validity_context(request, document),
        "version": version,
        "versions": selectors.visible_versions(request.viewer, document).count(),
        "blocks": selectors.reading_blocks(selectors.version_chunks(viewer=request.viewer, version=version)),
        "cited": request.GET.get("chunk", ""),
        "chat_url": reverse("chat:chat-page", args=[request.tenant.slug]),
    }
    return render(request, "knowledge/document_read.html", context)
