"""The key door: how every door that takes an API key (REST, Dify, the OpenAI-compatible /v1, MCP) turns a request's
`Authorization` header into a key, and refuses one. DRF's authentication classes (tenants/authentication.py) and
the MCP middleware (mcp_tools/http.py) are thin adapters of these three functions; nothing else parses the header,
counts a wrong key or counts a key's requests.

- `presented`: the raw key of an `Api-Key <key>` or `Bearer <key>` header (the schemes a door accepts), or None.
- `key_open`: the key, or KeyRefused: 401 for a wrong or revoked key, counted against the client's address
  (tenants/throttling.py `client_address`), 429 once that address sent RAG_API_KEY_FAILURE_LIMIT of them in the
  window. A valid key is never refused for someone else's wrong keys.
- `key_rate`: one request of the key counted against RAG_API_RATE (the counter REST's throttle uses), and the
  seconds to wait when it is past the rate.
The tenant is the key's, and its viewer `viewer_for(tenant=…, api_key=…)`, decided at each request."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings

from core.audit import audit
from tenants.audit import key_used
from tenants.models import ApiKey
from tenants.services import api_key_authenticate
from tenants.throttling import client_address, rate_hit, window_count, window_reached, window_wait

logger = logging.getLogger(__name__)

SCHEMES = ("Api-Key", "Bearer")
WRONG_KEY = "Invalid or revoked API key."


class KeyRefused(Exception):
    """What a door answers instead: `status` (401 or 429), the message, and Retry-After for a 429."""

    def __init__(self, status: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message, retry_after


def presented(authorization: str, schemes: tuple[str, ...] = SCHEMES) -> str | None:
    """The raw key of an Authorization header in one of `schemes` (case-insensitive), or None."""
    scheme, _, raw_key = (authorization or "").partition(" ")
    if scheme.lower() not in {s.lower() for s in schemes} or not raw_key.strip():
        return None
    return raw_key.strip()


def _guess_counter(client: str) -> str:
    return f"ragsite:key-failures:{client}"


def key_guessing_check(request: Any) -> None:
    """KeyRefused (429) when the request's address sent too many wrong keys lately (asked once its key was found
    wrong: a valid key is never throttled by them). `request`: anything with Django's META."""
    client = client_address(request)
    if window_reached(_guess_counter(client), settings.RAG_API_KEY_FAILURE_LIMIT):
        wait = window_wait(_guess_counter(client), settings.RAG_API_KEY_FAILURE_WINDOW_S)
        raise KeyRefused(429, "Too many wrong API keys from this address; retry later.", retry_after=wait)


def key_open(request: Any, raw_key: str) -> ApiKey:
    """The live key `raw_key` names, or KeyRefused: a wrong key is counted against the request's address and
    logged (401), or refused outright once that address is past the limit (429)."""
    api_key = api_key_authenticate(raw_key)
    if api_key is not None:
        key_used(api_key, request)
        return api_key
    raise wrong_key(request, raw_key, WRONG_KEY, what="API key")


def wrong_key(request: Any, raw_key: str, message: str, *, what: str) -> KeyRefused:
    """The refusal of a wrong key or token (an API key, a SCIM token), counted against the request's address and
    logged (401), or 429 once that address is past the limit."""
    key_guessing_check(request)
    client = client_address(request)
    failures = window_count(_guess_counter(client), settings.RAG_API_KEY_FAILURE_WINDOW_S)
    logger.warning("Wrong or revoked %s from %s (prefix %r, %d in this window)", what, client, raw_key[:8], failures)
    audit("key.refused", outcome="refused", kind=what, prefix=raw_key[:8], client=client,
          path=getattr(request, "path", ""))  # fmt: skip
    return KeyRefused(401, message)


def key_rate(api_key: ApiKey) -> int | None:
    """One request of this key counted against RAG_API_RATE; the seconds to wait when it is past the rate."""
    return rate_hit(f"key-{api_key.pk}")
