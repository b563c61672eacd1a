"""Tenant endpoints of the REST API."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tenants.access import TenantApiView


class TenantDetailApi(TenantApiView):
    """Who am I talking to: the tenant this key or session acts for."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField(source="public_id")
        slug = serializers.CharField()
        name = serializers.CharField()

    def get(self, request: Request, tenant_slug: str) -> Response:
        return Response(self.OutputSerializer(self.tenant).data)
