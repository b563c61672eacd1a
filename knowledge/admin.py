"""Admin for sources, documents (with their version history) and chunks, with curation actions."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import QuerySet
from django.http import HttpRequest

from knowledge import ids, services
from knowledge.ingest import sources
from knowledge.ingest.producer import SourceProblem
from knowledge.models import Chunk, Document, DocumentVersion, IngestJob, Source, Tag
from tenants.admin import TenantAdmin, TenantScopedAdmin, TenantScopedReadOnlyInline, admin_tenants
from tenants.models import Tenant, TenantQuerySet


class TagListFilter(admin.SimpleListFilter):
    """Filter by tag name, offering only tags of tenants the user may see."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        tags = Tag.objects.for_tenants(admin_tenants(request)).values_list("name", flat=True).distinct()
        return [(name, name) for name in tags.order_by("name")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(tags__name=self.value()).distinct() if self.value() else queryset


class TagActionForm(ActionForm):
    tag = forms.CharField(required=False, label="Tag", help_text="for the add/remove tag actions")


class CurationActionsMixin:
    """Bulk actions shared by documents and chunks. The tenant of each row is its own tenant."""

    action_form = TagActionForm
    actions: Any = ["mark_critical", "unmark_critical", "add_tag", "remove_tag"]

    message_user: Any  # from the ModelAdmin it is mixed into

    def _by_tenant(self, request: HttpRequest, queryset: QuerySet) -> list[tuple[Tenant, TenantQuerySet[Any]]]:
        tenants = admin_tenants(request).filter(pk__in=queryset.values("tenant_id"))
        return [(tenant, cast(TenantQuerySet[Any], queryset.filter(tenant=tenant))) for tenant in tenants]

    def _tag_name(self, request: HttpRequest) -> str:
        return request.POST.get("tag", "").strip()

    @admin.action(description="Mark selected as critical")
    def mark_critical(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_critical(request, queryset, True)

    @admin.action(description="Unmark critical")
    def unmark_critical(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._set_critical(request, queryset, False)

    def _set_critical(self, request: HttpRequest, queryset: QuerySet, critical: bool) -> None:
        count = 0
        for tenant, rows in self._by_tenant(request, queryset):
            if queryset.model is Document:
                count += services.documents_set_critical(tenant=tenant, documents=rows, critical=critical)
            else:
                count += services.chunks_set_critical(tenant=tenant, chunks=rows, critical=critical)
        self.message_user(request, f"{'Marked' if critical else 'Unmarked'} {count} as critical.")

    @admin.action(description="Add tag (type it in the Tag box)")
    def add_tag(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._change_tag(request, queryset, services.rows_add_tag, "Tagged")

    @admin.action(description="Remove tag (type it in the Tag box)")
    def remove_tag(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._change_tag(request, queryset, services.rows_remove_tag, "Untagged")

    def _change_tag(self, request: HttpRequest, queryset: QuerySet, change, verb: str) -> None:
        tag_name = self._tag_name(request)
        if not tag_name:
            self.message_user(request, "Type a tag name in the Tag box first.", level=messages.ERROR)
            return
        count = sum(change(tenant=t, rows=rows, tag_name=tag_name) for t, rows in self._by_tenant(request, queryset))
        self.message_user(request, f"{verb} {count} row(s) with “{Tag.normalise(tag_name)}”.")


@admin.register(Tag)
class TagAdmin(TenantScopedAdmin):
    list_display = ["name", "tenant"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name"]


class SourceAdminForm(forms.ModelForm):
    class Meta:
        model = Source
        fields = "__all__"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        tenant, kind, label = data.get("tenant"), data.get("kind"), data.get("label")
        if self.instance.pk is None and tenant and kind and label:
            try:
                self.instance.source_id = ids.source_id(tenant.slug, kind, label)
            except ids.InvalidIdentifier as exc:
                raise forms.ValidationError(str(exc)) from exc
            self.instance.name = ids.parse_source_id(self.instance.source_id).source_name
            if Source.objects.filter(source_id=self.instance.source_id).exists():
                raise forms.ValidationError(f"A source with the id {self.instance.source_id} already exists.")
        if self.instance.pk is None and tenant and kind and sources.KINDS[kind].check is not None:
            # Checked again wherever it is read (sync, retry, the worker); here for a clear answer now.
            try:
                self.instance.set_location(sources.location_check(kind, data.get("path") or "", tenant.slug))
                data["path"] = self.instance.path  # a URL's credential sealed apart (knowledge/sealed.py)
            except SourceProblem as exc:
                self.add_error("path", str(exc))
        return data


def drop_foreign_tags(request: HttpRequest, obj: Source | Document | Chunk) -> None:
    """A row's tags must be its own tenant's (their names go into its payloads): others are removed."""
    foreign = list(obj.tags.exclude(tenant_id=obj.tenant_id))
    if foreign:
        obj.tags.remove(*foreign)
        messages.warning(request, f"Removed tags of another tenant: {', '.join(t.name for t in foreign)}.")


def rows_deleted_through_services(summary):
    """Documents, chunks and jobs cannot be deleted one by one in the admin (they are retired, or read-only);
    with their source or tenant they go, through the services, so their own delete permission is not needed."""
    deleted, counts, _, protected = summary
    return deleted, counts, set(), protected


@admin.register(Source)
class SourceAdmin(TenantScopedAdmin):
    form = SourceAdminForm
    list_display = ["source_id", "label", "kind", "tenant", "document_count", "last_synced_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter), "kind", TagListFilter]
    search_fields = ["source_id", "label", "path"]
    # Access is changed on the sources page or the API (checked principals, payloads updated), not here.
    readonly_fields = ["source_id", "name", "public_id", "access", "created_at", "last_synced_at"]
    filter_horizontal = ["tags"]

    @admin.display(description="documents")
    def document_count(self, obj: Source) -> int:
        return obj.documents.count()

    # Writes that touch indexed data go through the services: the vector store follows SQL.
    def delete_model(self, request: HttpRequest, obj: Source) -> None:
        services.source_delete(tenant=obj.tenant, source=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset.select_related("tenant"):
            services.source_delete(tenant=source.tenant, source=source)

    def get_deleted_objects(self, objs, request: HttpRequest):
        return rows_deleted_through_services(super().get_deleted_objects(objs, request))

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: list, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        source = form.instance  # its tags are in every payload of its documents
        drop_foreign_tags(request, source)
        services.documents_payload_sync(
            tenant=source.tenant, document_pks=source.documents.values_list("pk", flat=True)
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Source | None = None) -> list[str]:
        # kind and name are part of the id; a rename would orphan every id below the source. The path is fixed
        # too: a folder source reads what its creator was allowed to read (a new folder is a new source).
        fixed = ["tenant", "kind", "label", "path"] if obj is not None else []
        return [*self.readonly_fields, *fixed]


VERSION_FIELDS = ("version", "status", "content_hash", "size", "chunk_count", "embedding_model", "created_at")


class DocumentVersionInline(TenantScopedReadOnlyInline):
    model = DocumentVersion
    fields = VERSION_FIELDS
    readonly_fields = VERSION_FIELDS


@admin.register(Document)
class DocumentAdmin(CurationActionsMixin, TenantScopedAdmin):
    list_display = ["document_key", "title", "source", "mode", "status", "version", "critical", "updated_at"]
    list_filter = [
        ("tenant", admin.RelatedOnlyFieldListFilter),
        ("source", admin.RelatedOnlyFieldListFilter),
        "status",
        "mode",
        "critical",
        TagListFilter,
    ]
    search_fields = ["document_id", "title", "source_path"]
    readonly_fields = [
        "tenant", "source", "document_id", "document_key", "source_path", "source_ref", "source_type",
        "status", "version", "public_id", "created_at", "updated_at",
    ]  # fmt: skip
    fields = [*readonly_fields[:8], "mode", "title", "tags", "critical", *readonly_fields[8:]]
    filter_horizontal = ["tags"]
    inlines = [DocumentVersionInline]
    actions: Any = [*CurationActionsMixin.actions, "retire"]

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False  # documents come from ingestion, never from a blank form

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # retire instead (kept in history; the vector store follows), or delete the source

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: list, change: bool) -> None:
        super().save_related(request, form, formsets, change)  # critical, tags, title, mode: into the payloads
        drop_foreign_tags(request, form.instance)
        services.documents_payload_sync(tenant=form.instance.tenant, document_pks=[form.instance.pk])

    @admin.action(description="Retire selected documents")
    def retire(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        count = sum(
            services.documents_retire(tenant=tenant, documents=rows)
            for tenant, rows in self._by_tenant(request, queryset)
        )
        self.message_user(request, f"Retired {count} document(s).")


@admin.register(Chunk)
class ChunkAdmin(CurationActionsMixin, TenantScopedAdmin):
    list_display = ["chunk_id", "heading", "mode", "line_start", "line_end", "page", "status", "critical"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter), "status", "mode", "critical", TagListFilter]
    search_fields = ["chunk_id", "heading", "text"]
    list_select_related = ["document"]
    readonly_fields = [
        "tenant", "document", "document_version", "chunk_id", "index", "mode", "heading", "text",
        "line_start", "line_end", "page", "page_label", "content_hash", "status", "embedding_provider",
        "embedding_model", "embedding_dims", "indexing_version", "created_at",
    ]  # fmt: skip
    filter_horizontal = ["tags"]

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # chunks belong to their document's version

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: list, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        drop_foreign_tags(request, form.instance)
        services.documents_payload_sync(tenant=form.instance.tenant, document_pks=[form.instance.document_id])


@admin.register(IngestJob)
class IngestJobAdmin(TenantScopedAdmin):
    list_display = ["public_id", "tenant", "kind", "source", "state", "documents_done", "documents_total",
                    "chunks_done", "failed", "skipped", "created_at"]  # fmt: skip
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter), "kind", "state"]
    readonly_fields = [f.name for f in IngestJob._meta.fields]

    def has_add_permission(self, request: HttpRequest, *args: object) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # jobs are records; retry and cancel go through the API or the curation pages


# Deleting a tenant in the admin must reach its vectors and files, which only knowledge knows about (tenants
# never imports knowledge): the Tenant admin is re-registered here with deletes through the service.
class TenantWithKnowledgeAdmin(TenantAdmin):
    def get_deleted_objects(self, objs, request: HttpRequest):
        return rows_deleted_through_services(super().get_deleted_objects(objs, request))

    def delete_model(self, request: HttpRequest, obj: Tenant) -> None:
        services.tenant_delete(tenant=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Tenant]) -> None:
        for tenant in queryset:
            services.tenant_delete(tenant=tenant)


admin.site.unregister(Tenant)
admin.site.register(Tenant, TenantWithKnowledgeAdmin)
