"""An answer as Server-Sent Events: sources (as soon as retrieval is done) → sentence… (each as soon as it is
checked) → done, or `error` in-band. The REST API and the chat page both stream through here; the model's unchecked
draft is never sent."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer

from chat import excerpts, services, verdicts
from chat.shapes import answer_payload, sentence_payload, sources_payload
from core import transport

logger = logging.getLogger(__name__)


def sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def sse_response(events: Iterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # let nginx pass tokens through as they come
    return response


def stream_events(stream: Iterator[Any], on_done=None) -> Iterator[str]:
    """sources (as soon as retrieval is done) → sentence… → done; `error` in-band if it fails midway.

    When the client disconnects, the server closes this generator; closing `stream` stops generation."""
    try:
        for item in stream:
            if isinstance(item, services.Answer):
                payload = answer_payload(item)
                if on_done is not None:
                    payload.update(on_done(item) or {})
                yield sse("done", payload)
            elif isinstance(item, excerpts.Sources):
                yield sse("sources", sources_payload(item))
            elif isinstance(item, verdicts.Sentence):
                yield sse("sentence", sentence_payload(item))
    except Exception as exc:  # the stream has started: report in-band, the status line is already sent
        yield sse("error", stream_failure(exc))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


stream_failure = transport.stream_failure  # what a stream that failed after it started says in-band


def chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


class EventStreamRenderer(BaseRenderer):
    """Lets content negotiation accept `Accept: text/event-stream`; the stream itself bypasses renderers.

    Errors raised before the stream starts (400, 404, 409, 503) are rendered as JSON text."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data, ensure_ascii=False).encode() if data is not None else b""
