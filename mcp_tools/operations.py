"""What each MCP tool does, for one API key: plain synchronous Django code, no MCP types.

The inputs are checked by the serializers the REST API uses (knowledge/shapes.py, chat/shapes.py: same limits,
same messages) and the results are the same shapes (hits, answer payload, sources, chunk locations), so an agent
sees the same ids, locations, signals and citations over MCP as over HTTP. Every read goes through
knowledge/selectors.py from the key's tenant; a document of another tenant is "not found", like one that does
not exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import serializers

from agent_sessions import changes as what_changed
from agent_sessions import reads, services
from agent_sessions.models import AgentSession
from agent_sessions.shapes import SessionInput, read_payload, retrieve_asked
from chat import receipts, recipe
from chat import records as chat_records
from chat.shapes import AnswerInput, VerdictInput, answer_payload, verdict_payload
from core import transport
from knowledge import selectors
from knowledge.changes import BadCursor, changes_page
from knowledge.links import document_links
from knowledge.models import Document
from knowledge.shapes import (
    BootstrapInput,
    RetrieveInput,
    SourceOutput,
    VersionOutput,
    plain_errors,
    scope_filters,
)
from tenants.models import ApiKey
from tenants.principals import Viewer, viewer_for

MAX_DOCUMENT_CHUNKS = 200  # one get_document call; `start_chunk` pages through longer documents


class OperationError(Exception):
    """A failure the caller can act on; its message is safe to show (no internals)."""


def _valid(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> dict[str, Any]:
    incoming = serializer_class(data={k: v for k, v in data.items() if v is not None})
    if not incoming.is_valid():
        raise OperationError(plain_errors(incoming.errors))
    return dict(incoming.validated_data)


def _guarded(fn, *args, **kwargs):
    """Domain errors (an index built with another embedder, a busy store, a full answer queue, a restarting model)
    as tool errors, worded as the REST API words them (core/transport.py)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        message = transport.tool_message(exc)
        if message is None:
            raise
        raise OperationError(message) from exc


def _viewer(key: ApiKey) -> Viewer:
    """What the key may see, resolved at each call (a group change applies to the next one)."""
    return viewer_for(tenant=key.tenant, api_key=key)


def _session(key: ApiKey, session: Any) -> AgentSession | None:
    """The key's own live session named by a tool call (None: none named); another key's is not found."""
    if session in (None, ""):
        return None
    try:
        public_id = uuid.UUID(str(session))
    except ValueError:
        raise OperationError(f"session: {str(session)[:60]!r} is not a session id (session_start gives one).") from None
    return _guarded(services.session_get, tenant=key.tenant, public_id=public_id, api_key=key)


def retrieve(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(RetrieveInput, arguments)
    read = _guarded(retrieve_asked, _viewer(key), _session(key, data.get("session")), data)
    return read_payload(data["query"], read)


def bootstrap(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(BootstrapInput, arguments)
    return _guarded(
        reads.session_bootstrap, viewer=_viewer(key), session=_session(key, data.get("session")),
        intent=data["intent"], filters=scope_filters(data.get("scope"), when=data), max_tokens=data.get("max_tokens"),
    )  # fmt: skip


def answer(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(AnswerInput, arguments)
    asked = recipe.Asked(question=data["question"], assistant_name=data.get("assistant"), top_k=data.get("top_k"),
                         filters=scope_filters(data["scope"]) if "scope" in data else None, when=data,
                         session=_session(key, data.get("session")), max_tokens=data.get("max_tokens"))  # fmt: skip
    try:
        answering = recipe.Answering(viewer=_viewer(key), asked=asked, channel="mcp", api_key=key)
    except recipe.UnknownAssistant as exc:
        raise OperationError(f"assistant: no assistant named {data['assistant']!r} in this tenant.") from exc
    result, record = _guarded(answering.json)
    return answer_payload(result, answer_id=record.public_id, read=answering.read)


def session_start(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(SessionInput, arguments)
    session = _guarded(services.session_create, tenant=key.tenant, api_key=key, purpose=data["purpose"],
                       scope=data.get("scope"), ttl_hours=data.get("ttl"))  # fmt: skip
    return reads.session_shape(session)


def session_changes(key: ApiKey, *, session: str, cursor: str = "", limit: int = 100) -> dict[str, Any]:
    found = _session(key, session)
    assert found is not None
    return _guarded(what_changed.changes_page, found, _viewer(key), cursor=cursor or "", limit=limit)


def session_ledger(key: ApiKey, *, session: str, offset: int = 0) -> dict[str, Any]:
    found = _session(key, session)
    assert found is not None
    return _guarded(reads.ledger, found, _viewer(key), offset=max(0, int(offset or 0)))


def session_end(key: ApiKey, *, session: str) -> dict[str, Any]:
    found = _session(key, session)
    assert found is not None
    services.session_end(found)
    return {"id": str(found.public_id), "ended": True}


def report_verdict(key: ApiKey, answer_id: str, **arguments: Any) -> dict[str, Any]:
    """A verdict on an answer of this tenant: needs a write-scoped key, as over REST."""
    if key.scope != ApiKey.Scope.WRITE:
        raise OperationError("This API key is read-only; reporting a verdict needs a key with scope write.")
    record = chat_records.answer_get(tenant=key.tenant, answer_id=answer_id)
    if record is None:
        raise OperationError("No answer with that id in this tenant.")
    given = _valid(VerdictInput, arguments)
    try:
        given_verdict = chat_records.VerdictGiven(**given)
        verdict = chat_records.verdict_record(viewer=_viewer(key), record=record, given=given_verdict, channel="mcp",
                                              api_key=key)  # fmt: skip
    except chat_records.VerdictInvalid as invalid:
        raise OperationError(str(invalid)) from invalid
    return verdict_payload(verdict)


def get_receipt(key: ApiKey, answer_id: str) -> dict[str, Any]:
    """The receipt of an answer this key asked for (chat/receipts.py), as over REST: any other answer does not exist."""
    record = chat_records.answer_get(tenant=key.tenant, answer_id=answer_id)
    if record is None or not receipts.may_read(record, _viewer(key), api_key=key):
        raise OperationError("No answer with that id in this tenant.")
    return receipts.receipt(record, _viewer(key))


def changes_since(key: ApiKey, *, since: str, limit: int = 100) -> dict[str, Any]:
    viewer = _viewer(key)
    try:
        return changes_page(viewer=viewer, since=since, limit=limit)
    except BadCursor as exc:
        raise OperationError(str(exc)) from exc


def list_sources(key: ApiKey) -> dict[str, Any]:
    return {"sources": SourceOutput(selectors.source_list(viewer=_viewer(key)), many=True).data}


MAX_SOURCE_DOCUMENTS = 1000
MAX_LISTED_DOCUMENTS = 500  # resources/list: the most recently updated; a source's resource lists them all


def resources(key: ApiKey) -> list[dict[str, str]]:
    """The tenant's sources and (recent) documents as MCP resources: uri, name, description."""
    listed = [
        {
            "uri": f"ragsite://sources/{s.public_id}",
            "name": f"source: {s.label}",
            "description": f"Source {s.source_id} ({s.kind}) and its documents.",
        }  # fmt: skip
        for s in selectors.source_list(viewer=_viewer(key))
    ]
    listed += [
        {
            "uri": f"ragsite://documents/{d.public_id}",
            "name": d.display_key,
            "description": f"{d.title or d.display_key} (version {d.version}); document_id {d.document_id}",
        }  # fmt: skip
        for d in selectors.recent_documents(viewer=_viewer(key), limit=MAX_LISTED_DOCUMENTS)
    ]
    return listed


def source_documents(key: ApiKey, source_uuid: str) -> dict[str, Any]:
    """A source and its documents (not the retired ones): what an agent can open with get_document."""
    source = selectors.source_get(viewer=_viewer(key), public_id=source_uuid)
    if source is None:
        raise OperationError(f"No source {source_uuid!r} in this tenant (use the `id` list_sources gives).")
    documents = selectors.source_documents(viewer=_viewer(key), source=source)
    return {
        **SourceOutput(source).data,
        "documents": [
            {
                "document_id": d.document_id,
                "id": str(d.public_id),
                "document_key": d.display_key,
                "title": d.title,
                "version": d.version,
                "status": d.status,
                "mode": d.mode,
            }  # fmt: skip
            for d in documents[:MAX_SOURCE_DOCUMENTS]
        ],
    }


def _document(key: ApiKey, document_id: str) -> Document:
    """By the `document_id` that hits and citations carry, or by the document's public `id` (a UUID)."""
    document = selectors.document_get(viewer=_viewer(key), document_id=document_id)
    if document is None:
        raise OperationError(f"No document {document_id!r} in this tenant (use the document_id of a hit).")
    return document


def get_document(key: ApiKey, document_id: str, version: int | None = None, start_chunk: int = 0) -> dict[str, Any]:
    """A version's chunks in order (text, chunk id, lines or pages): enough to read around a hit."""
    document = _document(key, document_id)
    wanted = version or document.version
    stored = selectors.version_get(viewer=_viewer(key), document=document, version=wanted)
    if stored is None:
        known = sorted(selectors.visible_versions(_viewer(key), document).values_list("version", flat=True))
        raise OperationError(f"Document {document.document_id!r} has no version {wanted}; it has {known}.")
    start_chunk = max(0, int(start_chunk or 0))
    chunks = selectors.version_chunks(viewer=_viewer(key), version=stored)
    total = chunks.count()
    page = list(chunks[start_chunk : start_chunk + MAX_DOCUMENT_CHUNKS])
    following = start_chunk + len(page)
    return {
        "document_id": document.document_id,
        "id": str(document.public_id),
        "source_id": document.source.source_id,
        "document_key": document.display_key,
        "title": stored.title or document.title,
        "source_type": document.source_type,
        "mode": document.mode,
        "status": document.status,
        "version": stored.version,
        "version_status": stored.status,
        "current_version": document.version,
        "chunk_count": total,
        "chunks": [
            {**c.location(document=document), "index": c.index, "status": c.status, "text": c.text} for c in page
        ],
        "next_start_chunk": following if following < total else None,
        **document_links(viewer=_viewer(key), document=document),  # a vault note's links and backlinks
    }


def document_history(key: ApiKey, document_id: str) -> dict[str, Any]:
    """Every version, newest first, with what changed from the one before it (chunks added, removed, kept)."""
    document = _document(key, document_id)
    history = [
        {**VersionOutput(version).data, "title": version.title, "changes_from_previous": changes}
        for version, changes in selectors.document_history(viewer=_viewer(key), document=document)
    ]
    return {
        "document_id": document.document_id,
        "id": str(document.public_id),
        "document_key": document.display_key,
        "current_version": document.version,
        "status": document.status,
        "versions": list(reversed(history)),
    }
