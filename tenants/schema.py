"""OpenAPI description of the API-key authentication (loaded by TenantsConfig.ready)."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.authentication.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <key>` (or `Bearer <key>`) — a key belongs to exactly one tenant.",
        }


class BearerApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.authentication.BearerApiKeyAuthentication"
    name = "BearerApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "Dify's External Knowledge API: `Bearer <key>`, the same tenant API keys.",
        }


class OpenAIKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.authentication.OpenAIKeyAuthentication"
    name = "OpenAIBearerKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The OpenAI-compatible door: `Bearer <key>` (or `Api-Key <key>`), the same tenant API keys.",
        }
