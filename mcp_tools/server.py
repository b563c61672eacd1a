"""The MCP server: ragsite's retrieve, bootstrap, answer and documents as tools an agent can choose by.

Built on the official SDK (`mcp`, its MCPServer). The HTTP layer (mcp_tools/http.py) has already
authenticated the request's API key and left it on the request; each tool reads it from there, so a
tool cannot run without a key and only ever sees the key's tenant. The work itself is Django code
(mcp_tools/operations.py), run in a worker thread so the event loop keeps serving.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from django.db import close_old_connections
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ListResourcesResult, Resource, ToolAnnotations
from pydantic import Field

from mcp_tools import operations
from tenants.models import ApiKey

INSTRUCTIONS = (
    "ragsite is a company's knowledge base (documents, PDFs, code). Use `retrieve` to find passages with their "
    "document ids and locations, `get_document` to read around a hit, `answer` for a short answer with verified "
    "citations, `bootstrap` for a start-up map of the knowledge base, `list_sources` and `document_history` to see "
    "what is indexed and what changed, `report_verdict` to say an answer was right or wrong. Everything is limited "
    "to the tenant of your API key. For a task of several questions, call `session_start` first and pass its id as "
    "`session`: later reads bring only what you do not hold yet, and `session_changes` says when something you "
    "were given has changed, been superseded, expired, retired or taken away."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

# A session is the key's own state (what it was given), not the knowledge base's.
SESSIONS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

# A verdict writes (a queue item) but changes no knowledge; sent twice, it is two verdicts.
REPORTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)

Mode = Literal["auto", "documental", "code"]
AsOf = Annotated[
    str | None, Field(description="Serve what was in force then: an ISO 8601 datetime, or a date (its end).")
]
IncludeExpired = Annotated[bool, Field(description="Also serve expired, superseded and not-yet-valid documents, marked "
                                                   "in each hit's freshness.")]  # fmt: skip
Reason = Literal["wrong_fact", "wrong_citation", "should_refuse", "should_answer", "outdated"]
SessionId = Annotated[str | None, Field(description="A session from session_start: only what it does not hold yet "
                                                    "comes back, and what it was given is recorded.")]  # fmt: skip
MaxTokens = Annotated[
    int | None, Field(ge=1, le=1_000_000, description="A token budget: what fits, most important first; the rest is "
                                                      "listed in left_out.")
]  # fmt: skip


def _key_of(request: Any) -> ApiKey | None:
    """The API key the HTTP layer (KeyGuard) authenticated and left on the request; never a tool argument."""
    key = getattr(getattr(request, "state", None), "api_key", None)
    return key if isinstance(key, ApiKey) else None


def request_key(ctx: Context) -> ApiKey:
    key = _key_of(ctx.request_context.request)
    if key is None:  # only reachable if the server were mounted without the auth layer
        raise ToolError("This request carries no API key.")
    return key


async def _run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    def work() -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    try:
        return await anyio.to_thread.run_sync(work)
    except operations.OperationError as exc:
        raise ToolError(str(exc)) from exc


def _scope(source_ids: list[str] | None, tags: list[str] | None) -> dict[str, Any] | None:
    scope = {k: v for k, v in (("source_ids", source_ids), ("tags", tags)) if v}
    return scope or None


class TenantServer(MCPServer):
    """resources/list answers with the calling tenant's sources and documents (the SDK's static list cannot)."""

    async def _handle_list_resources(self, ctx: Any, params: Any) -> ListResourcesResult:
        key = _key_of(ctx.request)
        if key is None:
            return ListResourcesResult(resources=[])
        listed = await _run(operations.resources, key)
        return ListResourcesResult(resources=[Resource(mime_type="application/json", **r) for r in listed])


def build_server() -> MCPServer:
    server = TenantServer("ragsite", instructions=INSTRUCTIONS, version="1")

    @server.tool(annotations=READ_ONLY)
    async def retrieve(
        query: Annotated[str, Field(description="What to look for, in natural language or with exact names.")],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=50, description="How many hits to return.")] = 8,
        mode: Annotated[Mode, Field(description="auto, or only documental text or only code.")] = "auto",
        source_ids: Annotated[list[str] | None, Field(description="Only these sources (source_id).")] = None,
        tags: Annotated[list[str] | None, Field(description="Only documents with these tags.")] = None,
        specific: Annotated[bool, Field(description="Favour exact identifiers (settings, functions).")] = False,
        as_of: AsOf = None,
        include_expired: IncludeExpired = False,
        session: SessionId = None,
        include_delivered: Annotated[bool, Field(description="In a session, also return what it holds.")] = False,
        max_tokens: MaxTokens = None,
    ) -> dict[str, Any]:
        """Search the knowledge base (dense + lexical, fused) among the documents in force today (or `as_of`). Each
        hit has its text, chunk_id, document_id, document_key, lines or pages, score, the signals that ranked it and
        its `freshness` (status current, review_due, expired, superseded or not_yet_valid; validity dates; when it
        last changed; what superseded it). Cite hits by document_key and location. In a session, top_k counts new
        hits; `already_delivered` lists the ones you hold (chunk id and rank) and `memory_changes` how many changes to
        what you hold you have not read (session_changes)."""
        return await _run(operations.retrieve, request_key(ctx), query=query, top_k=top_k, mode=mode,
                          scope=_scope(source_ids, tags), specific=specific, as_of=as_of,
                          include_expired=include_expired, session=session, include_delivered=include_delivered,
                          max_tokens=max_tokens)  # fmt: skip

    @server.tool(annotations=READ_ONLY)
    async def bootstrap(
        ctx: Context,
        intent: Annotated[str, Field(description="What you are about to work on (optional).")] = "",
        source_ids: Annotated[list[str] | None, Field(description="Only these sources (source_id).")] = None,
        tags: Annotated[list[str] | None, Field(description="Only documents with these tags.")] = None,
        as_of: AsOf = None,
        include_expired: IncludeExpired = False,
        session: SessionId = None,
        max_tokens: MaxTokens = None,
    ) -> dict[str, Any]:
        """A start-up context pack: the pieces marked critical, then overview, architecture, pending work and
        history excerpts (and your intent's), each traceable to its document and location. Call it once, first (with
        `session`, it is the session's base pack; with `max_tokens`, it is cut to fit, most important first)."""
        return await _run(operations.bootstrap, request_key(ctx), intent=intent, scope=_scope(source_ids, tags),
                          as_of=as_of, include_expired=include_expired, session=session,
                          max_tokens=max_tokens)  # fmt: skip

    @server.tool(annotations=READ_ONLY)
    async def answer(
        question: Annotated[str, Field(description="The question, in the user's language.")],
        ctx: Context,
        top_k: Annotated[int | None, Field(ge=1, le=50, description="How many hits retrieval reads.")] = None,
        assistant: Annotated[str | None, Field(description="A configured assistant's name (optional).")] = None,
        as_of: AsOf = None,
        include_expired: IncludeExpired = False,
        session: SessionId = None,
        max_tokens: Annotated[
            int | None,
            Field(ge=1, le=1_000_000, description="A token budget for the hits given back (not for the answer)."),
        ] = None,  # fmt: skip
    ) -> dict[str, Any]:
        """A short answer written by the platform's language model from retrieved excerpts, every sentence checked
        against them: `citations` (document, location), per-sentence `claims` with `supported` and the excerpt
        sentence each citation stands on (`quotes`), and `status` (answered, partial, not_verified, not_found,
        no_evidence, extractive). `not_verified`: no sentence could be verified, and `evidence` holds the 1-3 source
        sentences most likely to hold the answer, verbatim, each with the citation number `n`. It reads only
        documents in force today (or `as_of`); an answer resting on evidence due a review says so. Slower than
        retrieve (seconds)."""
        return await _run(operations.answer, request_key(ctx), question=question, top_k=top_k, assistant=assistant,
                          as_of=as_of, include_expired=include_expired, session=session,
                          max_tokens=max_tokens)  # fmt: skip

    @server.tool(annotations=SESSIONS)
    async def session_start(
        ctx: Context,
        purpose: Annotated[str, Field(max_length=500, description="What the session is for (optional).")] = "",
        source_ids: Annotated[list[str] | None, Field(description="Hold every call to these sources.")] = None,
        tags: Annotated[list[str] | None, Field(description="Hold every call to documents with these tags.")] = None,
        ttl: Annotated[float | None, Field(ge=0.01, le=720, description="Hours it lives after its last call.")] = None,
    ) -> dict[str, Any]:
        """Start a session for a task of several questions: pass its `id` as `session` to bootstrap, retrieve and
        answer. Only this API key can use it."""
        return await _run(operations.session_start, request_key(ctx), purpose=purpose,
                          scope=_scope(source_ids, tags), ttl=ttl)  # fmt: skip

    @server.tool(annotations=READ_ONLY)
    async def session_changes(
        session: Annotated[str, Field(description="The session's id.")],
        ctx: Context,
        cursor: Annotated[str, Field(description="A previous call's next_cursor (none: what you have not read).")] = "",
        limit: Annotated[int, Field(ge=1, le=500, description="How many changes to return.")] = 100,
    ) -> dict[str, Any]:
        """What changed in what the session was given, oldest first: `changed` (the new version, and for each
        chunk you hold the chunk ids that hold its text now), `superseded` (by which document, if you may see it),
        `expired`, `retired`, `no_longer_available` (taken away from you: only the chunk ids you hold)."""
        return await _run(operations.session_changes, request_key(ctx), session=session, cursor=cursor,
                          limit=limit)  # fmt: skip

    @server.tool(annotations=READ_ONLY)
    async def session_ledger(
        session: Annotated[str, Field(description="The session's id.")],
        ctx: Context,
        offset: Annotated[int, Field(ge=0, description="Page through a long ledger.")] = 0,
    ) -> dict[str, Any]:
        """Everything the session was given: each chunk id, its document and version, when and by which call, and
        the tokens; its base pack."""
        return await _run(operations.session_ledger, request_key(ctx), session=session, offset=offset)

    @server.tool(annotations=SESSIONS)
    async def session_end(
        session: Annotated[str, Field(description="The session's id.")],
        ctx: Context,
    ) -> dict[str, Any]:
        """End a session when its task is done (it would otherwise expire on its own); it cannot be used again."""
        return await _run(operations.session_end, request_key(ctx), session=session)

    @server.tool(annotations=REPORTS)
    async def report_verdict(
        answer_id: Annotated[str, Field(description="The answer_id an `answer` call returned.")],
        helpful: Annotated[bool, Field(description="true: the answer was right; false: it was wrong.")],
        ctx: Context,
        reason: Annotated[Reason | None, Field(description="Why it was wrong (with helpful=false).")] = None,
        claims: Annotated[list[int] | None, Field(description="Indexes of the wrong claims (default: all).")] = None,
        correct_answer: Annotated[str | None, Field(max_length=2000, description="The right answer.")] = None,
        document_id: Annotated[str | None, Field(description="The document that holds the right answer.")] = None,
    ) -> dict[str, Any]:
        """Report that an answer was right or wrong, after checking it downstream. A wrong answer goes to the
        tenant admins' curation queue, and once fixed becomes a question of the tenant's evaluation set. Needs
        a write-scoped API key."""
        return await _run(operations.report_verdict, request_key(ctx), answer_id, helpful=helpful, reason=reason,
                          claims=claims, correct_answer=correct_answer, document_id=document_id)  # fmt: skip

    @server.tool(annotations=READ_ONLY)
    async def get_receipt(
        answer_id: Annotated[str, Field(description="The answer_id an `answer` call of this key returned.")],
        ctx: Context,
    ) -> dict[str, Any]:
        """An answer's receipt: the question, the document versions it read, each claim with the evidence it was
        verified against, whether it held then and what that evidence is now (unchanged, changed, superseded,
        expired, retired, no_longer_available), decided from the documents' history."""
        return await _run(operations.get_receipt, request_key(ctx), answer_id)

    @server.tool(annotations=READ_ONLY)
    async def list_sources(ctx: Context) -> dict[str, Any]:
        """The sources of this knowledge base (folders, uploads) with their source_id, tags and document counts."""
        return await _run(operations.list_sources, request_key(ctx))

    @server.tool(annotations=READ_ONLY)
    async def get_document(
        document_id: Annotated[str, Field(description="The document_id of a hit or citation (or the document's id).")],
        ctx: Context,
        version: Annotated[int | None, Field(ge=1, description="A past version (default: the current one).")] = None,
        start_chunk: Annotated[int, Field(ge=0, description="First chunk to return, for long documents.")] = 0,
    ) -> dict[str, Any]:
        """A document's text as its chunks in order, each with chunk_id and lines or pages, to read around a hit.
        At most 200 chunks per call; `next_start_chunk` says where to continue."""
        return await _run(operations.get_document, request_key(ctx), document_id, version, start_chunk)

    @server.tool(annotations=READ_ONLY)
    async def document_history(
        document_id: Annotated[str, Field(description="The document_id of a hit or citation (or the document's id).")],
        ctx: Context,
    ) -> dict[str, Any]:
        """A document's versions, newest first: when each was indexed, its status, size, chunk count, and how many
        chunks it added, removed and kept compared with the version before."""
        return await _run(operations.document_history, request_key(ctx), document_id)

    @server.tool(annotations=READ_ONLY)
    async def changes_since(
        since: Annotated[str, Field(description="An ISO 8601 datetime, or the `next_cursor` of a previous call.")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=500, description="How many changes to return.")] = 100,
    ) -> dict[str, Any]:
        """What changed in the knowledge base since then, oldest first: documents added, changed (old and new
        version), retired, restored, expired, superseded, or whose validity was changed. Call again with
        `next_cursor` until `has_more` is false; keep the last cursor to ask again later."""
        return await _run(operations.changes_since, request_key(ctx), since=since, limit=limit)

    @server.resource("ragsite://sources/{source_uuid}", name="source", mime_type="application/json",
                     description="A source (its `id`, a UUID, from list_sources) and the documents in it.")  # fmt: skip
    async def source_resource(source_uuid: str, ctx: Context) -> dict[str, Any]:
        return await _resource(operations.source_documents, request_key(ctx), source_uuid)

    @server.resource("ragsite://documents/{document_uuid}", name="document", mime_type="application/json",
                     description="A document's current text as chunks with locations (its `id`, a UUID).")  # fmt: skip
    async def document_resource(document_uuid: str, ctx: Context) -> dict[str, Any]:
        return await _resource(operations.get_document, request_key(ctx), document_uuid)

    return server


async def _resource(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return await _run(fn, *args)
    except ToolError as exc:
        raise ResourceError(str(exc)) from exc
