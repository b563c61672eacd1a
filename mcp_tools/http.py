"""Streamable HTTP at /mcp/, inside the platform's WSGI server (gunicorn), before any tool runs: the key.

The SDK's transport is an ASGI app; it runs on one event loop in a background thread of the web
process (a2wsgi bridges each WSGI request to it), so MCP shares the process that owns the embedded
vector store, its settings and its loaded models. Stateless mode with JSON responses: every POST is
complete in itself, so any number of web workers (with a Qdrant server) can serve it.

The guard in front of it is the key door every door uses (tenants/keys.py), applied to the raw request:
- the Host header must be one of ALLOWED_HOSTS;
- `Authorization: Api-Key <key>` or `Bearer <key>`; a missing, wrong or revoked key is answered 401
  here (a JSON-RPC error body), and counts towards the address's wrong-key limit (429 past it);
- the key's request rate (RAG_API_RATE) is the same counter as the REST API's, per key (429 past it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import anyio
from a2wsgi import ASGIMiddleware
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.transport_security import TransportSecuritySettings

from core.errors import error_reference
from mcp_tools.server import build_server
from tenants.keys import KeyRefused, key_open, key_rate, presented
from tenants.models import ApiKey

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp/"
SCHEMES = ("api-key", "bearer")


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _Meta:
    """The request's client address and headers as Django's META names them (what the key door reads)."""

    def __init__(self, scope: dict[str, Any], headers: dict[str, str]) -> None:
        self.META = {"REMOTE_ADDR": (scope.get("client") or ("", 0))[0] or ""}
        self.method, self.path = scope.get("method", ""), scope.get("path", "")  # for the audit stream
        for name, value in headers.items():
            self.META["HTTP_" + name.upper().replace("-", "_")] = value


def authenticate(scope: dict[str, Any]) -> ApiKey:
    """The request's API key, or Refused: what the key door answers every other door."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    host = headers.get("host", "")
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        raise Refused(400, "Bad Host header.")
    raw_key = presented(headers.get("authorization", ""))
    if raw_key is None:
        raise Refused(401, "An API key is required: Authorization: Api-Key <key> (or Bearer <key>).",
                      {"WWW-Authenticate": "Api-Key"})  # fmt: skip
    try:
        api_key = key_open(_Meta(scope, headers), raw_key)
    except KeyRefused as refused:
        retry = {"Retry-After": str(refused.retry_after or 1)} if refused.status == 429 else {}
        raise Refused(refused.status, refused.message, retry or {"WWW-Authenticate": "Api-Key"}) from None
    wait = key_rate(api_key)
    if wait is not None:
        raise Refused(429, "Request was throttled.", {"Retry-After": str(wait)})
    return api_key


def _authenticate_in_thread(scope: dict[str, Any]) -> ApiKey:
    """authenticate() in a worker thread, whose database connection may be stale since its last request."""
    close_old_connections()
    try:
        return authenticate(scope)
    finally:
        close_old_connections()


class KeyGuard:
    """ASGI middleware: authenticate before the MCP transport sees the request; the key goes on scope.state."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == MCP_PATH.rstrip("/"):
            scope = {**scope, "path": MCP_PATH, "raw_path": MCP_PATH.encode()}
        try:
            api_key = await anyio.to_thread.run_sync(_authenticate_in_thread, scope)
        except Refused as refused:
            return await _refuse(send, refused)
        except Exception:  # never a bare 500 without a trace in the log
            reference = error_reference()
            logger.exception("MCP authentication failed (ref %s)", reference)
            return await _refuse(send, Refused(500, f"Internal error (reference {reference}); it was logged."))
        scope = {**scope, "state": {**scope.get("state", {}), "api_key": api_key}}
        await self.app(scope, receive, send)


async def _refuse(send: Any, refused: Refused) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": -32001, "message": refused.message}}).encode()  # fmt: skip
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in refused.headers.items()]
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class McpApplication:
    """The WSGI app for /mcp/: the SDK's Starlette app behind KeyGuard, on a loop thread of its own."""

    def __init__(self) -> None:
        self.server = build_server()
        # The Host header is checked by KeyGuard against ALLOWED_HOSTS, as Django does for every other route.
        starlette = self.server.streamable_http_app(
            streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )  # fmt: skip
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), name="mcp-loop", daemon=True).start()
        ready.wait(timeout=30)
        self.wsgi = ASGIMiddleware(KeyGuard(starlette), loop=self.loop)  # type: ignore[arg-type]  # an ASGI app

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def run() -> None:
            async with self.server.session_manager.run():  # the transport's task group, for the process's life
                ready.set()
                await asyncio.Event().wait()

        self.loop.run_until_complete(run())

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self.wsgi(environ, start_response)  # type: ignore[arg-type]  # the WSGI environ


class WithMcp:
    """The platform's WSGI application: /mcp/ goes to MCP, everything else to Django."""

    def __init__(self, django_app: Any) -> None:
        self.django_app = django_app
        self._mcp: McpApplication | None = None
        self._lock = threading.Lock()

    def mcp(self) -> McpApplication:
        with self._lock:
            if self._mcp is None:
                self._mcp = McpApplication()
            return self._mcp

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == MCP_PATH or path == MCP_PATH.rstrip("/"):
            return self.mcp()(environ, start_response)
        return self.django_app(environ, start_response)
