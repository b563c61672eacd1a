"""POST /api/v1/tenants/<slug>/answer/ — a grounded, cited answer built on retrieve; SSE when streaming."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from chat import records, services
from chat.models import AnswerRecord
from chat.shapes import AnswerInput, VerdictInput, answer_payload, verdict_payload
from chat.streaming import chain, sse_response, stream_events
from inference.llm import ModelUnavailable
from knowledge.shapes import run_retrieval, scope_filters, with_when
from tenants.access import TenantApiView
from tenants.models import ApiKey

logger = logging.getLogger(__name__)


class AnswerModelBusy(exceptions.APIException):
    """503 with Retry-After (DRF sets the header from `wait`), when this process has its limit of pending answers."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The answer model is busy; retry shortly."

    def __init__(self, busy: services.AnswersBusy) -> None:
        super().__init__(str(busy))
        self.wait = busy.retry_after


class AnswerModelUnavailable(exceptions.APIException):
    """503 with Retry-After when the chat model process is starting, restarting or died during the answer."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The chat model is restarting; retry shortly."

    def __init__(self, unavailable: ModelUnavailable) -> None:
        super().__init__(unavailable.reason)
        self.wait = unavailable.retry_after


def admitted(fn, *args, **kwargs):
    """Run a step that starts an answer; a full answer queue or a model that is restarting becomes a clean 503
    with Retry-After."""
    try:
        return run_retrieval(fn, *args, **kwargs)
    except services.AnswersBusy as busy:
        raise AnswerModelBusy(busy) from busy
    except ModelUnavailable as unavailable:
        raise AnswerModelUnavailable(unavailable) from unavailable


class EventStreamRenderer(BaseRenderer):
    """Lets content negotiation accept `Accept: text/event-stream`; the stream itself bypasses renderers.

    Errors raised before the stream starts (400, 404, 409, 503) are rendered as JSON text."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data, ensure_ascii=False).encode() if data is not None else b""


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
        assistant = services.assistant_get(tenant=self.tenant, name=data.get("assistant"))
        if data.get("assistant") and assistant is None:
            raise serializers.ValidationError({"assistant": ["No assistant with that name."]})
        filters = scope_filters(data["scope"]) if "scope" in data else None
        options = services.AnswerSettings.from_assistant(assistant, top_k=data.get("top_k"), filters=filters)
        with_when(options.filters, data)
        if data["stream"] or request.accepted_renderer.format == "sse":
            stream = services.stream_answer(viewer=self.viewer, question=data["question"], options=options)
            first = admitted(next, stream)  # the Sources: a full queue or retrieval errors answer before streaming

            def on_done(result: services.Answer) -> dict[str, Any]:
                return {"answer_id": str(self._record(request, data["question"], result).public_id)}

            def events() -> Iterator[str]:
                yield from stream_events(chain(first, stream), on_done)

            return sse_response(events())
        result = admitted(services.answer_question, viewer=self.viewer, question=data["question"], options=options)
        return Response(answer_payload(result, answer_id=self._record(request, data["question"], result).public_id))

    def _record(self, request: Request, question: str, result: services.Answer) -> AnswerRecord:
        key = request.auth if isinstance(request.auth, ApiKey) else None
        return records.answer_record(viewer=self.viewer, question=question, result=result, channel="api",
                                     user=None if key else request.user, api_key=key)  # fmt: skip


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
