"""Error responses: JSON with a generic message under /api/ (and in OpenAI's shape under /v1/, the
OpenAI-compatible door), Django's pages elsewhere.

Clients get what went wrong in words they can act on, never exception text (that stays in the log,
under the reference the response carries)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
OPENAI_PREFIX = "/v1/"
MESSAGES = {
    400: "The request is malformed.",
    403: "You may not do this.",
    404: "Not found.",
    500: "The server failed to handle this request; the error was logged.",
}


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith((API_PREFIX, OPENAI_PREFIX))


def error_reference() -> str:
    """A short id that ties what a client saw to the log line with the details."""
    return uuid.uuid4().hex[:12]


def _json(status: int, request: HttpRequest | None = None, **extra: Any) -> JsonResponse:
    body: dict[str, Any] = {"detail": MESSAGES[status], **extra}
    if request is not None and request.path.startswith(OPENAI_PREFIX):
        kind = "server_error" if status >= 500 else "invalid_request_error"
        body = {"error": {"message": MESSAGES[status], "type": kind, "param": None, "code": None}}
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "private, no-store"
    return response


def bad_request(request: HttpRequest, exception: Exception, **kwargs: Any) -> HttpResponse:
    return _json(400, request) if _is_api(request) else defaults.bad_request(request, exception, **kwargs)


def permission_denied(request: HttpRequest, exception: Exception, **kwargs: Any) -> HttpResponse:
    return _json(403, request) if _is_api(request) else defaults.permission_denied(request, exception, **kwargs)


def page_not_found(request: HttpRequest, exception: Exception, **kwargs: Any) -> HttpResponse:
    return _json(404, request) if _is_api(request) else defaults.page_not_found(request, exception, **kwargs)


def server_error(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    # Django has already logged the exception (django.request) before calling this view.
    return _json(500, request) if _is_api(request) else defaults.server_error(request, **kwargs)
