"""Tenant endpoints of the REST API."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from tenants.access import TenantApiView


class TenantDetailApi(TenantApiView):
    """Who am I talking to: the tenant this key or session acts for."""

    @extend_schema_serializer(component_name="Tenant")
    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField(source="public_id")
        slug = serializers.CharField()
        name = serializers.CharField()

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request: Request, tenant_slug: str) -> Response:
        return Response(self.OutputSerializer(self.tenant).data)
