"""Tenant endpoints of the REST API."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from tenants import services
from tenants.access import TenantApiView
from tenants.models import ApiKey, Group, Membership


class TenantDetailApi(TenantApiView):
    """Who am I talking to: the tenant this key or session acts for."""

    @extend_schema_serializer(component_name="Tenant")
    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField(source="public_id")
        slug = serializers.CharField()
        name = serializers.CharField()
        acts_for = serializers.ListField(
            child=serializers.CharField(), allow_null=True, help_text="The key's acts-for list; null for a session."
        )
        sees_everything = serializers.BooleanField(help_text="True for an admin, or a key acting for all.")

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request: Request, tenant_slug: str) -> Response:
        key = request.auth if isinstance(request.auth, ApiKey) else None
        return Response(self.OutputSerializer({
            "public_id": self.tenant.public_id, "slug": self.tenant.slug, "name": self.tenant.name,
            "acts_for": list(key.acts_for or ["tenant"]) if key else None, "sees_everything": self.viewer.sees_all,
        }).data)  # fmt: skip


def _group_out(group: Group) -> dict[str, Any]:
    return {"name": group.name, "principal": f"group:{group.name}",
            "members": sorted(group.members.values_list("username", flat=True))}  # fmt: skip


class GroupOutput(serializers.Serializer):
    name = serializers.CharField()
    principal = serializers.CharField()
    members = serializers.ListField(child=serializers.CharField())


def _group(view: TenantApiView, name: str) -> Group:
    group = services.group_get(tenant=view.tenant, name=name)
    if group is None:
        raise exceptions.NotFound("No such group.")
    return group


def _actor(request: Request) -> User | None:
    return request.user if isinstance(request.user, User) else None


class GroupListApi(TenantApiView):
    """The tenant's groups and their members: an admin's session, or a write key acting for all."""

    access_admin = True

    @extend_schema_serializer(component_name="GroupCreateInput")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=50)

    @extend_schema(responses={200: GroupOutput(many=True)})
    def get(self, request: Request, tenant_slug: str) -> Response:
        groups = Group.objects.for_tenant(self.tenant).prefetch_related("members")
        return Response([_group_out(g) for g in groups])

    @extend_schema(request=InputSerializer, responses={201: GroupOutput})
    def post(self, request: Request, tenant_slug: str) -> Response:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            group = services.group_create(tenant=self.tenant, name=incoming.validated_data["name"])
        except ValidationError as exc:
            raise serializers.ValidationError({"name": exc.messages}) from exc
        return Response(_group_out(group), status=status.HTTP_201_CREATED)


class GroupMembersApi(TenantApiView):
    access_admin = True

    @extend_schema_serializer(component_name="GroupMemberInput")
    class InputSerializer(serializers.Serializer):
        username = serializers.CharField(max_length=150)

    @extend_schema(request=InputSerializer, responses={201: GroupOutput})
    def post(self, request: Request, tenant_slug: str, group_name: str) -> Response:
        group = _group(self, group_name)
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        username = incoming.validated_data["username"].strip()
        member = Membership.objects.for_tenant(self.tenant).select_related("user").filter(user__username=username)
        found = member.first()
        if found is None:
            raise serializers.ValidationError(
                {"username": [f"Unknown user {username!r} in tenant {self.tenant.slug}."]}
            )
        services.group_member_add(tenant=self.tenant, actor=_actor(request), group=group, user=found.user)
        return Response(_group_out(group), status=status.HTTP_201_CREATED)


class GroupMemberApi(TenantApiView):
    access_admin = True

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant_slug: str, group_name: str, username: str) -> Response:
        group = _group(self, group_name)
        user = group.members.filter(username=username).first()
        if user is None:
            raise exceptions.NotFound("No such member of this group.")
        services.group_member_remove(tenant=self.tenant, actor=_actor(request), group=group, user=user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ApiKeyOutput(serializers.Serializer):
    id = serializers.UUIDField(source="public_id")
    prefix = serializers.CharField()
    name = serializers.CharField()
    scope = serializers.CharField()
    acts_for = serializers.ListField(child=serializers.CharField())
    state = serializers.CharField(help_text="active, revoked or expired.")
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


class ApiKeyCreated(ApiKeyOutput):
    key = serializers.CharField(help_text="The key itself: shown in this response only, never again.")


class ApiKeyListApi(TenantApiView):
    """The tenant's API keys (never the keys themselves), and new ones: an admin's session, or a write key acting for
    all. Each create is recorded in the tenant's audit log."""

    access_admin = True

    @extend_schema_serializer(component_name="ApiKeyCreateInput")
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        scope = serializers.ChoiceField(choices=ApiKey.Scope.choices, default=ApiKey.Scope.READ)
        acts_for = serializers.ListField(child=serializers.CharField(max_length=200), max_length=50,
                                         required=False, help_text='Default ["tenant"].')  # fmt: skip
        expires_at = serializers.DateTimeField(required=False, allow_null=True)

    @extend_schema(responses={200: ApiKeyOutput(many=True)})
    def get(self, request: Request, tenant_slug: str) -> Response:
        keys = ApiKey.objects.for_tenant(self.tenant).select_related("created_by")
        return Response(ApiKeyOutput(keys, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: ApiKeyCreated})
    def post(self, request: Request, tenant_slug: str) -> Response:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        try:
            api_key, raw_key = services.api_key_issue(
                tenant=self.tenant, name=data["name"], created_by=_actor(request), scope=data["scope"],
                acts_for=data.get("acts_for"), expires_at=data.get("expires_at"),
                by_key=request.auth if isinstance(request.auth, ApiKey) else None,
            )  # fmt: skip
        except ValueError as exc:  # UnknownPrincipal is one
            raise serializers.ValidationError({"detail": [str(exc)]}) from exc
        api_key.key = raw_key  # type: ignore[attr-defined]
        return Response(ApiKeyCreated(api_key).data, status=status.HTTP_201_CREATED)


class ApiKeyDetailApi(TenantApiView):
    """Revoke a key: it fails from the next request on (recorded in the audit log)."""

    access_admin = True

    @extend_schema(responses={204: None})
    def delete(self, request: Request, tenant_slug: str, key_id: str) -> Response:
        api_key = ApiKey.objects.for_tenant(self.tenant).filter(public_id=key_id).first()
        if api_key is None:
            raise exceptions.NotFound("No such API key.")
        services.api_key_revoke(tenant=self.tenant, api_key=api_key, actor=_actor(request),
                                by_key=request.auth if isinstance(request.auth, ApiKey) else None)  # fmt: skip
        return Response(status=status.HTTP_204_NO_CONTENT)
