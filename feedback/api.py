"""The review list over REST: documents past their review date or validity, and the one-click actions on them.
Tenant admins only (an admin's session or a write key), like the curation pages."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from feedback import review
from knowledge import selectors
from knowledge.shapes import DocumentOutput
from tenants.access import TenantApiView, found_or_404


class ReviewListApi(TenantApiView):
    admin_only = True

    @extend_schema(responses={200: dict})
    def get(self, request: Request, tenant_slug: str) -> Response:
        return Response({"items": review.review_page(viewer=self.viewer)})


class ReviewActionApi(TenantApiView):
    admin_only = True

    @extend_schema_serializer(component_name="ReviewActionInput")
    class InputSerializer(serializers.Serializer):
        action = serializers.ChoiceField(choices=review.ACTIONS)
        days = serializers.IntegerField(min_value=1, max_value=3650, required=False,
                                        help_text="still_true: due again in this many days.")  # fmt: skip
        successor = serializers.CharField(
            max_length=1900, required=False, allow_blank=True,
            help_text="superseded_by: the newer document (id, document_id or key).",
        )  # fmt: skip

    @extend_schema(request=InputSerializer, responses={200: DocumentOutput})
    def post(self, request: Request, tenant_slug: str, document_id: str) -> Response:
        document = found_or_404(selectors.document_get(viewer=self.viewer, document_id=document_id))
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data: dict[str, Any] = incoming.validated_data
        try:
            changed = review.review_act(viewer=self.viewer, document=document, action=data["action"],
                                        actor=self.actor(request), days=data.get("days"),
                                        successor=data.get("successor", ""))  # fmt: skip
        except review.ReviewRefused as exc:
            raise serializers.ValidationError({"detail": [str(exc)]}) from exc
        return Response(DocumentOutput(changed, context={"sees": self.viewer.sees}).data)
