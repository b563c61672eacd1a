"""Pages for people and workspaces: home, a new tenant (operators), the members of a tenant (its admins)."""

from __future__ import annotations

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from tenants import services
from tenants.access import TenantRequest, found_or_404, operator_required, tenant_member_required
from tenants.models import Group, Membership, MembershipEvent

admin_required = tenant_member_required(admin=True)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    memberships = Membership.objects.filter(user=cast(User, request.user)).select_related("tenant")
    return render(request, "home.html", {"memberships": memberships})


@operator_required
@require_http_methods(["GET", "POST"])
def tenant_new(request: HttpRequest) -> HttpResponse:
    """Operators (superusers) create a tenant and invite its first admin; anyone else gets 404."""
    operator = cast(User, request.user)
    form = {"slug": "", "name": "", "admin": ""}
    if request.method == "POST":
        form = {key: (request.POST.get(key) or "").strip() for key in form}
        try:
            with transaction.atomic():
                tenant = services.tenant_create(slug=form["slug"], name=form["name"])
                invitation = services.member_invite(tenant=tenant, actor=operator, who=form["admin"] or
                                                    operator.get_username(), role=Membership.Role.ADMIN)  # fmt: skip
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        except IntegrityError:
            messages.error(request, f"A tenant named {form['slug']!r} already exists.")
        except services.MembershipRefused as exc:
            messages.error(request, str(exc))
        else:
            _invited(request, invitation)
            messages.success(
                request, f"Created {tenant.name}; {invitation.membership.user.get_username()} is its admin."
            )
            if invitation.membership.user == operator:
                return redirect("workspace:members", tenant.slug)
            return redirect("home")
    return render(request, "tenants/tenant_new.html", {"form": form})


@admin_required
@require_http_methods(["GET", "POST"])
def members(request: TenantRequest) -> HttpResponse:
    """The tenant's members: invite by username or e-mail with a role, change roles, remove; every change audited."""
    tenant = request.tenant
    if request.method == "POST":
        try:
            invitation = services.member_invite(tenant=tenant, actor=request.user, who=request.POST.get("who", ""),
                                                role=request.POST.get("role", Membership.Role.STAFF))  # fmt: skip
        except services.MembershipRefused as exc:
            messages.error(request, str(exc))
        else:
            _invited(request, invitation)
        return redirect("workspace:members", tenant.slug)
    context = {
        "tenant": tenant,
        "groups": Group.objects.for_tenant(tenant).prefetch_related("members"),
        "members": Membership.objects.for_tenant(tenant).select_related("user").order_by("user__username"),
        "events": MembershipEvent.objects.for_tenant(tenant).select_related("actor")[:50],
        "roles": Membership.Role.choices,
    }
    return render(request, "tenants/members.html", context)


@admin_required
@require_POST
def member_change(request: TenantRequest, membership_id: str) -> HttpResponse:
    tenant = request.tenant
    membership = found_or_404(
        Membership.objects.for_tenant(tenant).select_related("user").filter(public_id=membership_id).first()
    )
    try:
        if request.POST.get("action") == "remove":
            services.member_remove(tenant=tenant, actor=request.user, membership=membership)
            messages.success(request, f"Removed {membership.user.get_username()}.")
        else:
            role = request.POST.get("role", "")
            services.member_set_role(tenant=tenant, actor=request.user, membership=membership, role=role)
            messages.success(request, f"{membership.user.get_username()} is now {role}.")
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    return redirect("workspace:members", tenant.slug)


@admin_required
@require_POST
def group_change(request: TenantRequest) -> HttpResponse:
    """Groups of the members page: create one, add a member to one, remove a member from one (audited)."""
    tenant, action = request.tenant, request.POST.get("action", "")
    try:
        if action == "create":
            group = services.group_create(tenant=tenant, name=request.POST.get("name", ""))
            messages.success(request, f"Created group:{group.name}.")
        else:
            group = found_or_404(services.group_get(tenant=tenant, name=request.POST.get("group", "")))
            member = found_or_404(
                Membership.objects.for_tenant(tenant).select_related("user")
                .filter(user__username=request.POST.get("username", "")).first()
            )  # fmt: skip
            if action == "add":
                services.group_member_add(tenant=tenant, actor=request.user, group=group, user=member.user)
                messages.success(request, f"Added {member.user.get_username()} to group:{group.name}.")
            elif action == "remove":
                services.group_member_remove(tenant=tenant, actor=request.user, group=group, user=member.user)
                messages.success(request, f"Removed {member.user.get_username()} from group:{group.name}.")
    except (ValidationError, services.MembershipRefused) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("workspace:members", tenant.slug)


def _invited(request: HttpRequest, invitation: services.Invitation) -> None:
    username = invitation.membership.user.get_username()
    if invitation.set_password_path:
        link = request.build_absolute_uri(invitation.set_password_path)
        messages.info(request, f"Created the account {username}. Send them this one-time link to set their "
                               f"password: {link}")  # fmt: skip
    else:
        messages.success(request, f"Added {username} as {invitation.membership.get_role_display().lower()}.")
