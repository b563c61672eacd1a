"""The shapes every door (REST, Dify, MCP, chat) shares: one location, hit, source, job, version and document
shape each, the request inputs the REST API and MCP both validate, and the mapping of retrieval errors to API
errors. A door imports shapes from here, never from another door's module (an import contract says so).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from core import transport
from knowledge import validity
from knowledge.index.vectorstore import StoreBusy as StoreBusy  # for doors that may not import the store
from knowledge.models import ChunkLocation, Document, IngestJob, Source, Status
from knowledge.search.retrieval import MODES, RetrievedChunk, RetrieveFilters

MAX_QUERY_CHARS = 2000  # every door's limit on a question or a query: REST, MCP, the OpenAI door, the pages
MAX_TOKENS = 1_000_000  # a budget (max_tokens) above any model's context


def token_budget(help_text: str) -> serializers.IntegerField:
    """A `max_tokens` input: a whole number of tokens (docs/sessions.md says how they are counted), 1 to MAX_TOKENS."""
    return serializers.IntegerField(min_value=1, max_value=MAX_TOKENS, required=False, help_text=help_text)


def run_retrieval(fn, *args, **kwargs):
    """A retrieval step of a REST request: its domain errors as core/transport.py maps them."""
    return transport.guarded(fn, *args, **kwargs)


@extend_schema_field({"type": "string", "example": "2025-06-01T09:30:00Z"})
class AsOfField(serializers.Field):
    """An ISO 8601 date (the end of that day) or datetime: read what was in force then (knowledge/validity.py)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "Serve what was in force at this ISO 8601 datetime, or at the end of this date.")
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str) or len(data) > 40:
            raise serializers.ValidationError("Give an ISO 8601 date or datetime, such as 2025-06-01.")
        try:
            return validity.parse_instant(data)
        except validity.InvalidValidity as exc:
            raise serializers.ValidationError(str(exc).removeprefix("as_of: ")) from exc

    def to_representation(self, value: Any) -> Any:
        return value.isoformat()


class WhenInput(serializers.Serializer):
    """What a read serves: documents in force now (default), as of an instant, or every one, marked."""

    as_of = AsOfField(required=False)
    include_expired = serializers.BooleanField(
        default=False, help_text="Also serve documents not in force (expired, superseded, not yet valid), marked."
    )


class ScopeSerializer(serializers.Serializer):
    source_ids = serializers.ListField(child=serializers.CharField(max_length=700), required=False, max_length=100)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=50)


def scope_filters(scope: dict[str, Any] | None, *, mode: str = "auto", critical_only: bool = False,
                  when: dict[str, Any] | None = None) -> RetrieveFilters:  # fmt: skip
    """The filters of a read; `when` is the validated request (its as_of and include_expired)."""
    scope = scope or {}
    filters = RetrieveFilters(
        source_ids=scope.get("source_ids"),
        tags=[t.strip().lower() for t in scope.get("tags") or []] or None,
        mode=mode,
        critical_only=critical_only,
    )
    return with_when(filters, when)


def with_when(filters: RetrieveFilters, when: dict[str, Any] | None) -> RetrieveFilters:
    when = when or {}
    filters.as_of = when.get("as_of")
    filters.include_expired = bool(when.get("include_expired"))
    return filters


def hit_location(hit: RetrievedChunk) -> ChunkLocation:
    """Where a hit is: its page is the one its text matching the query sits on."""
    return hit.chunk.location(page=hit.location_page)


class FreshnessOutput(serializers.Serializer):
    """Is it still true (knowledge/validity.py, docs/validity.md)."""

    status = serializers.ChoiceField(choices=validity.STATUSES)
    valid_from = serializers.DateField(allow_null=True)
    valid_until = serializers.DateField(allow_null=True)
    review_by = serializers.DateField(allow_null=True)
    changed_at = serializers.DateTimeField(allow_null=True, help_text="When the served content last changed.")
    superseded_by = serializers.CharField(allow_null=True, help_text="The successor's document_id, if you see it.")


class HitOutput(serializers.Serializer):
    """A retrieve hit, as the OpenAPI schema describes it (HitSerializer writes it)."""

    chunk_id = serializers.CharField()
    document_id = serializers.CharField()
    source_id = serializers.CharField()
    document_key = serializers.CharField()
    title = serializers.CharField()
    heading = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField()
    mode = serializers.CharField()
    line_start = serializers.IntegerField(allow_null=True)
    line_end = serializers.IntegerField(allow_null=True)
    page = serializers.IntegerField(allow_null=True)
    page_start = serializers.IntegerField(allow_null=True)
    page_end = serializers.IntegerField(allow_null=True)
    page_label = serializers.CharField()
    url = serializers.CharField(help_text="A web page's address (a website source); empty for a file.")
    tags = serializers.ListField(child=serializers.CharField())
    critical = serializers.BooleanField()
    version = serializers.IntegerField(allow_null=True)
    freshness = FreshnessOutput()
    signals = serializers.DictField()


class RetrieveOutput(serializers.Serializer):
    query = serializers.CharField()
    hits = HitOutput(many=True)


class HitSerializer(serializers.Serializer):
    def to_representation(self, hit: Any) -> dict[str, Any]:
        chunk, document = hit.chunk, hit.chunk.document
        return {
            **hit_location(hit),
            "source_id": document.source.source_id,
            "text": chunk.text,
            "score": round(hit.score, 6),
            "mode": chunk.mode,
            "tags": hit.tags,
            "critical": bool(chunk.critical or document.critical),
            "version": chunk.document_version.version if chunk.document_version_id else None,
            "freshness": hit.freshness,
            "signals": hit.signals,
            "table": hit.table,  # a kept table this hit shows ({name, columns, rows}): answers can compute over it
        }


@extend_schema_serializer(component_name="RetrieveInput")
class RetrieveInput(WhenInput):
    query = serializers.CharField(max_length=MAX_QUERY_CHARS, trim_whitespace=True)
    top_k = serializers.IntegerField(min_value=1, max_value=50, default=8)
    mode = serializers.ChoiceField(choices=MODES, default="auto")
    scope = ScopeSerializer(required=False)
    specific = serializers.BooleanField(default=False)
    critical_only = serializers.BooleanField(default=False)
    include_superseded = serializers.BooleanField(default=False)
    # The packaged cross-encoder reads the first 20 candidates; its order is fused with the hybrid one.
    # Off by default: measured, it does not win on every set and costs ~1.5 s a query on 2 cores.
    rerank = serializers.BooleanField(default=False)
    session = serializers.UUIDField(required=False, help_text="An agent session (sessions/): only what it lacks.")
    include_delivered = serializers.BooleanField(
        default=False, help_text="In a session, return the chunks it already holds too."
    )
    max_tokens = token_budget("Return the hits, in rank order, that fit this many tokens; the rest in left_out.")


@extend_schema_serializer(component_name="BootstrapInput")
class BootstrapInput(WhenInput):
    intent = serializers.CharField(max_length=MAX_QUERY_CHARS, required=False, allow_blank=True, default="")
    scope = ScopeSerializer(required=False)
    session = serializers.UUIDField(required=False, help_text="An agent session (sessions/): the pack is its base.")
    max_tokens = token_budget("Fit the pack to this many tokens, most important first, cut at item boundaries; "
                              "what was left out is listed.")  # fmt: skip


class ScheduleOutput(serializers.Serializer):
    every_minutes = serializers.IntegerField()
    next_run = serializers.DateTimeField(allow_null=True)
    last_run = serializers.DateTimeField(allow_null=True)
    last_job_id = serializers.UUIDField(allow_null=True)
    last_job_status = serializers.CharField(allow_null=True)


class SourceOutput(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    source_id = serializers.CharField()
    kind = serializers.CharField()
    name = serializers.CharField(source="label")
    path = serializers.SerializerMethodField(help_text="The folder, vault or repository read (a URL without its "
                                             "credential).")  # fmt: skip
    config = serializers.DictField(
        help_text="Its kind's own options, such as a git source's branch and "
        "history_depth (knowledge/ingest/sources.py)."
    )
    synced_commit = serializers.SerializerMethodField(help_text="A kind with commits: the commit the last sync read.")
    default_mode = serializers.CharField()
    ocr_languages = serializers.CharField()
    review_every_days = serializers.IntegerField(allow_null=True)
    sync_every_minutes = serializers.IntegerField(allow_null=True)
    schedule = serializers.SerializerMethodField()
    tags = serializers.SerializerMethodField()
    is_default = serializers.BooleanField()
    documents = serializers.SerializerMethodField()
    last_synced_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()

    @extend_schema_field(ScheduleOutput(allow_null=True))
    def get_schedule(self, source: Source) -> dict[str, Any] | None:
        """The next scheduled sync and the last one's job (null for a source synced only on request)."""
        from knowledge.schedules import source_schedule

        if source.sync_every_minutes is None:
            return None
        shown = source_schedule(source)
        last = shown["last_job"]
        return {"every_minutes": shown["every_minutes"], "next_run": shown["next_run"], "last_run": shown["last_run"],
                "last_job_id": last.public_id if last is not None else None,
                "last_job_status": last.state if last is not None else None}  # fmt: skip

    def get_tags(self, source: Source) -> list[str]:
        return sorted(t.name for t in source.tags.all())

    def get_path(self, source: Source) -> str:
        return source.shown_path

    def get_synced_commit(self, source: Source) -> str:
        return str((source.sync_state or {}).get("commit") or "")

    def get_documents(self, source: Source) -> int:
        live = getattr(source, "live", None)  # source_list counts only the documents the viewer sees
        return live if live is not None else source.documents.exclude(status=Status.RETIRED).count()

    def to_representation(self, source: Source) -> dict[str, Any]:
        data = super().to_representation(source)
        if self.context.get("show_access"):  # to whoever may change it
            data["access"] = list(source.access)
            # documents whose access change is still reaching the index (its progress); source_list counts them
            pending = getattr(source, "pending", None)
            data["access_pending"] = (
                pending if pending is not None else source.documents.filter(access_pending=True).count()
            )
        return data


class JobOutput(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    kind = serializers.CharField()
    status = serializers.CharField(source="state")
    source_id = serializers.CharField(source="source.source_id", allow_null=True)
    progress = serializers.SerializerMethodField()
    counts = serializers.SerializerMethodField()
    errors = serializers.JSONField()  # type: ignore[assignment]  # the job's field, not Serializer.errors
    skips = serializers.JSONField()
    message = serializers.CharField()
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    seconds = serializers.FloatField(allow_null=True)
    git = serializers.SerializerMethodField(help_text="A git sync: the head read, the base it started after, commits "
                                            "read, whether the branch was rewritten.")  # fmt: skip
    link_problems = serializers.SerializerMethodField(help_text="A vault sync: links that resolve to no one note.")
    access = serializers.SerializerMethodField(
        help_text="A sync or permission sync of a system with read rights of its "
        "own: how many documents opened, closed, and are read by admins only."
    )

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_access(self, job: IngestJob) -> dict[str, int] | None:
        access = (job.params or {}).get("access")
        if not access:
            return None
        return {name: int(access.get(name, 0)) for name in ("documents", "opened", "closed", "admins_only")}

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_git(self, job: IngestJob) -> dict[str, Any] | None:
        return (job.params or {}).get("git")

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_link_problems(self, job: IngestJob) -> list[dict[str, str]]:
        return list((job.params or {}).get("link_problems") or [])

    def get_progress(self, job: IngestJob) -> dict[str, Any]:
        percent = (
            100.0
            if job.is_finished
            else (100.0 * job.documents_done / job.documents_total if job.documents_total else 0.0)
        )
        return {
            "documents_done": job.documents_done,
            "documents_total": job.documents_total,
            "files_done": job.files_done if job.files_total else job.documents_done,  # every file sent or found,
            "files_total": job.files_total or job.documents_total,  # skipped and refused ones too
            "chunks_done": job.chunks_done,
            "chunks_total": job.chunks_total,
            "percent": round(percent, 1),
            "activity": "" if job.is_finished else job.activity,
        }

    def get_counts(self, job: IngestJob) -> dict[str, int]:
        return {k: getattr(job, k) for k in ("added", "updated", "unchanged", "retired", "skipped", "failed")}


class CommitOutput(serializers.Serializer):
    sha = serializers.CharField()
    author = serializers.CharField()
    date = serializers.CharField(help_text="ISO 8601, with the committer's offset.")
    message = serializers.CharField()
    unreachable = serializers.BooleanField(default=False, help_text="A force-push left it out of the branch.")


class VersionOutput(serializers.Serializer):
    version = serializers.IntegerField()
    status = serializers.CharField()
    commit = serializers.SerializerMethodField(help_text="Git sources: the commit that made this version.")
    content_hash = serializers.CharField()
    size = serializers.IntegerField()
    chunk_count = serializers.IntegerField()
    embedding_model = serializers.CharField()
    warnings = serializers.JSONField()
    created_at = serializers.DateTimeField()
    status_changed_at = serializers.DateTimeField()

    @extend_schema_field(CommitOutput(allow_null=True))
    def get_commit(self, version: Any) -> dict[str, Any] | None:
        commit = version.commit or {}
        if not commit.get("sha"):
            return None
        return {"sha": commit["sha"], "author": commit.get("author", ""), "date": commit.get("date", ""),
                "message": commit.get("message", ""), "unreachable": bool(commit.get("unreachable"))}  # fmt: skip


class DocumentOutput(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    document_id = serializers.CharField()
    source_id = serializers.CharField(source="source.source_id")
    document_key = serializers.CharField(source="display_key")
    title = serializers.CharField()
    source_type = serializers.CharField()
    mode = serializers.CharField()
    status = serializers.CharField()
    version = serializers.IntegerField()
    critical = serializers.BooleanField()
    tags = serializers.SerializerMethodField()
    updated_at = serializers.DateTimeField()
    valid_from = serializers.DateField(allow_null=True)
    valid_until = serializers.DateField(allow_null=True)
    review_by = serializers.DateField(allow_null=True)
    supersedes = serializers.SerializerMethodField(help_text="The document_id of the document this one replaces.")
    freshness = serializers.SerializerMethodField(help_text="Its status today (knowledge/validity.py).")
    validity_problems = serializers.JSONField(help_text="Stated values that were not applied, and why.")

    def get_tags(self, document: Document) -> list[str]:
        return sorted(t.name for t in document.tags.all())

    def get_supersedes(self, document: Document) -> str | None:
        target = document.supersedes
        return target.document_id if target is not None else None

    @extend_schema_field(FreshnessOutput)
    def get_freshness(self, document: Document) -> dict[str, Any]:
        clock = getattr(self, "_clock", None) or validity.Clock.for_read(document.tenant)
        self._clock = clock  # one clock (one supersession query) for a whole page: the child serves every row
        return dict(clock.freshness(document, sees=self.context.get("sees")))

    def to_representation(self, document: Document) -> dict[str, Any]:
        data = super().to_representation(document)
        if self.context.get("show_access"):  # to whoever may change it
            data["access"] = None if document.access is None else list(document.access)
            data["effective_access"] = document.effective_access
            data["restricted"] = document.restricted
            data["access_pending"] = document.access_pending
        return data


class LinkOutput(serializers.Serializer):
    target = serializers.CharField(help_text="As written in the note, without its heading.")
    heading = serializers.CharField()
    embed = serializers.BooleanField()
    problem = serializers.CharField(help_text="Why it resolves to no one note (blank when it does).")
    document_id = serializers.CharField(allow_null=True)
    document_key = serializers.CharField(allow_null=True)
    id = serializers.UUIDField(allow_null=True)


class BacklinkOutput(serializers.Serializer):
    document_id = serializers.CharField()
    document_key = serializers.CharField()
    id = serializers.UUIDField()
    heading = serializers.CharField()
    embed = serializers.BooleanField()


class DocumentDetailOutput(DocumentOutput):
    versions = VersionOutput(many=True)
    links = LinkOutput(many=True, read_only=True, help_text="A vault note's links, as the caller may see them.")
    backlinks = BacklinkOutput(many=True, read_only=True, help_text="The notes the caller sees that link to it.")

    def to_representation(self, document: Document) -> dict[str, Any]:
        from knowledge.links import document_links

        data = super().to_representation(document)
        viewer = self.context.get("viewer")
        data.update(document_links(viewer=viewer, document=document) if viewer is not None else
                    {"links": [], "backlinks": []})  # fmt: skip
        return data


class DocumentPageOutput(serializers.Serializer):
    count = serializers.IntegerField(help_text="Documents matching the filters, all pages.")
    results = DocumentOutput(many=True)


def plain_errors(errors: Any, prefix: str = "") -> str:
    """DRF's nested error dict as "field.sub: message; …" (not a Python repr of ErrorDetail objects)."""
    if isinstance(errors, dict):
        return "; ".join(plain_errors(v, f"{prefix}{k}." if prefix or k != "non_field_errors" else "")
                         for k, v in errors.items())  # fmt: skip
    if isinstance(errors, list):
        return "; ".join(plain_errors(v, prefix) for v in errors)
    return f"{prefix.rstrip('.')}: {errors}" if prefix else str(errors)
