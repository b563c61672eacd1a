"""Per-API-key request throttling (rate from RAG_API_RATE, e.g. "600/min")."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from django.core.cache import cache
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


def window_count(counter: str, window: int) -> int:
    """One more event under `counter`, in a fixed window of `window` seconds that opens at its first event (wrong API
    keys from an address, password-reset requests); returns the count so far. In the cache: shared on Redis."""
    if cache.add(counter, 0, window):
        cache.set(counter + ":since", time.time(), window)
    return int(cache.incr(counter))


def window_wait(counter: str, window: int) -> int:
    """Seconds until the counter's window closes (at least 1): the Retry-After of a refusal."""
    started = cache.get(counter + ":since") or time.time()
    return max(1, int(started + window - time.time()))
