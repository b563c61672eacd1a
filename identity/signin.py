"""Signing in: the site's login page (a password, or a button per provider of the workspace named in `next`; a
workspace that requires SSO refuses its members' passwords), each workspace's list of providers, and the provider
round trips (OpenID Connect's redirect and callback, SAML's redirect, assertion consumer and metadata). Whatever a
provider says goes through identity/people.py; a refusal is a page that says why, with nothing created."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib.auth import login
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from core.audit import audit
from identity import oidc, people, saml
from identity.models import Provider
from tenants.models import SIGNED_IN_WITH, Membership, Tenant

PENDING_SESSION = "ragsite:sso-pending"
SIGN_IN_KINDS = (Provider.Kind.OIDC, Provider.Kind.SAML)
TENANT_IN_PATH = re.compile(r"^/t/([a-z0-9-]{1,50})/")


def public(view: Any) -> Any:
    view.page_role = "public"  # tests/test_page_roles.py: anyone, signed in or not
    return view


class PasswordForm(AuthenticationForm):
    """Django's sign-in form, refusing a password for anyone who belongs to a workspace that requires SSO (its
    operators excepted: they keep a way in when a provider is down)."""

    def confirm_login_allowed(self, user: Any) -> None:
        super().confirm_login_allowed(user)
        if not user.is_superuser and Membership.objects.filter(user=user, tenant__sso_required=True).exists():
            raise forms.ValidationError(
                _("Your workspace signs you in through your company's identity provider: use its button below."),
                code="sso_required",
            )


class SignInView(LoginView):
    form_class = PasswordForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        match = TENANT_IN_PATH.match(str(context.get("next") or ""))
        context["providers"] = _sign_in_providers(match.group(1)) if match else []
        return context


def _sign_in_providers(tenant_slug: str) -> list[Provider]:
    return list(
        Provider.objects.filter(tenant__slug=tenant_slug, enabled=True, kind__in=SIGN_IN_KINDS).select_related("tenant")
    )


def _provider(tenant_slug: str, provider_slug: str, kind: str | None = None) -> Provider:
    provider = (
        Provider.objects.select_related("tenant")
        .filter(tenant__slug=tenant_slug, slug=provider_slug, enabled=True, kind__in=SIGN_IN_KINDS)
        .first()
    )
    if provider is None or (kind is not None and provider.kind != kind):
        raise Http404("No such sign-in.")
    return provider


def _refused(request: HttpRequest, provider: Provider | None, message: str, status: int = 403) -> HttpResponse:
    return render(request, "identity/sign_in_refused.html", {"provider": provider, "message": message}, status=status)


def _next(request: HttpRequest, wanted: str, tenant: Tenant) -> str:
    if wanted and url_has_allowed_host_and_scheme(wanted, {request.get_host()}, require_https=request.is_secure()):
        return wanted
    return reverse("chat:chat-page", args=[tenant.slug])


@public
@require_GET
def providers(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """The workspace's sign-in buttons (404 when it has none: a workspace is only named by its own providers)."""
    found = _sign_in_providers(tenant_slug)
    if not found:
        raise Http404("No such page.")
    return render(
        request,
        "identity/sign_in.html",
        {"providers": found, "tenant": found[0].tenant, "next": request.GET.get("next", "")},
    )


def _redirect_uri(request: HttpRequest, provider: Provider) -> str:
    return request.build_absolute_uri(reverse("sso:oidc-callback", args=[provider.tenant.slug, provider.slug]))


@public
@require_GET
def start(request: HttpRequest, tenant_slug: str, provider_slug: str) -> HttpResponse:
    provider = _provider(tenant_slug, provider_slug)
    wanted = request.GET.get("next", "")
    try:
        if provider.kind == Provider.Kind.OIDC:
            url, pending = oidc.begin(provider, _redirect_uri(request, provider))
        else:
            url, pending = saml.begin(provider, request)
    except (oidc.OidcFailed, saml.SamlFailed) as failure:
        return _refused(request, provider, str(failure), status=502)
    pending["next"] = wanted
    request.session[PENDING_SESSION] = pending
    return redirect(url)


def _finish(request: HttpRequest, provider: Provider, person: people.Person) -> HttpResponse:
    pending = request.session.pop(PENDING_SESSION, None) or {}
    try:
        user = people.admit(provider, person)
    except people.Refused as refusal:
        return _refused(request, provider, str(refusal))
    request.session[SIGNED_IN_WITH] = f"{provider.kind}:{provider.tenant.slug}/{provider.slug}"
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    people.signed_in(provider, user)
    return redirect(_next(request, str(pending.get("next") or ""), provider.tenant))


def _failed(request: HttpRequest, provider: Provider, message: str) -> HttpResponse:
    """A provider's answer refused. It reaches the workspace's audit log only when this browser had started a sign-in:
    anyone may post to these public addresses, and a stranger's junk must not fill an admin's log (the audit
    stream's file still has every refusal)."""
    if request.session.pop(PENDING_SESSION, None):
        people.refused(provider, "", message)
    else:
        audit("sign_in", tenant=provider.tenant.slug, outcome="refused", method=f"{provider.kind}:{provider.slug}",
              detail=message[:300])  # fmt: skip
    return _refused(request, provider, message, status=400)


@public
@require_GET
def oidc_callback(request: HttpRequest, tenant_slug: str, provider_slug: str) -> HttpResponse:
    provider = _provider(tenant_slug, provider_slug, Provider.Kind.OIDC)
    try:
        person = oidc.complete(
            provider, request.session.get(PENDING_SESSION), request.GET, _redirect_uri(request, provider)
        )
    except oidc.OidcFailed as failure:
        return _failed(request, provider, str(failure))
    return _finish(request, provider, person)


@public
@csrf_exempt  # the IdP's page posts here (HTTP-POST binding); the signed assertion and its InResponseTo are the check
@require_POST
def saml_acs(request: HttpRequest, tenant_slug: str, provider_slug: str) -> HttpResponse:
    provider = _provider(tenant_slug, provider_slug, Provider.Kind.SAML)
    if PENDING_SESSION not in request.session and request.POST.get("same_site") != "1":
        # The IdP's page posts from another site, so the browser leaves out the session cookie (SameSite=Lax):
        # post the same answer again from this site's own page, with the cookie, where the sign-in was started.
        return render(
            request,
            "identity/saml_resubmit.html",
            {
                "fields": {
                    "SAMLResponse": request.POST.get("SAMLResponse", ""),
                    "RelayState": request.POST.get("RelayState", ""),
                }
            },
        )
    try:
        person = saml.complete(provider, request, request.session.get(PENDING_SESSION))
    except saml.SamlFailed as failure:
        return _failed(request, provider, str(failure))
    return _finish(request, provider, person)


@public
@require_GET
def saml_metadata(request: HttpRequest, tenant_slug: str, provider_slug: str) -> HttpResponse:
    provider = _provider(tenant_slug, provider_slug, Provider.Kind.SAML)
    return HttpResponse(saml.sp_metadata(provider, request), content_type="application/samlmetadata+xml")
