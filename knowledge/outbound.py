"""A request the server sends to an address a tenant named (an API key's webhook): the address is checked as a
website source's start URL is (RAG_ALLOWED_WEB_PREFIXES, public hosts only unless a prefix names the host), the
connection goes to the very address that was checked, nothing is redirected, and a server that hangs is cut off
after `timeout_s`. The website reader (knowledge/ingest/website.py) does the reading; this is its published door."""

from __future__ import annotations

from knowledge.ingest.website import Reader
from knowledge.locations import FolderNotAllowed, web_location_check

__all__ = ["FolderNotAllowed", "location_check", "post"]

ANSWER_CAP = 64 * 1024  # what is read of the receiver's answer: only its status matters


def location_check(url: str, tenant_slug: str | None = None) -> str:
    """The URL normalised, or FolderNotAllowed saying why it is refused."""
    return web_location_check(url, tenant_slug)


def post(url: str, body: bytes, headers: dict[str, str], *, timeout_s: float) -> int:
    """POST `body`; the receiver's status. Raises FolderNotAllowed (an address no longer allowed), httpx's errors (a
    refused connection, a timeout) and the reader's (an answer over its cap)."""
    reader = Reader(deadline_s=int(timeout_s) + 1, answer_cap=ANSWER_CAP, timeout_s=timeout_s)
    try:
        return reader.post(url, body, headers).status
    finally:
        reader.client.close()
