"""The per-tenant REST API: retrieve, bootstrap, sources, uploads, jobs, documents, Dify retrieval.

Every view derives from TenantApiView, so the tenant comes from the URL slug checked against the
API key (or the session user's membership); another tenant's objects answer 404 like missing ones.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import FormParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import transport
from core.multipart import RawNameMultiPartParser, raw_name
from core.parsers import SafeJSONParser
from knowledge import changes, ids, selectors, services, validity
from knowledge.ids import OCR_LANGUAGES_RE
from knowledge.ingest import sources as source_kinds
from knowledge.ingest.uploads import request_too_large
from knowledge.models import Document, IngestJob, Source
from knowledge.options import IngestOptions
from knowledge.schedules import MAX_MINUTES, ScheduleRefused, source_set_sync_every
from knowledge.search.retrieval import MODES, RetrieveFilters, retrieve
from knowledge.shapes import (
    MAX_QUERY_CHARS,
    DocumentDetailOutput,
    DocumentOutput,
    DocumentPageOutput,
    JobOutput,
    SourceOutput,
    hit_location,
    plain_errors,
    run_retrieval,
)
from tenants.access import TenantApiView, found_or_404
from tenants.authentication import BearerApiKeyAuthentication
from tenants.keys import presented
from tenants.models import ApiKey
from tenants.principals import UnknownPrincipal, principals_check, viewer_for

logger = logging.getLogger(__name__)

QUOTA_RETRY_SECONDS = 60  # Retry-After when a tenant's queued uploads are at their limit


MAX_OFFSET = 10**9  # beyond any real table; larger offsets overflow the database's integer


# --- sources -------------------------------------------------------------------------------


def _source(view: TenantApiView, source_id: str) -> Source:
    return found_or_404(selectors.source_get(viewer=view.viewer, public_id=source_id))


SOURCE_WRITE_REFUSED = (
    "This source holds documents you may not see: only someone who sees all of it may upload to it, sync, change "
    "or delete it."
)


def _writable_source(view: TenantApiView, source: Source) -> Source:
    """A write to the whole source (a new version of any of its documents, a sync, its settings, its deletion)
    needs a caller who sees every document in it; one message for every refusal, naming no document."""
    if selectors.source_hides_documents(viewer=view.viewer, source=source):
        raise exceptions.PermissionDenied(SOURCE_WRITE_REFUSED)
    return source


def _access_context(view: TenantApiView) -> dict[str, bool]:
    """Access lists are shown to whoever may change them: an admin's session or a write key acting for all."""
    key = view.request.auth
    if isinstance(key, ApiKey):
        return {"show_access": key.scope == ApiKey.Scope.WRITE and key.acts_for_all}
    return {"show_access": view.membership is not None and view.membership.is_admin}


class ReviewEveryField(serializers.IntegerField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, allow_null=True, min_value=1, max_value=3650, help_text="A document whose "
                         "review date is not stated is due this many days after its content changed (null: never).",
                         **kwargs)  # fmt: skip


class SyncEveryField(serializers.IntegerField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, allow_null=True, min_value=1, max_value=MAX_MINUTES, help_text="Sync this "
                         "folder, vault or git source every this many minutes, by the worker's scheduler (null: only "
                         "on request).",
                         **kwargs)  # fmt: skip


class AccessField(serializers.ListField):
    """An access list: principals such as "tenant", "group:hr", "user:bob"."""

    child = serializers.CharField(max_length=200)


def _principals(view: TenantApiView, access: list[str]) -> list[str]:
    try:
        return principals_check(tenant=view.tenant, principals=access)
    except UnknownPrincipal as exc:
        raise serializers.ValidationError({"access": [str(exc)]}) from exc


def _top_level(data: Any) -> dict[str, Any]:
    """A kind's options given at the request's top level (`branch`, as before they had a `config` of their own)."""
    names = {entry["name"] for options in source_kinds.config_options().values() for entry in options}
    return {name: data[name] for name in names if hasattr(data, "get") and data.get(name) not in (None, "")}


class SourceListApi(TenantApiView):
    @extend_schema_serializer(component_name="SourceCreateInput")
    class InputSerializer(serializers.Serializer):
        kind = serializers.CharField(
            max_length=20,
            help_text="one of the kinds a user may create (the registry, knowledge/ingest/sources.py): "
            f"{', '.join(source_kinds.creatable_kinds())}",
        )
        name = serializers.CharField(max_length=200)
        path = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="",
                                     help_text="folder and obsidian: a folder inside the server's allowed roots; git: "
                                     "a repository there, or a URL under RAG_ALLOWED_GIT_URLS; website: a start URL "
                                     "or sitemap.xml under RAG_ALLOWED_WEB_PREFIXES")  # fmt: skip
        config = serializers.DictField(
            required=False,
            default=dict,
            help_text="the kind's own options, such as git's branch and history_depth (also accepted at the top level)",
        )

        def validate_kind(self, value: str) -> str:
            if value not in source_kinds.creatable_kinds():
                raise serializers.ValidationError(f"use one of {', '.join(source_kinds.creatable_kinds())}")
            return value

        sync_every_minutes = SyncEveryField()
        default_mode = serializers.ChoiceField(choices=MODES, default="auto")
        ocr_languages = serializers.RegexField(OCR_LANGUAGES_RE, max_length=60, default="spa+eng")
        tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=50)
        access = AccessField(required=False, max_length=100)
        review_every_days = ReviewEveryField()
        sync = serializers.BooleanField(default=True, help_text="folder, obsidian, git, website: queue the first "
                                        "sync at once (its job's id is the reply's sync_job_id)")  # fmt: skip

    @extend_schema(responses={200: SourceOutput(many=True)})
    def get(self, request: Request, tenant_slug: str) -> Response:
        sources = selectors.source_list(viewer=self.viewer)
        return Response(SourceOutput(sources, many=True, context=_access_context(self)).data)

    @extend_schema(request=InputSerializer, responses={201: SourceOutput})
    def post(self, request: Request, tenant_slug: str) -> Response:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        if "access" in data:
            self.require_access_admin(request)
            data["access"] = _principals(self, data["access"])
        try:
            with transaction.atomic():
                source = services.source_create_for(
                    tenant=self.tenant, kind=data["kind"], name=data["name"], location=data["path"], sync=data["sync"],
                    config={**_top_level(request.data), **data["config"]}, owner=request.user,
                )  # fmt: skip
                source.default_mode, source.ocr_languages = data["default_mode"], data["ocr_languages"]
                source.save(update_fields=["default_mode", "ocr_languages"])
                if data.get("review_every_days"):
                    services.source_set_review_every(tenant=self.tenant, source=source, days=data["review_every_days"])
                for tag in data.get("tags") or []:
                    source.tags.add(services.tag_get_or_create(tenant=self.tenant, name=tag))
                if "access" in data:
                    services.source_set_access(tenant=self.tenant, source=source, access=data["access"],
                                               actor=self.actor(request))  # fmt: skip
                if data.get("sync_every_minutes"):
                    source_set_sync_every(tenant=self.tenant, source=source, minutes=data["sync_every_minutes"])
        except ScheduleRefused as exc:
            raise serializers.ValidationError({"sync_every_minutes": [str(exc)]}) from exc
        except (ids.InvalidIdentifier, services.SourceProblem, services.SourceExists) as exc:
            field = "path" if isinstance(exc, services.SourceProblem) else "name"
            raise serializers.ValidationError({field: [str(exc)]}) from exc
        except IntegrityError as exc:  # another request created the same name a moment before
            raise serializers.ValidationError({"name": ["A source with this name already exists."]}) from exc
        first = selectors.last_job_by_source(tenant=self.tenant).get(source.pk)
        shown = {**SourceOutput(source, context=_access_context(self)).data,
                 "sync_job_id": first.public_id if first is not None else None}  # fmt: skip
        return Response(shown, status=status.HTTP_201_CREATED)


class SourceDetailApi(TenantApiView):
    @extend_schema_serializer(component_name="SourceUpdateInput")
    class UpdateSerializer(serializers.Serializer):
        default_mode = serializers.ChoiceField(choices=MODES, required=False)
        ocr_languages = serializers.RegexField(OCR_LANGUAGES_RE, max_length=60, required=False)
        tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=50)
        review_every_days = ReviewEveryField()
        sync_every_minutes = SyncEveryField()
        access = AccessField(required=False, max_length=100, help_text='Who sees its documents: ["tenant"], '
                             '["group:hr", "user:bob"]. An admin session or a write key acting for all.')  # fmt: skip

    @extend_schema(responses={200: SourceOutput})
    def get(self, request: Request, tenant_slug: str, source_id: str) -> Response:
        return Response(SourceOutput(_source(self, source_id), context=_access_context(self)).data)

    @extend_schema(request=UpdateSerializer, responses={200: SourceOutput})
    def patch(self, request: Request, tenant_slug: str, source_id: str) -> Response:
        source = _writable_source(self, _source(self, source_id))
        incoming = self.UpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        if "access" in data:
            self.require_access_admin(request)
            access = _principals(self, data["access"])
        if "review_every_days" in data:
            services.source_set_review_every(tenant=self.tenant, source=source, days=data["review_every_days"])
        if "sync_every_minutes" in data:
            try:
                source_set_sync_every(tenant=self.tenant, source=source, minutes=data["sync_every_minutes"])
            except (ScheduleRefused, services.SourceProblem) as exc:
                raise serializers.ValidationError({"sync_every_minutes": [str(exc)]}) from exc
        for field in ("default_mode", "ocr_languages"):  # scanned pages are read with the new languages next sync
            if field in data:
                setattr(source, field, data[field])
                source.save(update_fields=[field])
        if "tags" in data:
            services.source_set_tags(tenant=self.tenant, source=source, tags=data["tags"])
        if "access" in data:
            services.source_set_access(tenant=self.tenant, source=source, access=access, actor=self.actor(request))
        return Response(SourceOutput(_source(self, source_id), context=_access_context(self)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant_slug: str, source_id: str) -> Response:
        source = _writable_source(self, _source(self, source_id))
        run_retrieval(services.source_delete, tenant=self.tenant, source=source)  # a busy store: 503
        return Response(status=status.HTTP_204_NO_CONTENT)


ENRICH_MODEL_HELP = (
    "an enrichment model of the catalog, by name (the upload page lists them): it writes each document's title, "
    "summary, topics and key points, which rank documents and are never cited"
)


def _flag(value: object) -> bool:
    return str(value or "").strip().lower() in ("1", "true", "on", "yes")


class SourceUploadApi(TenantApiView):
    parser_classes = [RawNameMultiPartParser, FormParser]

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
                    "mode": {"type": "string", "enum": list(MODES)},
                    "tags": {"type": "string", "description": "comma-separated tags for every document"},
                    "enrich_model": {"type": "string", "description": ENRICH_MODEL_HELP},
                    "directives": {"type": "string", "description": "the administrator's directives to that model"},
                    "critical": {"type": "boolean"},
                },
            }
        },
        responses={202: JobOutput},
    )  # noqa: E501
    def post(self, request: Request, tenant_slug: str, source_id: str) -> Response:
        source = _writable_source(self, _source(self, source_id))
        too_large = request_too_large(request.META)
        if too_large:
            return Response({"detail": too_large}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        files = request.FILES.getlist("files") or request.FILES.getlist("file")
        if not files:
            raise serializers.ValidationError({"files": ["Attach one or more files (field name 'files')."]})
        too_big = [f.name for f in files if f.size > settings.RAG_MAX_UPLOAD_BYTES]
        if too_big:
            raise serializers.ValidationError(
                {
                    "files": [
                        f"{name} is larger than the upload limit ({settings.RAG_MAX_UPLOAD_BYTES // 2**20} MiB)."
                        for name in too_big
                    ]
                }
            )
        form: Any = request.data  # multipart: a QueryDict
        mode = form.get("mode", "auto")
        if mode not in MODES:
            raise serializers.ValidationError({"mode": [f"Use one of {', '.join(MODES)}."]})
        tags = [t.strip() for t in str(form.get("tags", "")).split(",") if t.strip()]
        try:  # the upload page's options: a model reads each document (title, summary, topics), critical marks
            options = services.ingest_options(
                mode=mode, tags=tags, enrich_model=str(form.get("enrich_model", "")),
                directives=str(form.get("directives", "")), critical=_flag(form.get("critical")),
            )  # fmt: skip
        except ValueError as exc:
            raise serializers.ValidationError({"enrich_model": [str(exc)]}) from exc
        uploads = [(raw_name(f), f.read()) for f in files]  # as sent: a renamed file is said so
        try:
            job = services.upload_enqueue(tenant=self.tenant, source=source, uploads=uploads, options=options,
                                          writer=self.viewer.principal_list)  # fmt: skip
        except services.UploadRefused as exc:
            raise serializers.ValidationError({"source": [str(exc)]}) from exc
        except services.UploadQuotaExceeded as exc:
            raise exceptions.Throttled(wait=QUOTA_RETRY_SECONDS, detail=str(exc)) from exc
        except services.UploadNotStored as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_507_INSUFFICIENT_STORAGE)
        return Response(JobOutput(job).data, status=status.HTTP_202_ACCEPTED)


class SourceSyncApi(TenantApiView):
    @extend_schema(request=None, responses={202: JobOutput})
    def post(self, request: Request, tenant_slug: str, source_id: str) -> Response:
        source = _writable_source(self, _source(self, source_id))
        if not source_kinds.kind_of(source).syncable:
            kinds = ", ".join(source_kinds.syncable_kinds())
            raise serializers.ValidationError({"source": [f"Only sources of these kinds sync: {kinds}; upload files "
                                                          "into this one instead."]})  # fmt: skip
        try:  # the service checks the folder or repository against what the server allows
            options = IngestOptions(mode=source.default_mode)
            job = services.source_sync_enqueue(tenant=self.tenant, source=source, options=options)
        except services.SourceProblem as exc:
            raise serializers.ValidationError({"path": [str(exc)]}) from exc
        return Response(JobOutput(job).data, status=status.HTTP_202_ACCEPTED)


def _job(view: TenantApiView, job_id: str) -> IngestJob:
    return found_or_404(selectors.job_get(viewer=view.viewer, public_id=job_id))


class JobListApi(TenantApiView):
    @extend_schema(responses={200: JobOutput(many=True)})
    def get(self, request: Request, tenant_slug: str) -> Response:
        jobs = [
            selectors.job_report(viewer=self.viewer, job=job) for job in selectors.job_list(viewer=self.viewer)[:100]
        ]
        return Response(JobOutput(jobs, many=True).data)


class JobDetailApi(TenantApiView):
    @extend_schema(responses={200: JobOutput})
    def get(self, request: Request, tenant_slug: str, job_id: str) -> Response:
        return Response(JobOutput(selectors.job_report(viewer=self.viewer, job=_job(self, job_id))).data)


class JobCancelApi(TenantApiView):
    @extend_schema(request=None, responses={202: JobOutput})
    def post(self, request: Request, tenant_slug: str, job_id: str) -> Response:
        job = _job(self, job_id)
        services.job_cancel(tenant=self.tenant, job=job)
        job.refresh_from_db()
        return Response(
            JobOutput(selectors.job_report(viewer=self.viewer, job=job)).data, status=status.HTTP_202_ACCEPTED
        )


class JobRetryApi(TenantApiView):
    @extend_schema(request=None, responses={202: JobOutput})
    def post(self, request: Request, tenant_slug: str, job_id: str) -> Response:
        job = _job(self, job_id)
        if not job.is_finished:
            raise serializers.ValidationError({"job": ["The job is still running."]})
        if job.source is not None:
            _writable_source(self, job.source)
        try:
            job = services.job_retry(tenant=self.tenant, job=job)  # or a new job of its failed files
        except services.SourceProblem as exc:
            raise serializers.ValidationError({"path": [str(exc)]}) from exc
        except services.UploadFilesGone as exc:
            raise serializers.ValidationError({"job": [str(exc)]}) from exc
        except services.UploadQuotaExceeded as exc:  # its failed files, sent again, would pass the tenant's quota
            raise exceptions.Throttled(wait=QUOTA_RETRY_SECONDS, detail=str(exc)) from exc
        except services.UploadNotStored as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_507_INSUFFICIENT_STORAGE)
        return Response(
            JobOutput(selectors.job_report(viewer=self.viewer, job=job)).data, status=status.HTTP_202_ACCEPTED
        )


# --- documents -----------------------------------------------------------------------------


def _document(view: TenantApiView, document_id: str) -> Document:
    return found_or_404(selectors.document_get(viewer=view.viewer, document_id=document_id))


class DocumentListApi(TenantApiView):
    @extend_schema(responses={200: DocumentPageOutput}, operation_id="tenants_documents_list")
    def get(self, request: Request, tenant_slug: str) -> Response:
        params = request.query_params
        documents = selectors.document_list(viewer=self.viewer, filters=selectors.DocumentFilters.from_params(params))
        try:
            limit = min(max(int(params.get("limit", 100)), 1), 500)
            offset = min(max(int(params.get("offset", 0)), 0), MAX_OFFSET)
        except ValueError as exc:
            raise serializers.ValidationError({"limit": ["limit and offset are integers."]}) from exc
        total = documents.count()
        page = documents[offset : offset + limit]
        results = DocumentOutput(page, many=True, context=_access_context(self)).data
        return Response({"count": total, "results": results})


class DocumentDetailApi(TenantApiView):
    @extend_schema_serializer(component_name="DocumentUpdateInput")
    class UpdateSerializer(serializers.Serializer):
        tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=50)
        critical = serializers.BooleanField(required=False)
        valid_from = serializers.DateField(required=False, allow_null=True, help_text="In force from this day.")
        valid_until = serializers.DateField(required=False, allow_null=True, help_text="In force through this day.")
        review_by = serializers.DateField(required=False, allow_null=True, help_text="Due a review after this day.")
        supersedes = serializers.CharField(
            required=False, allow_null=True, allow_blank=True, max_length=1900,
            help_text="The document it replaces: its id, document_id or key; null or blank: none.",
        )  # fmt: skip
        access = AccessField(
            required=False, allow_null=True, max_length=100,
            help_text="The document's own list, replacing its source's; null: inherit. An admin session or a write "
            "key acting for all.",
        )  # fmt: skip

    @extend_schema(responses={200: DocumentDetailOutput})
    def get(self, request: Request, tenant_slug: str, document_id: str) -> Response:
        context = {**_access_context(self), "viewer": self.viewer}
        return Response(DocumentDetailOutput(_document(self, document_id), context=context).data)

    @extend_schema(request=UpdateSerializer, responses={200: DocumentDetailOutput})
    def patch(self, request: Request, tenant_slug: str, document_id: str) -> Response:
        document = _document(self, document_id)
        incoming = self.UpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        if "access" in data:
            self.require_access_admin(request)
            access = None if data["access"] is None else _principals(self, data["access"])
        rows = selectors.document_rows(viewer=self.viewer, document=document)
        if "critical" in data:
            services.documents_set_critical(tenant=self.tenant, documents=rows, critical=data["critical"])
        if "tags" in data:
            services.document_set_tags(tenant=self.tenant, document=document, tags=data["tags"])
        if "access" in data:
            services.document_set_access(tenant=self.tenant, document=document, access=access,
                                         actor=self.actor(request))  # fmt: skip
        when = {name: data[name] for name in (*validity.FIELDS, "supersedes") if name in data}
        if when:
            try:
                services.document_set_validity(
                    tenant=self.tenant, document=document, changes=when, actor=self.actor(request), viewer=self.viewer
                )
            except validity.InvalidValidity as exc:
                field = str(exc).split(":", 1)[0] if ":" in str(exc)[:20] else "valid_until"
                raise serializers.ValidationError({field: [str(exc)]}) from exc
        context = {**_access_context(self), "viewer": self.viewer}
        return Response(DocumentDetailOutput(_document(self, document_id), context=context).data)


class DocumentRetireApi(TenantApiView):
    @extend_schema(request=None, responses={200: DocumentDetailOutput})
    def post(self, request: Request, tenant_slug: str, document_id: str) -> Response:
        document = _document(self, document_id)
        rows = selectors.document_rows(viewer=self.viewer, document=document)
        services.documents_retire(tenant=self.tenant, documents=rows, actor=self.actor(request))
        context = {**_access_context(self), "viewer": self.viewer}
        return Response(DocumentDetailOutput(_document(self, document_id), context=context).data)


class ChangeOutput(serializers.Serializer):
    """One change of the feed (knowledge/changes.py), as the OpenAPI schema describes it."""

    cursor = serializers.CharField(help_text="Pass as `since` to read what came after this change.")
    at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=["added", "changed", "retired", "restored", "validity", "superseded",
                                            "expired"])  # fmt: skip
    document = serializers.DictField(help_text="id, document_id, document_key, title, source_id, status")
    old_version = serializers.IntegerField(allow_null=True)
    new_version = serializers.IntegerField(allow_null=True)
    superseded_by = serializers.CharField(required=False, help_text="superseded: the successor's document_id")
    valid_until = serializers.DateField(required=False, help_text="expired: the last day it was in force")
    actor = serializers.CharField(required=False, help_text="Who changed it, where a person or a key did")


class ChangesOutput(serializers.Serializer):
    changes = ChangeOutput(many=True)
    next_cursor = serializers.CharField()
    has_more = serializers.BooleanField()


class ChangesApi(TenantApiView):
    """What changed since an instant or a cursor: documents added, changed, retired, restored, expired, superseded."""

    @extend_schema(
        parameters=[
            OpenApiParameter("since", str, required=True, description="An ISO 8601 datetime, or a next_cursor."),
            OpenApiParameter("limit", int, description="At most this many changes (1-500, default 100)."),
        ],
        responses={200: ChangesOutput},
    )
    def get(self, request: Request, tenant_slug: str) -> Response:
        params = request.query_params
        try:
            limit = int(params.get("limit", 100))
        except ValueError as exc:
            raise serializers.ValidationError({"limit": ["limit is an integer."]}) from exc
        try:
            return Response(changes.changes_page(viewer=self.viewer, since=params.get("since", ""), limit=limit))
        except changes.BadCursor as exc:
            raise serializers.ValidationError({"since": [str(exc).removeprefix("since: ")]}) from exc


# --- Dify External Knowledge API ------------------------------------------------------------


def _dify_error(code: int, message: str, http_status: int) -> Response:
    return Response({"error_code": code, "error_msg": message}, status=http_status)


class DifyRetrievalApi(APIView):
    """Dify's External Knowledge API: `knowledge_id` names a source (id or name) or a tag of the tenant.

    Errors follow Dify's documented shape: 1001 bad Authorization header, 1002 authorization
    failed, 2001 knowledge base does not exist. Scores are normalised to 0..1 (1 = first in both legs).
    """

    authentication_classes = [BearerApiKeyAuthentication]  # so the per-key rate limit applies here too
    permission_classes: list = []
    parser_classes = [SafeJSONParser]

    @extend_schema_serializer(component_name="DifyRetrievalInput")
    class InputSerializer(serializers.Serializer):
        class RetrievalSetting(serializers.Serializer):
            top_k = serializers.IntegerField(min_value=1, max_value=50)
            score_threshold = serializers.FloatField(min_value=0.0, max_value=1.0, default=0.0)

        knowledge_id = serializers.CharField(max_length=700)
        query = serializers.CharField(max_length=MAX_QUERY_CHARS)
        retrieval_setting = RetrievalSetting()
        metadata_condition = serializers.JSONField(required=False)

    @extend_schema(request=InputSerializer, responses={200: dict})
    def post(self, request: Request, tenant_slug: str) -> Response:
        if presented(request.META.get("HTTP_AUTHORIZATION", ""), ("Bearer",)) is None:
            return _dify_error(1001, "Invalid Authorization header format. Expected 'Bearer <api-key>' format.", 403)
        api_key = request.auth
        if not isinstance(api_key, ApiKey) or api_key.tenant.slug != tenant_slug:
            return _dify_error(1002, "Authorization failed.", 403)
        viewer = viewer_for(tenant=api_key.tenant, api_key=api_key)
        incoming = self.InputSerializer(data=request.data)
        if not incoming.is_valid():
            return _dify_error(400, f"Invalid request: {plain_errors(incoming.errors)}", 400)
        data = incoming.validated_data
        knowledge_id = data["knowledge_id"].strip()
        scope = selectors.knowledge_scope(viewer=viewer, knowledge_id=knowledge_id)
        if scope is None:
            return _dify_error(2001, "The knowledge does not exist.", 404)
        kind, name = scope
        filters = RetrieveFilters(source_ids=[name]) if kind == "source" else RetrieveFilters(tags=[name])
        hits, problem = transport.attempt(
            retrieve, viewer=viewer, query=data["query"], top_k=data["retrieval_setting"]["top_k"], filters=filters
        )
        if problem is not None or hits is None:  # Dify's own error shape
            logger.warning("Dify retrieval could not search: %s", problem.detail if problem else "")
            return _dify_error(500, "The knowledge index is unavailable; retry shortly.", 503)
        best = 2.0 / (60 + 1) + settings.RAG_CRITICAL_BOOST
        threshold = data["retrieval_setting"]["score_threshold"]
        records = []
        for hit in hits:
            score = min(1.0, hit.score / best)
            if score < threshold:
                continue
            chunk, document = hit.chunk, hit.chunk.document
            records.append(
                {
                    "content": chunk.text,
                    "score": round(score, 4),
                    "title": document.title,
                    "metadata": {
                        "path": document.display_key,
                        "source_id": document.source.source_id,
                        **hit_location(hit),
                        "freshness": hit.freshness,
                    },
                }
            )
        return Response({"records": records})
