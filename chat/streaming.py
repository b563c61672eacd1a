"""An answer as Server-Sent Events: sources (as soon as retrieval is done) → sentence… (each as soon as it is
checked) → done, or `error` in-band. The REST API and the chat page both stream through here; the model's unchecked
draft is never sent."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse

from chat import services
from chat.shapes import answer_payload, sentence_payload, sources_payload
from core.errors import error_reference
from inference.llm import ModelUnavailable
from knowledge.search.retrieval import IndexMismatch
from knowledge.shapes import StoreBusy, StoreUnavailable

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
            elif isinstance(item, services.Sources):
                yield sse("sources", sources_payload(item))
            elif isinstance(item, services.Sentence):
                yield sse("sentence", sentence_payload(item))
    except Exception as exc:  # the stream has started: report in-band, the status line is already sent
        yield sse("error", stream_failure(exc))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def stream_failure(exc: Exception) -> dict[str, Any]:
    """What a stream that failed after it started says in-band: the operator's remedy for an index built with
    another embedder, when to retry for a model that died mid-answer or a busy store, else a reference to the log."""
    if isinstance(exc, IndexMismatch):
        return {"detail": str(exc)}
    if isinstance(exc, ModelUnavailable):
        return {"detail": exc.reason, "retry_after": exc.retry_after}
    if isinstance(exc, StoreBusy):
        return {"detail": StoreUnavailable.default_detail}
    reference = error_reference()
    logger.exception("Answer stream failed (ref %s)", reference, exc_info=exc)
    return {"detail": "The answer failed; the error was logged.", "reference": reference}


def chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
