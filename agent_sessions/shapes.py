"""What the agent doors read and write: a session's input, a retrieve as every door reads it (REST, MCP, see-as), and
its payload (the hits, and in a session what it held back)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agent_sessions.reads import session_retrieve
from knowledge.models import Status
from knowledge.shapes import HitSerializer, ScopeSerializer, scope_filters


class SessionInput(serializers.Serializer):
    purpose = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    scope = ScopeSerializer(required=False)
    ttl = serializers.FloatField(
        min_value=0.01, max_value=720, required=False,
        help_text="Hours the session lives after its last call (default RAG_SESSION_TTL_HOURS).",
    )  # fmt: skip


def retrieve_asked(viewer: Any, session: Any, data: dict[str, Any]) -> Any:
    """A validated RetrieveInput, read as every door reads it (REST, MCP): its filters, then the read, in the
    caller's session when it names one (agent_sessions.reads.Read)."""
    filters = scope_filters(data.get("scope"), mode=data["mode"], critical_only=data["critical_only"], when=data)
    if data["include_superseded"]:
        filters.statuses = [Status.ACTIVE, Status.SUPERSEDED]
    return session_retrieve(
        viewer=viewer, session=session, query=data["query"], top_k=data["top_k"], filters=filters,
        specific=data["specific"], rerank=data["rerank"], include_delivered=data["include_delivered"],
        max_tokens=data.get("max_tokens"),
    )  # fmt: skip


def held_payload(read: Any) -> list[dict[str, Any]]:
    """The chunks a session read matched that the session already holds: no text, they are the agent's already."""
    return [{"chunk_id": held.chunk_id, "document_id": held.document_id, "rank": held.rank} for held in read.already]


def read_payload(query: str, read: Any) -> dict[str, Any]:
    """A retrieve's answer (agent_sessions.reads.Read): its hits and, in a session or with a budget, what it held
    back."""
    out: dict[str, Any] = {"query": query, "hits": HitSerializer(read.hits, many=True).data}
    if read.session is not None:
        out.update(session=str(read.session.public_id), already_delivered=held_payload(read),
                   memory_changes=read.memory_changes)  # fmt: skip
    if read.session is not None or read.left_out:
        out["tokens"] = read.tokens
    if read.left_out:
        out["left_out"] = read.left_out
    return out
