"""The tenant admin's page for SCIM tokens (beside the API keys page): make one (shown once), see when each was last
used, revoke one."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from identity import scim
from identity.models import ScimToken, ScimUser
from tenants.access import TenantRequest, found_or_404, tenant_member_required

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
