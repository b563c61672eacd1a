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


def chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
