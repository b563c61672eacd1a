"""DRF authentication by API key. Kept apart from views: DRF imports it while loading APIView.

Wrong keys are counted per client address (tenants/throttling.py `client_address`: REMOTE_ADDR unless a trusted
proxy forwards); past RAG_API_KEY_FAILURE_LIMIT in the window, that address's wrong keys are answered 429 (with
Retry-After) and each is logged. A valid key is never refused for someone else's wrong keys, even from the same
address (a shared NAT, a spoofed header): keys are 256-bit random tokens, so the limit bounds the cost and noise of
guessing, not its odds."""

from __future__ import annotations

import logging

from django.conf import settings
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from tenants.models import ApiKey
from tenants.services import api_key_authenticate
from tenants.throttling import client_address, window_count, window_reached, window_wait

logger = logging.getLogger(__name__)


def _guess_counter(request: Request) -> str:
    return f"ragsite:key-failures:{client_address(request)}"


def key_guessing_check(request: Request) -> None:
    """429 for a wrong key from an address that sent too many wrong keys lately (asked once the key was found
    wrong: a valid key is never throttled by them)."""
    if not window_reached(_guess_counter(request), settings.RAG_API_KEY_FAILURE_LIMIT):
        return
    wait = window_wait(_guess_counter(request), settings.RAG_API_KEY_FAILURE_WINDOW_S)
    raise exceptions.Throttled(wait=wait, detail="Too many wrong API keys from this address; retry later.")


def key_failure_record(request: Request, raw_key: str) -> None:
    """Count a wrong key against its address (and log it); past the limit, Throttled instead of a 401."""
    key_guessing_check(request)
    failures = window_count(_guess_counter(request), settings.RAG_API_KEY_FAILURE_WINDOW_S)
    logger.warning("Wrong or revoked API key from %s (prefix %r, %d in this window)",
                   client_address(request), raw_key[:8], failures)  # fmt: skip


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Api-Key <key>`; the request's auth is the ApiKey, which names the tenant."""

    keyword = "Api-Key"
    raise_on_failure = True

    def authenticate(self, request: Request) -> tuple[None, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw_key.strip():
            return None
        api_key = api_key_authenticate(raw_key.strip())
        if api_key is None:
            key_failure_record(request, raw_key.strip())
            if self.raise_on_failure:
                raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
            return None
        return (None, api_key)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class BearerApiKeyAuthentication(ApiKeyAuthentication):
    """`Authorization: Bearer <key>` (Dify's External Knowledge API). A wrong key leaves the request
    unauthenticated, so the view can answer in Dify's own error shape; guessing is throttled the same."""

    keyword = "Bearer"
    raise_on_failure = False
