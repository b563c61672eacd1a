"""The domain errors every door meets, mapped once to what each transport says: a REST (DRF) error with its status
and Retry-After, an in-band SSE or OpenAI stream error, an MCP tool error, a page's plain 503.

- An index built with another embedder (IndexMismatch): 409 with the operator's remedy.
- The vector store busy or unavailable (StoreBusy): 503, retry shortly.
- An agent session that is not the caller's (SessionNotFound): 404; one ended or expired (SessionGone): 410; a
  cursor of its changes that is not one: 400.
- Anything that says when to come back (`retry_after`: a full answer queue, a chat model restarting or dead in the
  middle of an answer): 503 with Retry-After, in its own words (`reason`, else its message).
Everything else is not a problem of the request's: the door logs it under a reference and says only that."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from rest_framework import exceptions, status

from core.errors import error_reference
from knowledge.index.vectorstore import StoreBusy
from knowledge.memory import BadSessionCursor, SessionGone, SessionNotFound, SessionQuota
from knowledge.search.retrieval import IndexMismatch
from tenants.principals import AccessEnded

logger = logging.getLogger(__name__)

STORE_BUSY = "The vector store is busy or unavailable; retry shortly."


@dataclass(frozen=True)
class Problem:
    status: int
    detail: str
    retry_after: int | None = None


def problem_of(exc: BaseException) -> Problem | None:
    """What a domain error means to a caller; None for an unexpected error."""
    if isinstance(exc, IndexMismatch):
        return Problem(status.HTTP_409_CONFLICT, str(exc))
    if isinstance(exc, SessionNotFound):
        return Problem(status.HTTP_404_NOT_FOUND, str(exc))
    if isinstance(exc, SessionGone):
        return Problem(status.HTTP_410_GONE, str(exc))
    if isinstance(exc, SessionQuota):
        return Problem(status.HTTP_429_TOO_MANY_REQUESTS, str(exc))
    if isinstance(exc, BadSessionCursor):
        return Problem(status.HTTP_400_BAD_REQUEST, str(exc))
    if isinstance(exc, StoreBusy):
        return Problem(status.HTTP_503_SERVICE_UNAVAILABLE, STORE_BUSY)
    if isinstance(exc, AccessEnded):
        return Problem(status.HTTP_403_FORBIDDEN, str(exc))
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, int) and not isinstance(retry_after, bool):
        return Problem(status.HTTP_503_SERVICE_UNAVAILABLE, str(getattr(exc, "reason", "") or exc), retry_after)
    return None


class DoorProblem(exceptions.APIException):
    """A domain error as DRF renders it: its status, its detail, Retry-After from `wait` when it has one."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.detail)
        self.status_code = problem.status
        self.wait = problem.retry_after


def guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a step of a REST request; a domain error becomes its DRF error (the others propagate)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        problem = problem_of(exc)
        if problem is None:
            raise
        raise DoorProblem(problem) from exc


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
