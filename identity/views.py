"""The tenant admin's identity pages: SCIM tokens (beside the API keys page: make one, shown once; see when each was
last used; revoke one), and the identity providers (OpenID Connect, SAML, LDAP): add, edit, delete, sync a
directory now, and require SSO for the workspace."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST
from django_q.tasks import async_task

from core.audit import audit
from identity import directory, oidc, saml, scim
from identity.forms import ProviderForm
from identity.models import Provider, ProviderLink, ScimToken, ScimUser
from tenants.access import TenantRequest, found_or_404, tenant_member_required
from tenants.models import Tenant

NEW_TOKEN_SESSION = "ragsite:new-scim-token"


@tenant_member_required(admin=True)
@require_http_methods(["GET", "POST"])
def scim_tokens(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    if request.method == "POST":
        token, raw = scim.token_issue(tenant=tenant, name=request.POST.get("name", "").strip(), created_by=request.user)
        request.session[NEW_TOKEN_SESSION] = {"id": str(token.public_id), "raw": raw}  # shown once, after the redirect
        return redirect("identity-pages:scim-tokens", tenant.slug)
    shown = request.session.pop(NEW_TOKEN_SESSION, None)
    context = {
        "tenant": tenant,
        "tokens": ScimToken.objects.for_tenant(tenant).select_related("created_by"),
        "created": shown["raw"] if shown else "",
        "base_url": request.build_absolute_uri(f"/api/v1/tenants/{tenant.slug}/scim/v2/"),
        "provisioned": ScimUser.objects.for_tenant(tenant).count(),
    }
    return render(request, "identity/scim_tokens.html", context)


@tenant_member_required(admin=True)
@require_POST
def scim_token_revoke(request: TenantRequest, token_id: str) -> HttpResponse:
    token = found_or_404(ScimToken.objects.for_tenant(request.tenant).filter(public_id=token_id).first())
    scim.token_revoke(token)
    messages.success(request, _("Revoked %(prefix)s…; the provider's next call fails.") % {"prefix": token.prefix})
    return redirect("identity-pages:scim-tokens", request.tenant.slug)


# --- identity providers (OpenID Connect, SAML, LDAP) ---------------------------------------------------------------


def _provider_context(request: TenantRequest, provider: Provider | None) -> dict[str, object]:
    if provider is None or provider.pk is None:
        return {}
    args = [request.tenant.slug, provider.slug]
    return {
        "redirect_uri": request.build_absolute_uri(reverse("sso:oidc-callback", args=args)),
        "sp_metadata": request.build_absolute_uri(reverse("sso:saml-metadata", args=args)),
        "acs": request.build_absolute_uri(reverse("sso:saml-acs", args=args)),
        "sign_in_url": request.build_absolute_uri(reverse("sso:providers", args=[request.tenant.slug])),
        "linked": ProviderLink.objects.filter(provider=provider).count(),
    }


@tenant_member_required(admin=True)
@require_http_methods(["GET", "POST"])
def providers(request: TenantRequest) -> HttpResponse:
    """The workspace's identity providers, and whether it requires them (SSO only)."""
    tenant = request.tenant
    if request.method == "POST":
        required = request.POST.get("sso_required") == "on"
        found = Provider.objects.for_tenant(tenant).filter(
            enabled=True, kind__in=[Provider.Kind.OIDC, Provider.Kind.SAML]
        )
        if required and not found.exists():
            messages.error(request, _("Add and enable an OpenID Connect or SAML provider before requiring it."))
        else:
            Tenant.objects.filter(pk=tenant.pk).update(sso_required=required)
            audit("tenant.sso_required", tenant=tenant.slug, actor=request.user.get_username(), value=required)
            messages.success(
                request,
                _("Members now sign in through the providers only.")
                if required
                else _("Members may sign in with a password again."),
            )
        return redirect("identity-pages:providers", tenant.slug)
    context = {
        "tenant": tenant,
        "providers": Provider.objects.for_tenant(tenant),
        "sign_in_url": request.build_absolute_uri(reverse("sso:providers", args=[tenant.slug])),
    }
    return render(request, "identity/providers.html", context)


@tenant_member_required(admin=True)
@require_http_methods(["GET", "POST"])
def provider_edit(request: TenantRequest, provider_id: str | None = None) -> HttpResponse:
    tenant = request.tenant
    provider = (
        found_or_404(Provider.objects.for_tenant(tenant).filter(public_id=provider_id).first())
        if provider_id
        else Provider(tenant=tenant)
    )
    form = ProviderForm(request.POST or None, instance=provider, tenant=tenant)
    if request.method == "POST" and form.is_valid():
        saved = form.save()
        directory.schedule_set(saved)
        _sso_still_possible(request)
        problem = _provider_problem(request, saved)
        audit(
            "provider.saved",
            tenant=tenant.slug,
            actor=request.user.get_username(),
            provider=saved.slug,
            kind=saved.kind,
            enabled=saved.enabled,
        )
        if problem:
            messages.warning(request, problem)
        else:
            messages.success(request, _("Saved %(name)s.") % {"name": saved.name})
        return redirect("identity-pages:provider-edit", tenant.slug, saved.public_id)
    context = {"tenant": tenant, "form": form, "provider": provider, **_provider_context(request, provider)}
    return render(request, "identity/provider_form.html", context)


def _sso_still_possible(request: TenantRequest) -> None:
    """A workspace that requires SSO keeps an enabled OIDC or SAML provider, or stops requiring it (its members
    would have no way in); said to the admin."""
    tenant = Tenant.objects.get(pk=request.tenant.pk)
    sign_in = Provider.objects.for_tenant(tenant).filter(
        enabled=True, kind__in=[Provider.Kind.OIDC, Provider.Kind.SAML]
    )
    if tenant.sso_required and not sign_in.exists():
        Tenant.objects.filter(pk=tenant.pk).update(sso_required=False)
        audit("tenant.sso_required", tenant=tenant.slug, actor=request.user.get_username(), value=False)
        messages.warning(request, _("No sign-in provider is left on: members may sign in with a password again."))


def _provider_problem(request: TenantRequest, provider: Provider) -> str:
    """What keeps a saved provider from working, said at once (its discovery, its metadata, its directory)."""
    try:
        if provider.kind == Provider.Kind.OIDC:
            oidc.discovery(provider)
        elif provider.kind == Provider.Kind.SAML:
            saml.metadata_check(provider, request)
    except (oidc.OidcFailed, saml.SamlFailed) as problem:
        return _("Saved, but it cannot work yet: %(problem)s") % {"problem": problem}
    return ""


@tenant_member_required(admin=True)
@require_POST
def provider_delete(request: TenantRequest, provider_id: str) -> HttpResponse:
    provider = found_or_404(Provider.objects.for_tenant(request.tenant).filter(public_id=provider_id).first())
    audit("provider.deleted", tenant=request.tenant.slug, actor=request.user.get_username(), provider=provider.slug)
    provider.enabled = False
    directory.schedule_set(provider)
    provider.delete()
    _sso_still_possible(request)
    messages.success(request, _("Deleted %(name)s; its members stay until removed.") % {"name": provider.name})
    return redirect("identity-pages:providers", request.tenant.slug)


@tenant_member_required(admin=True)
@require_POST
def provider_sync(request: TenantRequest, provider_id: str) -> HttpResponse:
    """Read an LDAP directory now, in the background worker (a large directory takes minutes: never a web worker's
    time); the schedule does it every `sync_minutes`. The page shows the run's report once it is done."""
    provider = found_or_404(
        Provider.objects.for_tenant(request.tenant).filter(public_id=provider_id, kind=Provider.Kind.LDAP).first()
    )
    async_task(directory.TASK, provider.pk)
    messages.success(request, _("Sync started: its report appears on this page when it is done."))
    return redirect("identity-pages:provider-edit", request.tenant.slug, provider.public_id)
