"""The one base of the errors a caller is told about: each carries its HTTP status, a stable code, the message in
words the caller can act on, and when to come back (`retry_after`, seconds) when that is known. The map from these to
every door's shape (REST, SSE, the OpenAI door, MCP, a page) is core/transport.py's; no door maps one itself.

An error that is not a DomainError is not the caller's problem: the door logs it under a reference and says only
that."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """An error a caller is told about. A subclass sets `status` and `code`; `public` (when set) is what the caller
    reads instead of the exception's own message (which may name internals)."""

    status: int = 400
    code: str = "bad_request"
    public: Any = ""  # a str, or a lazily translated one (gettext_lazy): read in the caller's language
    retry_after: int | None = None

    def __init__(self, message: str = "", *, retry_after: int | None = None) -> None:
        super().__init__(message or str(self.public) or self.code)
        if retry_after is not None:
            self.retry_after = retry_after

    @property
    def detail(self) -> str:
        return str(self.public) if self.public else str(self)
