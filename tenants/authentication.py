"""DRF authentication by API key. Kept apart from views: DRF imports it while loading APIView."""

from __future__ import annotations

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from tenants.models import ApiKey
from tenants.services import api_key_authenticate


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Api-Key <key>`; the request's auth is the ApiKey, which names the tenant."""

    keyword = "Api-Key"

    def authenticate(self, request: Request) -> tuple[None, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None
        api_key = api_key_authenticate(raw_key.strip())
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return (None, api_key)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
