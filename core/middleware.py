"""Response headers every page and API answer carries: a Content-Security-Policy, a Permissions-Policy,
and, for tenant pages and the API, `Cache-Control: private, no-store` (tenant data never sits in a shared
or browser cache)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
# The interactive API docs (Swagger UI from drf-spectacular-sidecar) start from an inline script.
CSP_API_DOCS = CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=(), interest-cohort=()"
PRIVATE_PREFIXES = ("/t/", "/api/", "/v1/", "/admin/", "/accounts/")


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", CSP_API_DOCS if request.path == "/api/v1/docs/" else CSP)
        response.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        if request.path.startswith(PRIVATE_PREFIXES):
            patch_cache_control(response, private=True, no_store=True)
        return response
