"""POST /api/v1/tenants/<slug>/answer/ — a grounded, cited answer built on retrieve; SSE when streaming."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from chat import services
from inference.llm import ModelUnavailable
from knowledge.api import HitSerializer, ScopeSerializer, StoreUnavailable, run_retrieval, scope_filters
from knowledge.retrieval import IndexMismatch
from knowledge.vectorstore import StoreBusy
from ragsite.errors import error_reference
from tenants.access import TenantApiView

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


def admitted(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
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


def sources_payload(sources: services.Sources) -> dict[str, Any]:
    return {
        "hits": HitSerializer(sources.hits, many=True).data,
        "excerpts": [services.citation_of(n, hit) for n, hit in enumerate(sources.excerpts, 1)],
    }


def answer_payload(result: services.Answer) -> dict[str, Any]:
    return {
        "answer": result.answer,
        "generated": result.generated,
        "model": result.model,
        "status": result.status,
        "reason": result.reason,
        "citations": result.citations,
        "claims": result.claims,
        "hits": HitSerializer(result.hits, many=True).data,
        "ttft_ms": None if result.ttft_ms is None else round(result.ttft_ms, 1),
        "total_ms": round(result.total_ms, 1),
        "timings": result.timings,
    }


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def sse_response(events: Iterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # let nginx pass tokens through as they come
    return response


def stream_events(stream: Iterator[Any], on_done=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """sources (as soon as retrieval is done) → token… → done; `error` in-band if it fails midway.

    When the client disconnects, the server closes this generator; closing `stream` stops generation."""
    try:
        for item in stream:
            if isinstance(item, services.Answer):
                payload = answer_payload(item)
                if on_done is not None:
                    payload.update(on_done(item) or {})
                yield sse("done", payload)
            elif isinstance(item, services.Sources):
                yield sse("sources", sources_payload(item))
            else:
                yield sse("token", {"delta": item})
    except IndexMismatch as exc:  # the operator's remedy ("manage.py reindex …"), not internals
        yield sse("error", {"detail": str(exc)})
    except ModelUnavailable as exc:  # the model process died mid-answer: say so plainly, and when to retry
        yield sse("error", {"detail": exc.reason, "retry_after": exc.retry_after})
    except StoreBusy:
        yield sse("error", {"detail": StoreUnavailable.default_detail})
    except Exception:  # the stream has started: report in-band, the status line is already sent
        reference = error_reference()
        logger.exception("Answer stream failed (ref %s)", reference)
        yield sse("error", {"detail": "The answer failed; the error was logged.", "reference": reference})
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


class AnswerApi(TenantApiView):
    """A grounded answer: JSON, or Server-Sent Events with `"stream": true` or `Accept: text/event-stream`."""

    reads_with_post = True
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema_serializer(component_name="AnswerInput")
    class InputSerializer(serializers.Serializer):
        question = serializers.CharField(max_length=2000)
        top_k = serializers.IntegerField(min_value=1, max_value=50, required=False)
        scope = ScopeSerializer(required=False)
        assistant = serializers.CharField(max_length=60, required=False, allow_blank=True)
        stream = serializers.BooleanField(default=False)

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
        if data["stream"] or request.accepted_renderer.format == "sse":
            stream = services.stream_answer(tenant=self.tenant, question=data["question"], options=options)
            first = admitted(next, stream)  # the Sources: a full queue or retrieval errors answer before streaming

            def events() -> Iterator[str]:
                yield from stream_events(chain(first, stream))

            return sse_response(events())
        result = admitted(services.answer_question, tenant=self.tenant, question=data["question"], options=options)
        return Response(answer_payload(result))


def chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
