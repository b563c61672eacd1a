"""What each MCP tool does, for one API key: plain synchronous Django code, no MCP types.

The inputs are checked by the REST API's own serializers (same limits, same messages) and the
results are the REST API's own shapes (HitSerializer, answer_payload, SourceOutput…), so an agent
sees the same ids, locations, signals and citations over MCP as over HTTP. Every query starts from
the key's tenant; a document of another tenant is "not found", like one that does not exist.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q
from rest_framework import exceptions, serializers

from chat import services as chat_services
from chat.api import AnswerApi, answer_payload
from inference.llm import ModelUnavailable
from knowledge.api import (
    BootstrapApi,
    HitSerializer,
    RetrieveApi,
    SourceOutput,
    VersionOutput,
    plain_errors,
    run_retrieval,
    scope_filters,
)
from knowledge.bootstrap import bootstrap as bootstrap_pack
from knowledge.models import Chunk, Document, Source, Status
from knowledge.retrieval import retrieve as retrieve_hits
from tenants.models import ApiKey

MAX_DOCUMENT_CHUNKS = 200  # one get_document call; `start_chunk` pages through longer documents


class OperationError(Exception):
    """A failure the caller can act on; its message is safe to show (no internals)."""


def _valid(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> dict[str, Any]:
    incoming = serializer_class(data={k: v for k, v in data.items() if v is not None})
    if not incoming.is_valid():
        raise OperationError(plain_errors(incoming.errors))
    return dict(incoming.validated_data)


def _guarded(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Retrieval errors (index built with another embedder, store busy) as messages, as the REST API words them."""
    try:
        return run_retrieval(fn, *args, **kwargs)
    except exceptions.APIException as exc:
        raise OperationError(str(exc.detail)) from exc


def retrieve(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(RetrieveApi.InputSerializer, arguments)
    filters = scope_filters(data.get("scope"), mode=data["mode"], critical_only=data["critical_only"])
    if data["include_superseded"]:
        filters.statuses = [Status.ACTIVE, Status.SUPERSEDED]
    hits = _guarded(retrieve_hits, tenant=key.tenant, query=data["query"], top_k=data["top_k"], filters=filters,
                    specific=data["specific"], rerank=data["rerank"])  # fmt: skip
    return {"query": data["query"], "hits": HitSerializer(hits, many=True).data}


def bootstrap(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(BootstrapApi.InputSerializer, arguments)
    return _guarded(bootstrap_pack, tenant=key.tenant, intent=data["intent"], filters=scope_filters(data.get("scope")))


def answer(key: ApiKey, **arguments: Any) -> dict[str, Any]:
    data = _valid(AnswerApi.InputSerializer, arguments)
    assistant = chat_services.assistant_get(tenant=key.tenant, name=data.get("assistant"))
    if data.get("assistant") and assistant is None:
        raise OperationError(f"assistant: no assistant named {data['assistant']!r} in this tenant.")
    filters = scope_filters(data["scope"]) if "scope" in data else None
    options = chat_services.AnswerSettings.from_assistant(assistant, top_k=data.get("top_k"), filters=filters)
    try:
        result = _guarded(chat_services.answer_question, tenant=key.tenant, question=data["question"], options=options)
    except chat_services.AnswersBusy as busy:
        raise OperationError(str(busy)) from busy
    except ModelUnavailable as unavailable:
        raise OperationError(f"{unavailable.reason} (retry in {unavailable.retry_after} s)") from unavailable
    return answer_payload(result)


def list_sources(key: ApiKey) -> dict[str, Any]:
    sources = Source.objects.for_tenant(key.tenant).prefetch_related("tags").order_by("source_id")
    return {"sources": SourceOutput(sources, many=True).data}


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
        for s in Source.objects.for_tenant(key.tenant).order_by("source_id")
    ]
    documents = Document.objects.for_tenant(key.tenant).exclude(status=Status.RETIRED).order_by("-updated_at")
    listed += [
        {
            "uri": f"ragsite://documents/{d.public_id}",
            "name": d.display_key,
            "description": f"{d.title or d.display_key} (version {d.version}); document_id {d.document_id}",
        }  # fmt: skip
        for d in documents[:MAX_LISTED_DOCUMENTS]
    ]
    return listed


def source_documents(key: ApiKey, source_uuid: str) -> dict[str, Any]:
    """A source and its documents (not the retired ones): what an agent can open with get_document."""
    try:
        source = Source.objects.for_tenant(key.tenant).filter(public_id=uuid.UUID(str(source_uuid))).first()
    except ValueError:
        source = None
    if source is None:
        raise OperationError(f"No source {source_uuid!r} in this tenant (use the `id` list_sources gives).")
    documents = source.documents.exclude(status=Status.RETIRED).order_by("document_key")
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
    documents = Document.objects.for_tenant(key.tenant).select_related("source")
    lookup = Q(document_id=document_id)
    try:
        lookup |= Q(public_id=uuid.UUID(str(document_id)))
    except ValueError:
        pass
    document = documents.filter(lookup).first()
    if document is None:
        raise OperationError(f"No document {document_id!r} in this tenant (use the document_id of a hit).")
    return document


def _chunk_location(chunk: Chunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.chunk_id,
        "index": chunk.index,
        "heading": chunk.heading,
        "line_start": chunk.line_start,
        "line_end": chunk.line_end,
        "page_start": chunk.page,
        "page_end": chunk.page_end or chunk.page,
        "page_label": chunk.page_label,
        "status": chunk.status,
    }


def get_document(key: ApiKey, document_id: str, version: int | None = None, start_chunk: int = 0) -> dict[str, Any]:
    """A version's chunks in order (text, chunk id, lines or pages): enough to read around a hit."""
    document = _document(key, document_id)
    wanted = version or document.version
    stored = document.versions.filter(version=wanted).first()
    if stored is None:
        known = sorted(document.versions.values_list("version", flat=True))
        raise OperationError(f"Document {document.document_id!r} has no version {wanted}; it has {known}.")
    start_chunk = max(0, int(start_chunk or 0))
    chunks = Chunk.objects.for_tenant(key.tenant).filter(document_version=stored).order_by("index")
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
        "chunks": [{**_chunk_location(c), "text": c.text} for c in page],
        "next_start_chunk": following if following < total else None,
    }


def document_history(key: ApiKey, document_id: str) -> dict[str, Any]:
    """Every version, newest first, with what changed from the one before it (chunks added, removed, kept)."""
    document = _document(key, document_id)
    versions = list(document.versions.order_by("version"))
    hashes: dict[int, set[str]] = {v.pk: set() for v in versions}
    for version_pk, content_hash in Chunk.objects.for_tenant(key.tenant).filter(document=document).values_list(
        "document_version_id", "content_hash"
    ):  # fmt: skip
        hashes.setdefault(version_pk, set()).add(content_hash)
    history, previous = [], None
    for stored in versions:
        mine = hashes.get(stored.pk, set())
        before = hashes.get(previous.pk, set()) if previous is not None else set()
        changes = {"chunks_added": len(mine - before), "chunks_removed": len(before - mine),
                   "chunks_kept": len(mine & before)}  # fmt: skip
        history.append({**VersionOutput(stored).data, "title": stored.title,
                        "changes_from_previous": changes if previous is not None else None})  # fmt: skip
        previous = stored
    return {
        "document_id": document.document_id,
        "id": str(document.public_id),
        "document_key": document.display_key,
        "current_version": document.version,
        "status": document.status,
        "versions": list(reversed(history)),
    }
