"""The MCP server, driven by the SDK's own client: streamable HTTP against a real gunicorn process, and stdio.

One server process for the module: its own data directory, two tenants with real ingested documents
(the packaged MiniLM embedder, the embedded Qdrant Edge store owned by the web worker), and the real
packaged 0.5B for `answer`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.servers import ROOT, environment, manage, start_gunicorn, stop

TOOLS = {
    "retrieve",
    "bootstrap",
    "answer",
    "list_sources",
    "get_document",
    "document_history",
    "report_verdict",
    "get_receipt",
    "changes_since",
    "session_start",
    "session_changes",
    "session_ledger",
    "session_end",
}
WRITES = {"report_verdict", "session_start", "session_end"}  # a verdict; a session is the key's own state

ACME_FILES = {
    "returns.md": "# Returns\n\nReturns are accepted within thirty days of purchase with the original receipt.\n\n"
    "Refunds go back to the card used for the purchase within five business days.\n",
    "shipping.md": "# Shipping\n\nOrders ship from the Rotterdam warehouse. Express delivery costs 12 euros.\n",
}
RETURNS_ID = "doc:src:acme:folder:handbook:returns.md"  # acme's document, by the id its hits carry
GLOBEX_FILES = {"secret.md": "# Project Falcon\n\nThe Falcon launch code is kept in the blue vault in Oslo.\n"}
CANARY = "wombat5519heron"  # only in acme's group:hr document
HR_FILES = {"salaries.md": f"# Salary bands\n\nThe salary band for a senior engineer is 92,000 euros. Ref {CANARY}.\n"}
SALARIES_ID = "doc:src:acme:folder:hr-files:salaries.md"

SETUP = """
import json
from django.utils import timezone
from knowledge.ingest import pipeline
from knowledge.services import source_set_access
from tenants.services import api_key_issue, group_create, tenant_create
from pathlib import Path
keys = {}
for slug, folder in (("acme", "{acme}"), ("globex", "{globex}")):
    tenant = tenant_create(slug=slug, name=slug.title())
    source = pipeline.folder_source_get_or_create(tenant=tenant, name="handbook", path=Path(folder))
    pipeline.sync_folder(source=source, root=Path(folder))
    keys[slug] = api_key_issue(tenant=tenant, name="mcp", scope="read")[1]
    keys[slug + "-write"] = api_key_issue(tenant=tenant, name="mcp-write", scope="write")[1]
    if slug == "acme":  # a source only group:hr sees, and a key acting for that group
        group_create(tenant=tenant, name="hr")
        hr = pipeline.folder_source_get_or_create(tenant=tenant, name="hr-files", path=Path("{acme_hr}"))
        source_set_access(tenant=tenant, source=hr, access=["group:hr"])
        pipeline.sync_folder(source=hr, root=Path("{acme_hr}"))
        keys["acme-hr"] = api_key_issue(tenant=tenant, name="hr-bot", scope="read", acts_for=["group:hr"])[1]
revoked, raw = api_key_issue(tenant=tenant, name="revoked")
revoked.revoked_at = timezone.now()
revoked.save()
keys["revoked"] = raw
print(json.dumps(keys))
"""


def _environment(data_dir: Path, models: Path, runtime: Path) -> dict[str, str]:
    from inference.packaged import QWEN_0_5B, assemble_gguf

    return environment(
        data_dir, RAG_LLM_MODEL_PATH=str(assemble_gguf(QWEN_0_5B, models / QWEN_0_5B.filename)),
        RAG_LLM_RUNTIME_DIR=str(runtime), RAG_API_KEY_FAILURE_LIMIT="10",
    )  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_server):  # type: ignore[no-untyped-def]
    data_dir = tmp_path_factory.mktemp("mcp-server")
    folders = []
    for name, files in (("acme-docs", ACME_FILES), ("globex-docs", GLOBEX_FILES), ("acme-hr", HR_FILES)):
        folder = data_dir / name
        folder.mkdir()
        for relative, text in files.items():
            (folder / relative).write_text(text)
        folders.append(str(folder))
    env = _environment(data_dir, tmp_path_factory.getbasetemp() / "models", model_server)  # the session's model
    assert manage(env, "migrate", "-v0").returncode == 0
    script = SETUP.replace("{acme}", folders[0]).replace("{globex}", folders[1]).replace("{acme_hr}", folders[2])
    setup = manage(env, "shell", "-c", script)
    assert setup.returncode == 0, setup.stderr
    keys = json.loads(setup.stdout.strip().splitlines()[-1])
    log = (data_dir / "server.log").open("w")
    process = start_gunicorn(env, log)
    url = f"http://127.0.0.1:{env['PORT']}/mcp/"
    try:
        yield {"url": url, "keys": keys, "env": env, "log": data_dir / "server.log"}
    finally:
        stop(process)
        log.close()


def _http(key: str, scheme: str = "Api-Key") -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"{scheme} {key}"}, timeout=300)


def over_http(server: dict[str, Any], key: str, calls, scheme: str = "Api-Key"):  # type: ignore[no-untyped-def]
    """Run `calls(client)` with an SDK client connected over streamable HTTP; returns what it returns."""

    async def main() -> Any:
        async with _http(key, scheme) as http, Client(streamable_http_client(server["url"], http_client=http)) as c:
            return await calls(c)

    return anyio.run(main)


async def _tool(client: Client, name: str, **arguments: Any) -> Any:
    return await client.call_tool(name, arguments)


def test_tools_are_listed_with_descriptions_an_agent_can_choose_by(server):
    async def calls(c: Client) -> Any:
        return (await c.list_tools()).tools, (await c.list_resource_templates()).resource_templates

    tools, templates = over_http(server, server["keys"]["acme"], calls)
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert len(tool.description or "") > 60, tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint == (tool.name not in WRITES)
    retrieve = next(t for t in tools if t.name == "retrieve")
    assert {"query", "top_k", "mode", "source_ids", "tags", "specific"} <= set(retrieve.input_schema["properties"])
    assert {t.uri_template for t in templates} == {
        "ragsite://sources/{source_uuid}",
        "ragsite://documents/{document_uuid}",
    }


def test_retrieve_returns_what_the_rest_api_returns(server):
    key = server["keys"]["acme"]

    async def calls(c: Client) -> Any:
        return await _tool(c, "retrieve", query="How many days do I have to return an item?", top_k=3)

    result = over_http(server, key, calls)
    assert not result.is_error
    hits = result.structured_content["hits"]
    assert hits[0]["document_key"] == "returns.md" and "thirty days" in hits[0]["text"]
    rest = httpx2.post(server["url"].replace("/mcp/", "/api/v1/tenants/acme/retrieve/"),
                       json={"query": "How many days do I have to return an item?", "top_k": 3},
                       headers={"Authorization": f"Api-Key {key}"}, timeout=60).json()  # fmt: skip
    assert [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in rest["hits"]]
    assert set(hits[0]) == set(rest["hits"][0])  # same fields: ids, locations, signals


def test_documents_sources_history_and_bootstrap(server):
    async def calls(c: Client) -> Any:
        sources = await _tool(c, "list_sources")
        hit = (await _tool(c, "retrieve", query="express delivery price", top_k=1)).structured_content["hits"][0]
        document = await _tool(c, "get_document", document_id=hit["document_id"])
        history = await _tool(c, "document_history", document_id=hit["document_id"])
        pack = await _tool(c, "bootstrap", intent="shipping costs")
        source_id = sources.structured_content["sources"][0]["id"]
        resource = await c.read_resource(f"ragsite://sources/{source_id}")
        listed = (await c.list_resources()).resources
        opened = await c.read_resource(next(r.uri for r in listed if r.name == "shipping.md"))
        return hit, sources, document, history, pack, resource, listed, opened

    hit, sources, document, history, pack, resource, listed, opened = over_http(server, server["keys"]["acme"], calls)
    assert {r.name for r in listed} == {"source: handbook", "returns.md", "shipping.md"}  # this tenant's only
    assert "12 euros" in opened.contents[0].text
    assert [s["name"] for s in sources.structured_content["sources"]] == ["handbook"]
    text = document.structured_content
    assert text["document_key"] == "shipping.md" and text["version"] == 1
    assert hit["chunk_id"] in [c["chunk_id"] for c in text["chunks"]]
    assert "12 euros" in " ".join(c["text"] for c in text["chunks"])
    assert all(c["line_start"] for c in text["chunks"])
    versions = history.structured_content["versions"]
    assert [v["version"] for v in versions] == [1] and versions[0]["chunk_count"] >= 1
    assert not pack.is_error and pack.structured_content["items"]
    listed = json.loads(resource.contents[0].text)
    assert {d["document_key"] for d in listed["documents"]} == {"returns.md", "shipping.md"}


def test_a_restricted_document_exists_only_for_keys_acting_for_its_readers(server):
    """Over streamable HTTP with the SDK's client: retrieve, bootstrap, sources, resources, get_document and history
    show acme's group:hr document to the key acting for group:hr, and nothing of it to the tenant's key."""

    async def calls(c: Client) -> Any:
        hits = await _tool(c, "retrieve", query="What is the salary band for a senior engineer?", top_k=5)
        pack = await _tool(c, "bootstrap", intent="salary bands")
        sources = await _tool(c, "list_sources")
        listed = [r.name for r in (await c.list_resources()).resources]
        document = await _tool(c, "get_document", document_id=SALARIES_ID)
        history = await _tool(c, "document_history", document_id=SALARIES_ID)
        changes = await _tool(c, "changes_since", since="2000-01-01")
        return hits, pack, sources, listed, document, history, changes

    for key, sees in (("acme", False), ("acme-hr", True)):
        hits, pack, sources, listed, document, history, changes = over_http(server, server["keys"][key], calls)
        changed = {c["document"]["document_key"] for c in changes.structured_content["changes"]}
        assert ("salaries.md" in changed) is sees and "returns.md" in changed
        keys = {h["document_key"] for h in hits.structured_content["hits"]}
        assert ("salaries.md" in keys) is sees and keys  # the open handbook answers the others
        assert ("salaries.md" in listed) is sees and ("source: hr-files" in listed) is sees
        assert ("hr-files" in {s["name"] for s in sources.structured_content["sources"]}) is sees
        assert document.is_error is (not sees) and history.is_error is (not sees)
        if not sees:  # hidden is "no such document", the words a missing one gets
            assert "No document" in document.content[0].text and "No document" in history.content[0].text
        everything = json.dumps([hits.structured_content, pack.structured_content, sources.structured_content,
                                 listed, [c.model_dump() for c in document.content]], default=str)  # fmt: skip
        assert (CANARY in everything) is sees, key
    assert CANARY not in server["log"].read_text()  # no log line carries the restricted text


def test_a_session_over_mcp_brings_only_what_it_does_not_hold_and_is_the_keys_alone(server):
    question = "How much does express delivery cost and where do orders ship from?"

    async def calls(c: Client) -> Any:
        started = (await _tool(c, "session_start", purpose="a support case")).structured_content
        session = started["id"]
        pack = await _tool(c, "bootstrap", intent="shipping", session=session, max_tokens=30)
        first = await _tool(c, "retrieve", query=question, top_k=1, session=session)
        second = await _tool(c, "retrieve", query=question, top_k=1, session=session)
        ledger = await _tool(c, "session_ledger", session=session)
        changes = await _tool(c, "session_changes", session=session)
        bad = await _tool(c, "retrieve", query=question, session="not-a-session")
        budget = await _tool(c, "retrieve", query=question, max_tokens=0)
        return session, pack, first, second, ledger, changes, bad, budget

    session, pack, first, second, ledger, changes, bad, budget = over_http(server, server["keys"]["acme"], calls)
    assert not pack.is_error and pack.structured_content["tokens"] <= 30
    one, two = first.structured_content, second.structured_content
    assert len(one["hits"]) == 1 and len(two["hits"]) == 1 and one["hits"][0]["chunk_id"] != two["hits"][0]["chunk_id"]
    assert two["already_delivered"][0]["chunk_id"] == one["hits"][0]["chunk_id"] and two["memory_changes"] == 0
    given = [d["chunk_id"] for d in ledger.structured_content["deliveries"]]
    assert one["hits"][0]["chunk_id"] in given and two["hits"][0]["chunk_id"] in given
    assert changes.structured_content["changes"] == []
    assert bad.is_error and "session: Must be a valid UUID" in bad.content[0].text
    assert budget.is_error and "max_tokens" in budget.content[0].text

    async def others(c: Client) -> Any:
        return await _tool(c, "retrieve", query=question, session=session), await _tool(
            c, "session_end", session=session
        )

    for key in ("acme-write", "globex"):  # another key of the tenant, a key of another tenant: no such session
        used, ended = over_http(server, server["keys"][key], others)
        assert used.is_error and ended.is_error and "No session" in used.content[0].text

    async def end(c: Client) -> Any:
        return await _tool(c, "session_end", session=session), await _tool(
            c, "retrieve", query=question, session=session
        )

    ended, after = over_http(server, server["keys"]["acme"], end)
    assert not ended.is_error and after.is_error and "ended" in after.content[0].text


@pytest.mark.slow
def test_an_answer_in_a_session_gives_back_only_the_hits_it_does_not_hold(server):
    question = "Within how many days are returns accepted?"

    async def calls(c: Client) -> Any:
        session = (await _tool(c, "session_start")).structured_content["id"]
        held = (await _tool(c, "retrieve", query=question, top_k=1, session=session)).structured_content["hits"]
        answered = (await _tool(c, "answer", question=question, session=session)).structured_content
        return held, answered

    held, answered = over_http(server, server["keys"]["acme"], calls)
    assert held[0]["document_key"] == "returns.md"
    assert {c["document_key"] for c in answered["citations"]} == {"returns.md"}  # it still reads what the agent holds
    assert held[0]["chunk_id"] not in [h["chunk_id"] for h in answered["hits"]]
    assert [d["chunk_id"] for d in answered["already_delivered"]] == [held[0]["chunk_id"]]


@pytest.mark.slow
def test_answer_is_cited_by_the_right_document(server):
    async def calls(c: Client) -> Any:
        return await _tool(c, "answer", question="Within how many days are returns accepted?")

    result = over_http(server, server["keys"]["acme"], calls).structured_content
    assert result["generated"] and result["status"] in ("answered", "partial")
    assert {c["document_key"] for c in result["citations"]} == {"returns.md"}
    assert any(claim["supported"] for claim in result["claims"])

    # An agent that checked the answer downstream reports it: a write-scoped key of the answer's own tenant only.
    def verdict(**arguments: Any):  # type: ignore[no-untyped-def]
        async def calls(c: Client) -> Any:
            return await _tool(c, "report_verdict", answer_id=result["answer_id"], **arguments)

        return calls

    wrong = {"helpful": False, "reason": "wrong_fact", "claims": [0], "correct_answer": "30 days"}
    read_only = over_http(server, server["keys"]["acme"], verdict(**wrong))
    assert read_only.is_error and "scope write" in read_only.content[0].text
    other = over_http(server, server["keys"]["globex-write"], verdict(**wrong))
    assert other.is_error and "No answer with that id" in other.content[0].text
    bad = over_http(server, server["keys"]["acme-write"], verdict(helpful=False, claims=[99]))
    assert bad.is_error and "claims" in bad.content[0].text
    given = over_http(server, server["keys"]["acme-write"], verdict(**wrong, document_id=RETURNS_ID))
    assert not given.is_error, given.content
    assert given.structured_content["queued_for_curation"] and given.structured_content["document_id"] == RETURNS_ID

    # Its receipt: for the key that asked; another key of the tenant is told it does not exist.
    def receipt(c: Client) -> Any:
        return _tool(c, "get_receipt", answer_id=result["answer_id"])

    mine = over_http(server, server["keys"]["acme"], receipt)
    assert not mine.is_error and mine.structured_content["door"] == "mcp"
    verified = [claim for claim in mine.structured_content["claims"] if claim["supported"]]
    assert verified and all(c["now"] == "unchanged" and c["then"]["state"] == "held" for c in verified)
    assert over_http(server, server["keys"]["acme-write"], receipt).is_error


def test_a_key_of_one_tenant_never_sees_another_tenants_data(server):
    async def calls(c: Client) -> Any:
        found = await _tool(c, "retrieve", query="Falcon launch code vault", top_k=10)
        listed = {r.name for r in (await c.list_resources()).resources}
        return found, await _tool(c, "get_document", document_id=RETURNS_ID), await _tool(c, "list_sources"), listed

    found, other, sources, listed = over_http(server, server["keys"]["globex"], calls)

    async def feed(c: Client) -> Any:
        return await _tool(c, "changes_since", since="2000-01-01")

    fed = over_http(server, server["keys"]["globex"], feed).structured_content["changes"]
    assert {c["document"]["document_key"] for c in fed} == {"secret.md"}  # nothing of acme's
    assert listed == {"source: handbook", "secret.md"}
    keys = {h["document_key"] for h in found.structured_content["hits"]}
    assert keys == {"secret.md"}
    assert other.is_error and "No document" in other.content[0].text
    assert [s["source_id"] for s in sources.structured_content["sources"]] == ["src:globex:folder:handbook"]

    async def acme_calls(c: Client) -> Any:
        return await _tool(c, "retrieve", query="Falcon launch code vault", top_k=10)

    acme = over_http(server, server["keys"]["acme"], acme_calls).structured_content["hits"]
    assert "secret.md" not in {h["document_key"] for h in acme}


def test_bad_arguments_are_tool_errors_with_clear_messages(server):
    async def calls(c: Client) -> Any:
        blank = await _tool(c, "retrieve", query="   ")
        huge = await _tool(c, "retrieve", query="x", top_k=500)
        return blank, huge, await _tool(c, "get_document", document_id=RETURNS_ID, version=9)

    blank, huge, version = over_http(server, server["keys"]["acme"], calls)
    assert blank.is_error and "query" in blank.content[0].text
    assert huge.is_error and "top_k" in huge.content[0].text
    assert version.is_error and "no version 9" in version.content[0].text


def _stdio(server: dict[str, Any], tenant: str, key: str) -> StdioServerParameters:
    env = {**server["env"], "RAGSITE_API_KEY": key, "RAGSITE_URL": server["url"]}
    return StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", "--tenant", tenant], env=env,
                                 cwd=str(ROOT))  # fmt: skip


def test_stdio_serves_the_same_tools_through_the_running_server(server):
    async def main() -> Any:
        async with Client(_stdio(server, "acme", server["keys"]["acme"])) as c:
            tools = (await c.list_tools()).tools
            found = await c.call_tool("retrieve", {"query": "Rotterdam warehouse", "top_k": 2})
            leak = await c.call_tool("retrieve", {"query": "Falcon launch code vault", "top_k": 10})
            return tools, found, leak

    tools, found, leak = anyio.run(main)
    assert {t.name for t in tools} == TOOLS
    assert found.structured_content["hits"][0]["document_key"] == "shipping.md"
    assert "secret.md" not in {h["document_key"] for h in leak.structured_content["hits"]}


def test_stdio_refuses_a_key_of_another_tenant_before_serving(server):
    params = _stdio(server, "acme", server["keys"]["globex"])
    result = subprocess.run([params.command, *params.args], cwd=ROOT, env=params.env, input="", capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode != 0
    assert "is not an active API key of tenant 'acme'" in result.stderr


def _rpc(server: dict[str, Any], authorization: str | None) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "retrieve", "arguments": {"query": "returns"}}}  # fmt: skip
    return httpx2.post(server["url"], json=body, headers=headers, timeout=60)


def test_missing_wrong_and_revoked_keys_are_refused_before_any_tool_runs(server):
    for authorization in (None, "Api-Key rag_wrong-key-000000000000", f"Api-Key {server['keys']['revoked']}"):
        response = _rpc(server, authorization)
        assert response.status_code == 401, (authorization, response.text)
        assert "API key" in response.json()["error"]["message"]
    assert _rpc(server, f"Bearer {server['keys']['acme']}").status_code == 200  # Bearer works as Api-Key does
    with pytest.raises(ExceptionGroup) as refused:  # the SDK client cannot even connect with a wrong key
        over_http(server, "rag_wrong-key-000000000000", lambda c: c.list_tools())
    assert refused.group_contains(MCPError, match="Invalid or revoked API key")
    # Past RAG_API_KEY_FAILURE_LIMIT (10 here) wrong keys, the address's wrong keys get 429, as on the REST API,
    # and a valid key from the same address still works. (Last in the module: this address's guesses are locked.)
    statuses = [_rpc(server, "Api-Key rag_wrong-key-000000000000") for _ in range(11)]
    assert statuses[-1].status_code == 429 and int(statuses[-1].headers["Retry-After"]) > 0
    assert _rpc(server, f"Api-Key {server['keys']['acme']}").status_code == 200


def _scope(authorization: str, host: str = "127.0.0.1:8000") -> dict[str, Any]:
    return {"type": "http", "client": ("10.0.0.7", 5000),
            "headers": [(b"host", host.encode()), (b"authorization", authorization.encode())]}  # fmt: skip


def test_the_rest_api_rate_limit_applies_per_key_and_the_host_is_checked(tenant_a, monkeypatch, settings):
    from mcp_tools.http import Refused, authenticate
    from tenants.services import api_key_issue
    from tenants.throttling import ApiKeyRateThrottle

    monkeypatch.setattr(ApiKeyRateThrottle, "THROTTLE_RATES", {"api_key": "2/min"})
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    _, raw = api_key_issue(tenant=tenant_a, scope="read")
    assert authenticate(_scope(f"Api-Key {raw}")).tenant == tenant_a
    assert authenticate(_scope(f"Bearer {raw}")).tenant == tenant_a
    with pytest.raises(Refused) as throttled:
        authenticate(_scope(f"Api-Key {raw}"))
    assert throttled.value.status == 429 and int(throttled.value.headers["Retry-After"]) > 0
    with pytest.raises(Refused) as bad_host:
        authenticate(_scope(f"Api-Key {raw}", host="evil.example"))
    assert bad_host.value.status == 400


def test_stdio_says_plainly_when_the_server_is_not_running(server):
    env = {**server["env"], "RAGSITE_API_KEY": server["keys"]["acme"], "RAGSITE_URL": "http://127.0.0.1:9/mcp/"}
    result = subprocess.run([sys.executable, "manage.py", "mcp", "--tenant", "acme"], cwd=ROOT, env=env, input="",
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode != 0
    assert "Cannot reach the ragsite server at http://127.0.0.1:9/mcp/" in result.stderr
    assert "Traceback" not in result.stderr
