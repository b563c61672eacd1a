"""Pages for people and workspaces: home, a new tenant (operators), the members of a tenant and its API keys (its
admins), invitations (whoever holds the link) and password resets (anyone, throttled)."""

from __future__ import annotations

from datetime import datetime
from datetime import time as day_time
from typing import Any, cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from tenants import services
from tenants.access import TenantRequest, found_or_404, operator_required, tenant_member_required
from tenants.models import ApiKey, Group, Invitation, Membership, MembershipEvent, Tenant
from tenants.principals import ALL, TENANT, UnknownPrincipal, principal_names
from tenants.throttling import client_address, window_count, window_wait

admin_required = tenant_member_required(admin=True)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The workspaces the user belongs to; an operator also sees the others, each with a button to join it."""
    user = cast(User, request.user)
    memberships = Membership.objects.filter(user=user).select_related("tenant")
    others = Tenant.objects.exclude(pk__in=memberships.values("tenant_id")) if user.is_superuser else []
    return render(request, "home.html", {"memberships": memberships, "other_tenants": others})


def _site(request: HttpRequest) -> str:
    """The address links in e-mails start with: the one this request came to."""
    return request.build_absolute_uri("/")


@operator_required
@require_http_methods(["GET", "POST"])
def tenant_new(request: HttpRequest) -> HttpResponse:
    """Operators (superusers) create a tenant, join it as admin if they choose (recorded), and invite its first
    admin by e-mail or username; anyone else gets 404."""
    operator = cast(User, request.user)
    form = {"slug": "", "name": "", "admin": "", "join": "on"}
    if request.method == "POST":
        form = {key: (request.POST.get(key) or "").strip() for key in form}
        if form["admin"] and form["admin"].lower() in (operator.get_username().lower(), operator.email.lower()):
            form["join"], form["admin"] = "on", ""  # naming oneself is joining
        try:
            if not form["admin"] and not form["join"]:
                raise services.MembershipRefused("A workspace needs an admin: name one, or join it yourself.")
            with transaction.atomic():
                tenant = services.tenant_create(slug=form["slug"], name=form["name"])
                if form["join"]:
                    services.operator_join(tenant=tenant, operator=operator)
                invited = (services.member_invite(tenant=tenant, actor=operator, who=form["admin"],
                                                  role=Membership.Role.ADMIN, base_url=_site(request))
                           if form["admin"] and form["admin"] != operator.get_username() else None)  # fmt: skip
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
        except IntegrityError:
            messages.error(request, _("A tenant named %(slug)r already exists.") % {"slug": form["slug"]})
        except services.MembershipRefused as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request,
                (_("Created %(name)s and joined it as admin.") if form["join"] else _("Created %(name)s."))
                % {"name": tenant.name},
            )
            if invited is not None:
                _invited(request, invited)
            return redirect("workspace:members", tenant.slug) if form["join"] else redirect("home")
    return render(request, "tenants/tenant_new.html", {"form": form, "invitation_days": settings.RAG_INVITATION_DAYS})


@operator_required
@require_POST
def tenant_join(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """An operator joins a workspace as admin: an explicit act, in the workspace's audit log."""
    tenant = found_or_404(Tenant.objects.filter(slug=tenant_slug).first())
    services.operator_join(tenant=tenant, operator=cast(User, request.user))
    messages.success(
        request, _("You joined %(name)s as admin; its members see it in the audit log.") % {"name": tenant.name}
    )
    return redirect("workspace:members", tenant.slug)


@admin_required
@require_http_methods(["GET", "POST"])
def members(request: TenantRequest) -> HttpResponse:
    """The tenant's members and invitations: invite by e-mail (or an existing username) with a role, send an
    invitation again or revoke it, change roles, remove; every change audited."""
    tenant = request.tenant
    if request.method == "POST":
        try:
            invited = services.member_invite(tenant=tenant, actor=request.user, who=request.POST.get("who", ""),
                                             role=request.POST.get("role", Membership.Role.STAFF),
                                             base_url=_site(request))  # fmt: skip
        except services.MembershipRefused as exc:
            messages.error(request, str(exc))
        else:
            _invited(request, invited)
        return redirect("workspace:members", tenant.slug)
    context = {
        "tenant": tenant,
        "groups": Group.objects.for_tenant(tenant).prefetch_related("members"),
        "members": Membership.objects.for_tenant(tenant).select_related("user").order_by("user__username"),
        "invitations": Invitation.objects.for_tenant(tenant).select_related("created_by")[:100],
        "events": MembershipEvent.objects.for_tenant(tenant).select_related("actor")[:50],
        "roles": Membership.Role.choices,
        "invitation_days": settings.RAG_INVITATION_DAYS,
    }
    return render(request, "tenants/members.html", context)


@admin_required
@require_POST
def invitation_change(request: TenantRequest, invitation_id: str) -> HttpResponse:
    """Send an invitation again (a new link, a new expiry) or revoke it."""
    tenant = request.tenant
    invitation = found_or_404(Invitation.objects.for_tenant(tenant).filter(public_id=invitation_id).first())
    try:
        if request.POST.get("action") == "revoke":
            services.invitation_revoke(tenant=tenant, actor=request.user, invitation=invitation)
            messages.success(
                request,
                _("Revoked the invitation to %(email)s; its link no longer works.") % {"email": invitation.email},
            )
        else:
            services.invitation_resend(tenant=tenant, actor=request.user, invitation=invitation,
                                       base_url=_site(request))  # fmt: skip
            messages.success(
                request,
                _(
                    "Sent the invitation to %(email)s again; it expires %(until)s UTC (the earlier "
                    "link no longer works)."
                )
                % {"email": invitation.email, "until": date_format(invitation.expires_at, "d M Y H:i")},
            )
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    return redirect("workspace:members", tenant.slug)


@require_http_methods(["GET", "POST"])
def invitation_accept(request: HttpRequest, token: str) -> HttpResponse:
    """The link of an invitation e-mail: choose a username and a password, and the account joins the workspace."""
    invitation = services.invitation_for_token(token)
    if invitation is None or invitation.state != "pending":
        state = invitation.state if invitation is not None else "unknown"
        return render(request, "tenants/invitation_accept.html", {"state": state}, status=410 if invitation else 404)
    form = {"username": request.POST.get("username", invitation.email.split("@")[0])}
    errors: list[str] = []
    if request.method == "POST":
        password = request.POST.get("password1", "")
        if password != request.POST.get("password2", ""):
            errors.append(_("The two passwords differ."))
        else:
            try:
                user = services.invitation_accept(invitation=invitation, username=form["username"], password=password)
            except ValidationError as exc:
                errors.extend(exc.messages)
            else:
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                messages.success(request, _("Welcome to %(name)s.") % {"name": invitation.tenant.name})
                return redirect("home")
    context = {"state": "pending", "invitation": invitation, "form": form, "errors": errors}
    return render(request, "tenants/invitation_accept.html", context, status=400 if errors else 200)


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
            messages.success(request, _("Removed %(name)s.") % {"name": membership.user.get_username()})
        else:
            role = request.POST.get("role", "")
            services.member_set_role(tenant=tenant, actor=request.user, membership=membership, role=role)
            messages.success(
                request,
                _("%(name)s is now %(role)s.")
                % {"name": membership.user.get_username(), "role": Membership.Role(role).label.lower()},
            )
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    return redirect("workspace:members", tenant.slug)


@admin_required
@require_POST
def group_change(request: TenantRequest) -> HttpResponse:
    """Groups of the members page: create or delete one, add a member to one, remove a member from one (audited)."""
    tenant, action = request.tenant, request.POST.get("action", "")
    try:
        if action == "create":
            group = services.group_create(tenant=tenant, name=request.POST.get("name", ""))
            messages.success(request, _("Created group:%(group)s.") % {"group": group.name})
        elif action == "delete":
            group = found_or_404(services.group_get(tenant=tenant, name=request.POST.get("group", "")))
            changed = services.group_delete(tenant=tenant, actor=request.user, group=group)
            messages.success(
                request,
                _("Deleted group:%(group)s; it was removed from %(count)d access lists and keys.")
                % {"group": group.name, "count": changed},
            )
        else:
            group = found_or_404(services.group_get(tenant=tenant, name=request.POST.get("group", "")))
            member = found_or_404(
                Membership.objects.for_tenant(tenant).select_related("user")
                .filter(user__username=request.POST.get("username", "")).first()
            )  # fmt: skip
            if action == "add":
                services.group_member_add(tenant=tenant, actor=request.user, group=group, user=member.user)
                messages.success(
                    request,
                    _("Added %(name)s to group:%(group)s.") % {"name": member.user.get_username(), "group": group.name},
                )
            elif action == "remove":
                services.group_member_remove(tenant=tenant, actor=request.user, group=group, user=member.user)
                messages.success(
                    request,
                    _("Removed %(name)s from group:%(group)s.")
                    % {"name": member.user.get_username(), "group": group.name},
                )
    except (ValidationError, services.MembershipRefused) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("workspace:members", tenant.slug)


def _invited(request: HttpRequest, invited: services.Invited) -> None:
    if invited.invitation is not None:
        invitation = invited.invitation
        messages.success(
            request,
            _("Sent an invitation to %(email)s as %(role)s; its link works until %(until)s UTC.")
            % {
                "email": invitation.email,
                "role": invitation.get_role_display().lower(),
                "until": date_format(invitation.expires_at, "d M Y H:i"),
            },
        )
    elif invited.membership is not None:
        membership = invited.membership
        messages.success(
            request,
            _("Added %(name)s as %(role)s.")
            % {"name": membership.user.get_username(), "role": membership.get_role_display().lower()},
        )


# --- API keys -----------------------------------------------------------------------------------------------------
NEW_KEY_SESSION = "ragsite:new-api-key"


@admin_required
@require_http_methods(["GET", "POST"])
def api_keys(request: TenantRequest) -> HttpResponse:
    """The tenant's API keys: create one (shown once), list them with prefix, scope, whose view, last use and
    expiry, revoke; every create and revoke in the audit log."""
    tenant = request.tenant
    form: dict[str, Any] = {"name": "", "scope": ApiKey.Scope.READ, "acts_for": [TENANT], "expires": ""}
    status = 200
    if request.method == "POST":
        name, scope = request.POST.get("name", "").strip()[:100], request.POST.get("scope", "")
        acts_for, expires = request.POST.getlist("acts_for") or [TENANT], request.POST.get("expires", "")
        form = {"name": name, "scope": scope, "acts_for": acts_for, "expires": expires}
        try:
            expires_at = _end_of_day(expires) if expires else None
            api_key, raw_key = services.api_key_issue(
                tenant=tenant, name=name, created_by=request.user, scope=scope, acts_for=acts_for,
                expires_at=expires_at,
            )  # fmt: skip
        except (ValueError, UnknownPrincipal) as exc:
            messages.error(request, str(exc))
            status = 400
        else:
            # Shown once, on the page this redirects to (a reload there neither shows it again nor makes another).
            request.session[NEW_KEY_SESSION] = {"id": str(api_key.public_id), "raw": raw_key}
            return redirect("workspace:api-keys", tenant.slug)
    shown = request.session.pop(NEW_KEY_SESSION, None) if request.method == "GET" else None
    created = None
    if shown:
        key = ApiKey.objects.for_tenant(tenant).filter(public_id=shown["id"]).first()
        created = {"key": key, "raw": shown["raw"]} if key is not None else None
    context = {
        "tenant": tenant,
        "keys": ApiKey.objects.for_tenant(tenant).select_related("created_by"),
        "created": created,
        "form": form,
        "scopes": ApiKey.Scope.choices,
        "principals": _principal_choices(tenant),
        "events": MembershipEvent.objects.for_tenant(tenant).filter(action__startswith="key_")
        .select_related("actor")[:30],
        "today": timezone.localdate(),
        "site": _site(request).rstrip("/"),
        "shown_key": created["raw"] if created else "<key>",
    }  # fmt: skip
    return render(request, "tenants/api_keys.html", context, status=status)


def _end_of_day(value: str) -> datetime:
    try:
        day = datetime.strptime(value, "%Y-%m-%d").date()
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a date (YYYY-MM-DD).") from exc
    return timezone.make_aware(datetime.combine(day, day_time.max))


def _principal_choices(tenant: Tenant) -> list[tuple[str, str]]:
    """Whom a new key may act for: the tenant's principals, and `all`."""
    labels = {TENANT: _("everyone in the workspace (documents open to the tenant)")}
    named = [(name, labels.get(name, name)) for name in principal_names(tenant)]
    return [*named, (ALL, _("all: every document, whatever its access list"))]


@admin_required
@require_POST
def api_key_revoke(request: TenantRequest, key_id: str) -> HttpResponse:
    api_key = found_or_404(ApiKey.objects.for_tenant(request.tenant).filter(public_id=key_id).first())
    if services.api_key_revoke(tenant=request.tenant, api_key=api_key, actor=request.user):
        messages.success(
            request,
            _("Revoked %(prefix)s… (%(name)s); it fails from now on.")
            % {"prefix": api_key.prefix, "name": api_key.name or _("unnamed")},
        )
    return redirect("workspace:api-keys", request.tenant.slug)


# --- password reset -----------------------------------------------------------------------------------------------
class ThrottledPasswordResetView(auth_views.PasswordResetView):
    """Django's own reset view (the same "sent, if an account has that address" page whether or not it has one),
    with requests counted per client address and per address typed, as sign-in failures are counted: past
    RAG_LOGIN_FAILURE_LIMIT in the cool-off window, 429 until it ends."""

    def form_valid(self, form: Any) -> HttpResponse:
        window = int(settings.AXES_COOLOFF_TIME.total_seconds())
        client = client_address(self.request)
        counters = [f"ragsite:reset:ip:{client}",
                    f"ragsite:reset:email:{form.cleaned_data['email'].strip().lower()}"]  # fmt: skip
        for counter in counters:
            if window_count(counter, window) > settings.AXES_FAILURE_LIMIT:
                minutes = window_wait(counter, window) // 60 + 1
                response = render(self.request, "registration/password_reset_form.html", {
                    "form": form, "throttled": f"Too many reset requests; try again in {minutes} minute(s)."},
                    status=429)  # fmt: skip
                response["Retry-After"] = str(minutes * 60)
                return response
        return super().form_valid(form)
