"""POST /api/v1/tenants/<slug>/answer/ — a grounded, cited answer built on retrieve; SSE when streaming."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agent_sessions import services as sessions
from chat import receipts, recipe, records, services
from chat.models import AnswerRecord
from chat.shapes import AnswerInput, VerdictInput, answer_payload, session_fields, verdict_payload
from chat.streaming import EventStreamRenderer, sse_response, stream_events
from core import transport
from knowledge.shapes import scope_filters
from tenants.access import TenantApiView
from tenants.models import ApiKey

logger = logging.getLogger(__name__)


class AnswerApi(TenantApiView):
    """A grounded answer: JSON, or Server-Sent Events with `"stream": true` or `Accept: text/event-stream`."""

    reads_with_post = True
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    InputSerializer = AnswerInput

    @extend_schema(request=InputSerializer, responses={200: dict})
    def post(self, request: Request, tenant_slug: str) -> Response | StreamingHttpResponse:
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        key = request.auth if isinstance(request.auth, ApiKey) else None
        session = None
        if data.get("session"):
            owner = {"api_key": key} if key else {"user": request.user}
            session = transport.guarded(sessions.session_get, tenant=self.tenant, public_id=data["session"], **owner)
        asked = recipe.Asked(question=data["question"], assistant_name=data.get("assistant"), top_k=data.get("top_k"),
                             filters=scope_filters(data["scope"]) if "scope" in data else None, when=data,
                             session=session, max_tokens=data.get("max_tokens"))  # fmt: skip
        try:
            answering = recipe.Answering(viewer=self.viewer, asked=asked, channel="api",
                                         user=None if key else request.user, api_key=key)  # fmt: skip
        except recipe.UnknownAssistant as exc:
            raise serializers.ValidationError({"assistant": ["No assistant with that name."]}) from exc
        if data["stream"] or request.accepted_renderer.format == "sse":
            stream = transport.guarded(answering.stream)  # a full queue or retrieval errors answer before streaming

            def on_done(result: services.Answer) -> dict[str, Any]:
                return {"answer_id": str(answering.record(result).public_id), **session_fields(answering.read)}

            return sse_response(stream_events(stream, on_done))
        result, record = transport.guarded(answering.json)
        return Response(answer_payload(result, answer_id=record.public_id, read=answering.read))


class VerdictApi(TenantApiView):
    """A verdict on an answer this tenant gave (`answer_id` from /answer, the chat, or MCP): 👍 or 👎 with a
    reason, the claims it is about, the right answer or the document that holds it. Needs a write-scoped key; a
    thumbs-down goes to the tenant admins' curation queue."""

    InputSerializer = VerdictInput

    @extend_schema(request=InputSerializer, responses={201: dict})
    def post(self, request: Request, tenant_slug: str, answer_id: str) -> Response:
        record = records.answer_get(tenant=self.tenant, answer_id=answer_id)
        if record is None:
            raise exceptions.NotFound("No answer with that id in this tenant.")
        incoming = self.InputSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        key = request.auth if isinstance(request.auth, ApiKey) else None
        try:
            verdict = records.verdict_record(
                viewer=self.viewer, record=record, given=records.VerdictGiven(**incoming.validated_data), channel="api",
                user=None if key else request.user, api_key=key,
            )  # fmt: skip
        except records.VerdictInvalid as invalid:
            raise serializers.ValidationError(invalid.errors) from invalid
        return Response(verdict_payload(verdict), status=status.HTTP_201_CREATED)


class ReceiptApi(TenantApiView):
    """An answer's receipt (chat/receipts.py): who asked and by which door, the question, the model, the document
    versions it read, each claim with its evidence sentences and `now` — what that evidence is today (`unchanged`,
    `changed`, `superseded`, `expired`, `retired`, `no_longer_available`), computed when read. Only the asker (the
    same member or key) and the tenant's admins read it; anyone else is told it does not exist."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request, tenant_slug: str, answer_id: str) -> Response:
        record = records.answer_get(tenant=self.tenant, answer_id=answer_id)
        key = request.auth if isinstance(request.auth, ApiKey) else None
        user = None if key is not None else request.user
        if record is None or not receipts.may_read(record, self.viewer, user=user, api_key=key):
            raise exceptions.NotFound("No answer with that id in this tenant.")
        return Response(receipts.receipt(record, self.viewer))


class ReceiptExportApi(TenantApiView):
    """Receipts as JSON lines (`application/x-ndjson`), oldest first, for an auditor: a key or a member gets the
    answers it asked; a tenant admin every answer of the tenant. `since` / `until` (ISO dates) narrow the range."""

    @extend_schema(responses={200: str})
    def get(self, request: Request, tenant_slug: str) -> StreamingHttpResponse:
        key = request.auth if isinstance(request.auth, ApiKey) else None
        answers = AnswerRecord.objects.for_tenant(self.tenant)
        if key is not None:
            answers = answers.filter(api_key=key)
        elif not self.viewer.sees_all or not receipts.may_read_all(self.viewer, request.user):
            answers = answers.filter(user_id=request.user.pk or 0)
        for name, lookup in (("since", "created_at__date__gte"), ("until", "created_at__date__lte")):
            raw = request.query_params.get(name, "")
            if raw:
                try:
                    answers = answers.filter(**{lookup: dt.date.fromisoformat(raw)})
                except ValueError as exc:
                    raise serializers.ValidationError({name: ["An ISO date, e.g. 2026-12-01."]}) from exc
        lines = receipts.export_lines(answers, self.viewer)
        return StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
