"""Access decided per version: an earlier version of a note that carried a restricted note's text (a vault embed,
rendered before the embedded note was narrowed) stays as strict as that text, on every door that reads history —
`include_superseded`, a past `as_of` (REST and MCP retrieve, bootstrap, answers), MCP `get_document` and
`document_history`, the read page's `?version=`, an answer's note of what changed. Each case leaked the canary on
the code before issue 61 (one access list covered every version of a document)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import TestCase

from knowledge import services
from knowledge.index import indexer
from knowledge.models import Document, DocumentVersion, VersionCarry
from knowledge.search.retrieval import RetrieveFilters, retrieve
from mcp_tools import operations
from tenants.models import ApiKey
from tests.test_access_relations import (
    BASE,
    EMBED_CANARY,
    EMBED_QUESTION,
    _doc,
    _identity_viewer,
    _served_text,
    wiki,  # noqa: F401  (the fixture)
)
from tests.test_permissions import IDENTITIES, PRESENT, SESSION_USERS, _body, _client


def _version_text(document: Document, number: int) -> str:
    version = DocumentVersion.objects.get(document=document, version=number)
    return "\n".join(version.chunks.order_by("index").values_list("text", flat=True))


@pytest.fixture
def history(wiki):  # type: ignore[no-untyped-def]  # noqa: F811
    """The wiki after the minutes were narrowed and the vault's sync ran: Index v2 shows a placeholder and is open
    to the tenant again; Index v1 still holds the minutes' text."""
    for callback in wiki["callbacks"]:
        callback()
    indexer.drain()
    index = _doc("Index.md")
    assert index.version == 2 and EMBED_CANARY not in _served_text("Index.md")
    assert index.reader_list == ["tenant"]
    assert EMBED_CANARY in _version_text(index, 1)
    first = DocumentVersion.objects.get(document=index, version=1)
    assert first.served_from is not None and first.served_until is not None
    then = first.served_from + (first.served_until - first.served_from) / 2  # while v1 was the one served
    return {**wiki, "index": index, "then": then.isoformat()}


def _history_reads(company: dict[str, Any], identity: str) -> dict[str, tuple[int, str]]:
    """Every door that reads a past version, for the embed question, as (status, body)."""
    client = _client(company, identity)
    index, then = company["index"], company["then"]
    question = {"query": EMBED_QUESTION, "top_k": 8}
    calls = {
        "retrieve-superseded": client.post(
            f"{BASE}/retrieve/", {**question, "include_superseded": True}, format="json"
        ),  # fmt: skip
        "retrieve-as-of": client.post(f"{BASE}/retrieve/", {**question, "as_of": then}, format="json"),
        "retrieve-as-of-expired": client.post(
            f"{BASE}/retrieve/", {**question, "as_of": then, "include_expired": True}, format="json"
        ),  # fmt: skip
        "bootstrap-as-of": client.post(
            f"{BASE}/bootstrap/", {"intent": "acquisition board", "as_of": then}, format="json"
        ),  # fmt: skip
        "answer-as-of": client.post(f"{BASE}/answer/", {"question": EMBED_QUESTION, "as_of": then}, format="json"),
        "index": client.get(f"{BASE}/documents/{index.public_id}/"),
    }
    if identity in SESSION_USERS:
        calls["read-page-v1"] = client.get(f"/t/acme/read/{index.document_id}/?version=1")
    reads = {name: (response.status_code, _body(response)) for name, response in calls.items()}
    if identity not in SESSION_USERS:
        key = ApiKey.objects.get(tenant=company["tenant"], name=identity)
        mcp = {
            "mcp-get-document-v1": lambda: operations.get_document(key, index.document_id, version=1),
            "mcp-history": lambda: operations.document_history(key, index.document_id),
            "mcp-retrieve-as-of": lambda: operations.retrieve(key, query=EMBED_QUESTION, as_of=then),
            "mcp-retrieve-superseded": lambda: operations.retrieve(
                key, query=EMBED_QUESTION, include_superseded=True
            ),  # fmt: skip
            "mcp-bootstrap-as-of": lambda: operations.bootstrap(key, intent="acquisition board", as_of=then),
        }
        for name, call in mcp.items():
            try:
                reads[name] = (200, repr(call()))
            except operations.OperationError as exc:
                reads[name] = (404, str(exc))
    return reads


@pytest.mark.parametrize("identity", PRESENT)
def test_an_earlier_version_that_carries_a_restricted_notes_text_is_read_only_by_that_notes_readers(history, identity):
    sees = IDENTITIES[identity]
    got = _history_reads(history, identity)
    for door, (status, body) in got.items():
        assert status < 500, (door, status, body[:300])
        if not sees:
            assert EMBED_CANARY not in body, door
    if sees:  # the minutes' readers still read the index's history as it was
        assert EMBED_CANARY in got["retrieve-superseded"][1]
        if identity not in SESSION_USERS:
            assert EMBED_CANARY in got["mcp-get-document-v1"][1]
    else:  # to the others, version 1 is a version that is not there
        assert got["index"][0] == 200  # the index itself is open: its current version
        if identity not in SESSION_USERS:
            assert got["mcp-get-document-v1"][0] == 404 and "[2]" in got["mcp-get-document-v1"][1]
            assert "'version': 1" not in got["mcp-history"][1]


def test_the_vector_points_of_the_earlier_version_carry_the_notes_list(history):
    """Decided inside the vector query, not after it: the store's payload of every point of Index v1 holds the
    minutes' list, so a restricted viewer's superseded query never receives them."""
    from knowledge.index.vectorstore import Scope, get_store

    index = history["index"]
    first = DocumentVersion.objects.get(document=index, version=1)
    assert first.reader_list == ["group:hr"]
    assert VersionCarry.objects.filter(version=first, note=history["minutes"]).exists()
    tenant = str(history["tenant"].public_id)
    store, identity = get_store(), indexer.version_identity(first)

    def points(number: int, principals: list[str]) -> int:
        key = indexer.version_key(index.document_id, number)
        return store.count(identity, Scope(tenant=tenant, statuses=None, version_keys=[key], principals=principals))

    assert points(1, ["tenant"]) == 0 and points(1, ["group:hr"]) == first.chunks.count() > 0
    assert points(2, ["tenant"]) == DocumentVersion.objects.get(document=index, version=2).chunks.count() > 0


def test_narrowing_a_note_later_narrows_every_version_that_carries_its_text(history):
    """Opened again, the minutes are embedded again (v3 carries them); narrowed to one person after that, every
    version that carries their text — the served one and v1 — is as strict as they are, at once in SQL."""
    tenant = history["tenant"]
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.document_set_access(tenant=tenant, document=history["minutes"], access=None)
    indexer.drain()
    index = _doc("Index.md")
    assert index.version == 3 and EMBED_CANARY in _served_text("Index.md")
    hanna = _identity_viewer(history, "staff-in-group")
    superseded = RetrieveFilters(statuses=["active", "superseded"])
    assert any(EMBED_CANARY in h.chunk.text for h in retrieve(viewer=hanna, query=EMBED_QUESTION, top_k=8,
                                                               filters=superseded))  # fmt: skip
    with TestCase.captureOnCommitCallbacks(execute=False):  # the payload update and the sync not yet run
        services.document_set_access(tenant=tenant, document=history["minutes"], access=["user:alice"])
    for number in (1, 3):
        assert DocumentVersion.objects.get(document=index, version=number).reader_list == ["user:alice"]
    assert DocumentVersion.objects.get(document=index, version=2).reader_list == ["tenant"]
    for when in ("before the payloads", "after them"):
        hits = retrieve(viewer=hanna, query=EMBED_QUESTION, top_k=8, filters=superseded)
        assert not any(EMBED_CANARY in h.chunk.text for h in hits), when
        indexer.drain()


def test_an_answers_note_of_what_changed_never_quotes_a_version_the_reader_may_not_see(history):
    """A question about the past reads what each excerpt's version changed from the one before it: for Index v2
    that is v1, which holds the minutes' text, quoted only to its readers."""
    from chat import history as chat_history
    from knowledge.search.retrieval import RetrievedChunk

    index = history["index"]
    v2 = DocumentVersion.objects.get(document=index, version=2)
    chunk = v2.chunks.order_by("index").first()
    hit = RetrievedChunk(chunk=chunk, score=1.0)
    outside = _identity_viewer(history, "staff-outside")
    inside = _identity_viewer(history, "staff-in-group")
    removed, _added = chat_history.changed_lines(hit, outside)
    assert not any(EMBED_CANARY in line for line in removed) and removed == []
    removed, _added = chat_history.changed_lines(hit, inside)
    assert any("Board minutes" in line or "Northwind" in line for line in removed)


def test_an_as_of_read_before_the_change_keeps_the_strict_list_after_the_note_is_opened_again(history):
    """A version's list follows the note it carries: opened to the tenant again, the minutes' text in Index v1 is
    readable by everyone again, on the history doors too (the list is the note's, not a copy frozen at narrowing)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.document_set_access(tenant=history["tenant"], document=history["minutes"], access=None)
    indexer.drain()
    first = DocumentVersion.objects.get(document=history["index"], version=1)
    assert first.reader_list == ["tenant"]
    status, body = _history_reads(history, "key-tenant")["retrieve-superseded"]
    assert status == 200 and EMBED_CANARY in body
