"""The domain errors every door meets (core/problems.py), mapped once to what each transport says: a REST (DRF)
error with its status and Retry-After, an in-band SSE or OpenAI stream error, an MCP tool error, a page's message or
plain response. A door never catches a domain error itself (tests/test_layering.py): it runs the step through
`guarded` (REST), `attempt` (a page), `stream_failure` (a stream that already started) or `tool_message` (MCP).

Everything that is not a DomainError is not a problem of the request's: the door logs it under a reference and says
only that."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.http import HttpResponse
from rest_framework import exceptions

from core.errors import error_reference
from core.problems import DomainError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    status: int
    detail: str
    code: str = ""
    retry_after: int | None = None


def problem_of(exc: BaseException) -> Problem | None:
    """What a domain error means to a caller; None for an unexpected error."""
    if not isinstance(exc, DomainError):
        return None
    return Problem(exc.status, exc.detail, exc.code, exc.retry_after)


class DoorProblem(exceptions.APIException):
    """A domain error as DRF renders it: its status, its detail and code, Retry-After from `wait` when it has one."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail, code=problem.code or None)
        self.status_code = problem.status
        self.wait = problem.retry_after


def guarded(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a step of a REST request; a domain error becomes its DRF error (the others propagate)."""
    try:
        return fn(*args, **kwargs)
    except DomainError as exc:
        raise DoorProblem(problem_of(exc)) from exc  # type: ignore[arg-type]


def attempt(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, Problem | None]:
    """Run a step of a page's request: (its result, None), or (None, the problem) for a domain error, which the page
    shows in its own place (the others propagate)."""
    try:
        return fn(*args, **kwargs), None
    except DomainError as exc:
        return None, problem_of(exc)


def plain_response(problem: Problem) -> HttpResponse:
    """A problem as a plain-text response (an HTMX request that expects a fragment), with Retry-After."""
    response = HttpResponse(problem.detail, status=problem.status, content_type="text/plain; charset=utf-8")
    if problem.retry_after:
        response["Retry-After"] = str(problem.retry_after)
    return response


def stream_failure(exc: BaseException) -> dict[str, Any]:
    """What a stream that failed after it started says in-band (SSE `error`, the OpenAI door's error chunk): the
    problem's detail and when to retry, else a reference to the log."""
    problem = problem_of(exc)
    if problem is not None:
        return {"detail": problem.detail, **({"retry_after": problem.retry_after} if problem.retry_after else {})}
    reference = error_reference()
    logger.exception("Answer stream failed (ref %s)", reference, exc_info=exc)
    return {"detail": "The answer failed; the error was logged.", "reference": reference}


def tool_message(exc: BaseException) -> str | None:
    """An MCP tool's error message for a domain error (None: not one)."""
    problem = problem_of(exc)
    if problem is None:
        return None
    return f"{problem.detail} (retry in {problem.retry_after} s)" if problem.retry_after else problem.detail
