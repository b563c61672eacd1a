"""Admin for tenants, plus TenantScopedAdmin: the base that keeps tenant admins inside their tenants."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import ForeignKeyRawIdWidget
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.forms import ModelChoiceField, ModelMultipleChoiceField
from django.http import HttpRequest

from tenants.models import ApiKey, Membership, Tenant
from tenants.principals import UnknownPrincipal, principals_check
from tenants.services import api_key_issue, api_key_revoke, membership_add


def admin_tenants(request: HttpRequest) -> QuerySet[Tenant]:
    """The tenants this user administers (all of them for a superuser)."""
    if request.user.is_superuser:
        return Tenant.objects.all()
    cache_name = "_ragsite_admin_tenants"
    if not hasattr(request, cache_name):
        tenant_ids = list(
            Membership.objects.filter(user=cast(User, request.user), role=Membership.Role.ADMIN).values_list(
                "tenant_id", flat=True
            )
        )
        setattr(request, cache_name, tenant_ids)
    return Tenant.objects.filter(pk__in=getattr(request, cache_name))


def _is_tenant_admin(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff and admin_tenants(request).exists())


class TenantScopedAdmin(admin.ModelAdmin):
    """A tenant admin (not a superuser) sees, picks and saves only rows of tenants they administer.

    Rows of other tenants are filtered out of the queryset, so a direct URL to one answers like
    a row that does not exist. Superusers keep Django's normal behaviour.
    """

    tenant_field = "tenant"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.tenant_field}__in": admin_tenants(request)})

    def _allowed(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        if not _is_tenant_admin(request):
            return False
        return obj is None or admin_tenants(request).filter(pk=self._tenant_pk(obj)).exists()

    def _tenant_pk(self, obj: models.Model) -> int:
        return obj.pk if isinstance(obj, Tenant) else obj.tenant_id  # type: ignore[attr-defined]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser or _is_tenant_admin(request)

    def has_view_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return request.user.is_superuser or self._allowed(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return request.user.is_superuser or self._allowed(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return request.user.is_superuser or self._allowed(request)

    def has_delete_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return request.user.is_superuser or self._allowed(request, obj)

    def formfield_for_foreignkey(self, db_field: models.ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        self._scope_choices(field, request)
        return field

    def formfield_for_manytomany(self, db_field: models.ManyToManyField, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        self._scope_choices(field, request)
        return field

    def _scope_choices(self, field: Any, request: HttpRequest) -> None:
        if request.user.is_superuser or not isinstance(field, ModelChoiceField | ModelMultipleChoiceField):
            return
        choices = field.queryset
        if choices is None:
            return
        if choices.model is Tenant:
            field.queryset = choices.filter(pk__in=admin_tenants(request))
        elif any(f.name == "tenant" for f in choices.model._meta.fields):
            field.queryset = choices.filter(tenant__in=admin_tenants(request))

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not request.user.is_superuser and not admin_tenants(request).filter(pk=self._tenant_pk(obj)).exists():
            raise PermissionDenied("You do not administer that tenant.")
        super().save_model(request, obj, form, change)


class TenantScopedReadOnlyInline(admin.TabularInline):
    """A read-only inline that a tenant admin may view: its rows hang off a parent already scoped."""

    extra = 0
    can_delete = False

    def has_view_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return request.user.is_superuser or _is_tenant_admin(request)

    def has_add_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_field = "pk"
    list_display = ["slug", "name", "public_id", "created_at"]
    search_fields = ["slug", "name"]
    readonly_fields = ["public_id", "created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        queryset = admin.ModelAdmin.get_queryset(self, request)
        return queryset if request.user.is_superuser else queryset.filter(pk__in=admin_tenants(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Tenant | None = None) -> list[str]:
        # The slug is part of every id of the tenant's data, so it is fixed once created.
        return [*self.readonly_fields, "slug"] if obj is not None else list(self.readonly_fields)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser


def enrollable_users(request: HttpRequest) -> QuerySet[Any]:
    """Users a tenant admin may enrol or re-role: people already in one of the tenants they administer.

    A tenant admin cannot browse the platform's accounts (a raw user id showed any username) nor pull a
    stranger into their tenant; new people are enrolled by an operator (`manage.py add_member`, or a
    superuser in this admin)."""
    users = get_user_model().objects.filter(is_active=True)
    if request.user.is_superuser:
        return users
    return users.filter(memberships__tenant__in=admin_tenants(request)).distinct()


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter), "role"]
    search_fields = ["user__username", "user__email"]

    def formfield_for_foreignkey(self, db_field: models.ForeignKey, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user":
            kwargs["queryset"] = enrollable_users(request)
            if request.user.is_superuser:  # operators may have many accounts to pick from: a raw id
                kwargs["widget"] = ForeignKeyRawIdWidget(db_field.remote_field, self.admin_site)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        membership_add(tenant=obj.tenant, user=obj.user, role=obj.role)  # an admin role also lets them into /admin/


class ApiKeyAdminForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = "__all__"

    def clean(self) -> dict[str, Any]:
        """An acts-for list naming a group or user the tenant lacks is a form error, named, not a failed save."""
        cleaned = super().clean() or {}
        tenant = cleaned.get("tenant") or (self.instance.tenant if self.instance.tenant_id else None)
        acts_for = cleaned.get("acts_for")
        if tenant is not None and "acts_for" in self.fields:
            values = acts_for if isinstance(acts_for, list) else [str(acts_for)] if acts_for else ["tenant"]
            try:
                cleaned["acts_for"] = principals_check(tenant=tenant, principals=values or ["tenant"], allow_all=True)
            except UnknownPrincipal as exc:
                self.add_error("acts_for", str(exc))
        return cleaned


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    form = ApiKeyAdminForm
    list_display = ["prefix", "name", "scope", "acts_for_label", "tenant", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("tenant", admin.RelatedOnlyFieldListFilter), "scope"]
    search_fields = ["name", "prefix"]
    fields = ["tenant", "name", "scope", "acts_for", "prefix", "created_at", "created_by", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "created_by", "last_used_at", "revoked_at"]
    actions = ["revoke_keys"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        # A key's tenant and scope are fixed once issued: a narrower key is a new key.
        return [*self.readonly_fields, "tenant", "scope"] if obj is not None else list(self.readonly_fields)

    @admin.display(description="Acts for")
    def acts_for_label(self, obj: ApiKey) -> str:
        return "ALL documents" if obj.acts_for_all else ", ".join(obj.acts_for or ["tenant"])

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            return super().save_model(request, obj, form, change)
        if not request.user.is_superuser and not admin_tenants(request).filter(pk=obj.tenant_id).exists():
            raise PermissionDenied("You do not administer that tenant.")
        issued, raw_key = api_key_issue(tenant=obj.tenant, name=obj.name, created_by=cast(User, request.user),
                                        scope=obj.scope, acts_for=obj.acts_for)  # fmt: skip
        obj.pk, obj.prefix, obj.key_hash, obj.acts_for = issued.pk, issued.prefix, issued.key_hash, issued.acts_for
        obj._state.adding = False
        messages.warning(request, f"New API key (shown only now, copy it): {raw_key}")

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        count = 0
        for api_key in queryset.select_related("tenant"):
            count += api_key_revoke(tenant=api_key.tenant, api_key=api_key, actor=cast(User, request.user))
        self.message_user(request, f"Revoked {count} key(s).")
