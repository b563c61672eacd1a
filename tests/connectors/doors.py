"""Every door a restricted connector document could leak through, for one identity: a member's browser session or an
API key. `sees` asks each door and fails naming any that disagrees with the others."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from knowledge.models import Document
from tenants.models import ApiKey

BASE = "/api/v1/tenants/acme"


def _rest(identity: Any) -> APIClient:
    client = APIClient()
    if isinstance(identity, tuple):
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {identity[1]}")
    else:
        client.force_login(identity)
    return client


def doors(identity: Any, question: str, document: Document, canary: str) -> dict[str, bool]:
    """Whether the document (its canary, or its key) comes back through each door. `identity`: a user (a session)
    or (ApiKey, its secret)."""
    client = _rest(identity)
    bodies = {
        "retrieve": client.post(f"{BASE}/retrieve/", {"query": question, "top_k": 8}, format="json"),
        "answer": client.post(f"{BASE}/answer/", {"question": question}, format="json"),
        "bootstrap": client.post(f"{BASE}/bootstrap/", {"intent": question}, format="json"),
        "documents": client.get(f"{BASE}/documents/"),
        "document": client.get(f"{BASE}/documents/{document.public_id}/"),
    }
    found: dict[str, str] = {}
    for door, response in bodies.items():
        assert response.status_code < 500, (door, response.content[:300])
        found[door] = response.content.decode()
    if isinstance(identity, tuple):
        key: ApiKey = identity[0]
        openai = APIClient()
        openai.credentials(HTTP_AUTHORIZATION=f"Bearer {identity[1]}")
        asked = {"model": "acme", "messages": [{"role": "user", "content": question}]}
        found["openai"] = openai.post("/v1/chat/completions", asked, format="json").content.decode()
        from mcp_tools import operations

        found["mcp-retrieve"] = str(operations.retrieve(key, query=question, top_k=8))
        found["mcp-answer"] = str(operations.answer(key, question=question))
        try:
            found["mcp-document"] = str(operations.get_document(key, document.document_id))
        except Exception as exc:  # noqa: BLE001  (the MCP door's "not found" for a document it may not see)
            found["mcp-document"] = type(exc).__name__
    return {door: canary in body or document.document_key in body for door, body in found.items()}


def sees(identity: Any, question: str, document: Document, canary: str) -> bool:
    """The document for this identity: every door agrees, or the assertion names the doors that do not."""
    seen = doors(identity, question, document, canary)
    assert len(set(seen.values())) == 1, seen
    return next(iter(seen.values()))
