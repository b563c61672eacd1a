"""Per-API-key request throttling (rate from RAG_API_RATE, e.g. "600/min")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:  # DRF imports this module while it loads APIView: no runtime import of views
    from rest_framework.request import Request
    from rest_framework.views import APIView

from tenants.models import ApiKey


class ApiKeyRateThrottle(SimpleRateThrottle):
    scope = "api_key"

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if isinstance(request.auth, ApiKey):
            return self.cache_format % {"scope": self.scope, "ident": f"key-{request.auth.pk}"}
        user = request.user
        if user is not None and user.is_authenticated:
            return self.cache_format % {"scope": self.scope, "ident": f"user-{user.pk}"}
        return None
