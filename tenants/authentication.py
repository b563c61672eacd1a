"""DRF's adapters of the key door (tenants/keys.py): `Authorization: Api-Key <key>` or `Bearer <key>` → the request's
auth is the ApiKey, which names the tenant. Kept apart from views: DRF imports it while loading APIView.

A wrong key is a 401 (or a 429 past the wrong-key limit of its address, with Retry-After); a valid key is never
refused for someone else's wrong keys. The key's request rate is DRF's throttle (tenants/throttling.py)."""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from tenants.keys import KeyRefused, key_open, presented
from tenants.models import ApiKey


def drf_refusal(refused: KeyRefused) -> exceptions.APIException:
    """The key door's refusal as DRF raises it."""
    if refused.status == 429:
        return exceptions.Throttled(wait=refused.retry_after, detail=refused.message)
    return exceptions.AuthenticationFailed(refused.message)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Api-Key <key>` or `Bearer <key>` (what OpenAI clients and most HTTP tools send): a wrong key
    is a 401 that says the key was wrong (never "no credentials were provided")."""

    schemes: tuple[str, ...] = ("Api-Key", "Bearer")
    challenge = "Api-Key"  # the WWW-Authenticate of a 401
    raise_on_failure = True

    def authenticate(self, request: Request) -> tuple[None, ApiKey] | None:
        raw_key = presented(request.META.get("HTTP_AUTHORIZATION", ""), self.schemes)
        if raw_key is None:
            return None
        try:
            return (None, key_open(request, raw_key))
        except KeyRefused as refused:
            if refused.status == 429 or self.raise_on_failure:
                raise drf_refusal(refused) from None
            return None

    def authenticate_header(self, request: Request) -> str:
        return self.challenge


class OpenAIKeyAuthentication(ApiKeyAuthentication):
    """The OpenAI-compatible door's: the same keys and schemes; its 401 asks for `Bearer`, as OpenAI's does."""

    challenge = "Bearer"


class BearerApiKeyAuthentication(ApiKeyAuthentication):
    """`Authorization: Bearer <key>` (Dify's External Knowledge API). A wrong key leaves the request
    unauthenticated, so the view answers in Dify's own error shape; guessing is throttled the same."""

    schemes = ("Bearer",)
    challenge = "Bearer"
    raise_on_failure = False
