"""The platform-wide model catalog in the Django admin (superusers only: models are shared by all tenants)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from inference.catalog import catalog_check, catalog_register_packaged
from inference.models import ModelEntry


@admin.register(ModelEntry)
class ModelEntryAdmin(admin.ModelAdmin):
    """Register GGUFs, see whether they load."""

    list_display = ["name", "kind", "path", "size_bytes", "context_length", "loads", "packaged", "checked_at"]
    list_filter = ["kind", "loads", "packaged"]
    readonly_fields = ["size_bytes", "context_length", "loads", "load_error", "packaged", "checked_at"]
    actions = ["check_models"]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        catalog_register_packaged()
        return super().changelist_view(request, extra_context)

    def save_model(self, request: HttpRequest, obj: ModelEntry, form: forms.ModelForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        catalog_check(obj)

    @admin.action(description="Check that the selected models load")
    def check_models(self, request: HttpRequest, queryset: QuerySet[ModelEntry]) -> None:
        results = [catalog_check(entry) for entry in queryset]
        self.message_user(request, f"{sum(1 for r in results if r.loads)} of {len(results)} load.")
