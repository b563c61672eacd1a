"""The one way to learn "the tenant of this request": URL slug + membership, or API key."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast
from urllib.parse import quote

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from rest_framework import exceptions, permissions
from rest_framework.request import Request
from rest_framework.views import APIView

from tenants.authentication import ApiKeyAuthentication  # noqa: F401  (re-exported)
from tenants.models import SIGNED_IN_WITH, ApiKey, Membership, Tenant
from tenants.principals import Viewer, viewer_for


class TenantRequest(HttpRequest):
    tenant: Tenant
    membership: Membership
    viewer: Viewer  # which documents this member sees (tenants/principals.py)
    user: User  # tenant_member_required lets only a signed-in member through


ViewFunc = Callable[..., HttpResponseBase]


def sso_satisfied(request: Any, membership: Membership) -> bool:
    """A workspace that requires SSO reads only sessions signed in through one of its own providers (operators
    excepted): a password session opened before the switch is sent to the providers."""
    tenant = membership.tenant
    if not tenant.sso_required or getattr(request.user, "is_superuser", False):
        return True
    method = str(getattr(request, "session", {}).get(SIGNED_IN_WITH, ""))
    return method.partition(":")[2].startswith(f"{tenant.slug}/")


T = TypeVar("T")


def found_or_404(found: T | None) -> T:
    """What a selector found for this tenant, or 404 (another tenant's row is "not found", never "forbidden")."""
    if found is None:
        raise Http404("No such object.")
    return found


def tenant_member_required(view: ViewFunc | None = None, *, admin: bool = False) -> Any:
    """Resolve tenant_slug from the URL to a tenant the user belongs to, else 404."""

    def decorate(inner: ViewFunc) -> ViewFunc:
        @wraps(inner)
        def wrapper(request: HttpRequest, tenant_slug: str, *args: Any, **kwargs: Any) -> HttpResponse:
            membership = (
                Membership.objects.select_related("tenant")
                .filter(tenant__slug=tenant_slug, user=cast(User, request.user))  # login_required: a User
                .first()
            )
            if membership is None:
                operator = getattr(request.user, "is_superuser", False)
                tenant = Tenant.objects.filter(slug=tenant_slug).first() if operator else None
                if tenant is not None:  # the operator may know the tenant exists; say how to join it
                    context = {"tenant_name": tenant.name, "slug": tenant.slug, "username": request.user.get_username()}
                    return render(request, "tenants/not_a_member.html", context, status=403)
                raise Http404("No such page.")  # 404, not 403: never confirm that a tenant exists
            if admin and not membership.is_admin:
                raise Http404("No such page.")
            if not sso_satisfied(request, membership):
                return redirect(f"/sso/{membership.tenant.slug}/?next={quote(request.get_full_path())}")
            request.tenant, request.membership = membership.tenant, membership  # type: ignore[attr-defined]
            request.viewer = viewer_for(tenant=membership.tenant, membership=membership)  # type: ignore[attr-defined]
            return inner(request, *args, **kwargs)  # type: ignore[return-value]  # a streaming response too

        wrapper.page_role = "admin" if admin else "member"  # type: ignore[attr-defined]  # tests/test_page_roles.py
        return login_required(wrapper)

    return decorate(view) if view is not None else decorate


def operator_required(view: ViewFunc) -> ViewFunc:
    """Pages for the people who run the server (superusers), outside any tenant; anyone else gets 404."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not getattr(request.user, "is_superuser", False):
            raise Http404("No such page.")
        return view(request, *args, **kwargs)

    wrapper.page_role = "operator"  # type: ignore[attr-defined]
    return login_required(wrapper)


class HasTenantCredentials(permissions.BasePermission):
    """An API key, or a logged-in user; which tenant they may see is settled by TenantApiView."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return isinstance(request.auth, ApiKey) or bool(user is not None and user.is_authenticated)


class TenantApiView(APIView):
    """Base for every per-tenant endpoint: resolves `tenant_slug` to self.tenant or answers 404.

    A key for tenant A asking for tenant B's URL gets the same 404 as a tenant that does not exist.
    Browser users with a session need a membership of the tenant, and roles hold as on the pages:
    `staff` reads (GET, and the POST endpoints that only read: `reads_with_post`), `admin` also writes;
    a staff member asking to write gets the same 404 as the admin-only pages give.
    """

    permission_classes = [HasTenantCredentials]
    tenant: Tenant
    viewer: Viewer  # which documents the key or member sees, resolved once per request
    membership: Membership | None = None
    admin_only = False
    access_admin = False  # groups and access lists: an admin's session or a write key acting for all (even to read)
    reads_with_post = False  # retrieve, bootstrap, answer: a POST body, but nothing is written

    @staticmethod
    def actor(request: Request) -> str:
        """Who acts, as histories record it: the signed-in person, or the API key."""
        if isinstance(request.auth, ApiKey):
            return f"API key {request.auth.prefix}"
        return request.user.get_username() if request.user.is_authenticated else ""

    def writes(self, request: Request) -> bool:
        return request.method not in permissions.SAFE_METHODS and not self.reads_with_post

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.tenant = self._resolve_tenant(request, kwargs.get("tenant_slug", ""))
        if isinstance(request.auth, ApiKey):
            self.viewer = viewer_for(tenant=self.tenant, api_key=request.auth)
        else:
            self.viewer = viewer_for(tenant=self.tenant, membership=self.membership)
        if self.access_admin:
            self.require_access_admin(request)

    def require_access_admin(self, request: Request) -> None:
        """Changing who sees what (access lists, groups): an admin's session, or a write key acting for all."""
        key = request.auth
        if isinstance(key, ApiKey):
            if key.scope != ApiKey.Scope.WRITE or not key.acts_for_all:
                raise exceptions.PermissionDenied(
                    "Changing access or groups needs a write-scoped key that acts for all."
                )
        elif self.membership is None or not self.membership.is_admin:
            raise exceptions.NotFound("Not found.")

    def _resolve_tenant(self, request: Request, slug: str) -> Tenant:
        if isinstance(request.auth, ApiKey):
            if request.auth.tenant.slug != slug:
                raise exceptions.NotFound("Not found.")
            if (self.admin_only or self.writes(request)) and request.auth.scope != ApiKey.Scope.WRITE:
                raise exceptions.PermissionDenied("This API key is read-only; writing needs a key with scope write.")
            return request.auth.tenant
        user = request.user
        if user is None or not user.is_authenticated:
            raise exceptions.NotAuthenticated()
        membership = Membership.objects.select_related("tenant").filter(tenant__slug=slug, user=user).first()
        if membership is None or ((self.admin_only or self.writes(request)) and not membership.is_admin):
            raise exceptions.NotFound("Not found.")
        if not sso_satisfied(request, membership):
            raise exceptions.NotAuthenticated("This workspace requires signing in through its identity provider.")
        self.membership = membership
        return membership.tenant
