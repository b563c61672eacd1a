"""`python manage.py mcp --tenant <slug>`: the MCP server over stdio, for local agents.

The embedded vector store has one owner, the running web process, so this command does not open
the store or load models: it is a thin stdio front for the running server's /mcp/ endpoint, and every
tool call is answered there, with the same key checks, tenant scope and throttling. The API key comes
from the environment (RAGSITE_API_KEY), never from the command line, where `ps` would show it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import anyio
import httpx2
from django.core.management.base import BaseCommand, CommandError
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.stdio import stdio_server

from mcp_tools.http import MCP_PATH
from tenants.services import api_key_authenticate

KEY_VARIABLE = "RAGSITE_API_KEY"
URL_VARIABLE = "RAGSITE_URL"
CALL_TIMEOUT_S = 600  # an answer on a slow machine takes a while; retrieval is milliseconds


def default_url() -> str:
    return os.environ.get(URL_VARIABLE) or f"http://127.0.0.1:{os.environ.get('PORT', '8000')}{MCP_PATH}"


def proxy_server(remote: Client) -> Server:
    """A stdio server whose tools and resources are the remote server's, forwarded as they are."""

    async def list_tools(ctx: Any, params: Any) -> Any:
        return await remote.list_tools(cursor=getattr(params, "cursor", None))

    async def call_tool(ctx: Any, params: Any) -> Any:
        return await remote.call_tool(params.name, params.arguments or {}, read_timeout_seconds=CALL_TIMEOUT_S)

    async def list_resources(ctx: Any, params: Any) -> Any:
        return await remote.list_resources(cursor=getattr(params, "cursor", None))

    async def list_resource_templates(ctx: Any, params: Any) -> Any:
        return await remote.list_resource_templates(cursor=getattr(params, "cursor", None))

    async def read_resource(ctx: Any, params: Any) -> Any:
        return await remote.read_resource(str(params.uri))

    return Server(
        "ragsite", version="1", instructions=remote.instructions,
        on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates, on_read_resource=read_resource,
    )  # fmt: skip


class Command(BaseCommand):
    help = "Serve ragsite's MCP tools over stdio for one tenant (needs the web server running and RAGSITE_API_KEY)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", required=True, help="The tenant's slug; the API key must belong to it.")
        parser.add_argument("--url", default="", help=f"The running server's MCP endpoint (default {default_url()}).")

    def handle(self, *args: Any, tenant: str, url: str, **options: Any) -> None:
        raw_key = os.environ.get(KEY_VARIABLE, "").strip()
        if not raw_key:
            raise CommandError(f"Set {KEY_VARIABLE} to an API key of tenant {tenant!r} (manage.py create_api_key).")
        api_key = api_key_authenticate(raw_key)
        if api_key is None or api_key.tenant.slug != tenant:
            raise CommandError(f"{KEY_VARIABLE} is not an active API key of tenant {tenant!r}.")
        logging.getLogger("httpx2").setLevel(logging.WARNING)  # stderr is the agent's log: one line per call is noise
        anyio.run(self.serve, url or default_url(), raw_key)

    async def serve(self, url: str, raw_key: str) -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Api-Key {raw_key}"}, timeout=CALL_TIMEOUT_S)
        try:
            async with Client(streamable_http_client(url, http_client=http)) as remote:
                server = proxy_server(remote)
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())
        except* (httpx2.ConnectError, OSError) as group:
            raise CommandError(f"Cannot reach the ragsite server at {url} ({group.exceptions[0]}); start it first "
                               f"(./scripts/up.sh) or pass --url.") from None  # fmt: skip
        finally:
            await http.aclose()
