"""The OpenAI-compatible door without a chat model: models, keys, scopes and every error in OpenAI's shape.
(Answers through the official `openai` package, against a live server and the real model: test_openai.py.)"""

from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

from chat.models import Assistant
from inference.runtime import RESTARTING, STARTING, RuntimeState, write_state
from tenants.models import ApiKey
from tenants.services import api_key_issue, api_key_revoke
from tests.factories import make_folder_source


def _client(key: str = "", scheme: str = "Bearer") -> APIClient:
    client = APIClient()
    if key:
        client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client


def _error(response, status: int) -> dict:  # type: ignore[no-untyped-def]
    assert response.status_code == status, (response.status_code, response.content[:300])
    body = response.json()
    assert set(body) == {"error"} and {"message", "type", "code", "param"} <= set(body["error"]), body
    assert body["error"]["message"]
    return body["error"]


@pytest.fixture
def assistants(tenant_a, tenant_b):  # type: ignore[no-untyped-def]
    Assistant.objects.create(tenant=tenant_a, name="support")
    Assistant.objects.create(tenant=tenant_a, name="hr-desk")
    Assistant.objects.create(tenant=tenant_b, name="secret-bot")


def test_models_are_the_tenants_assistants_and_nothing_of_another_tenant(tenant_a, tenant_b, assistants):
    key = api_key_issue(tenant=tenant_a)[1]
    for scheme in ("Bearer", "Api-Key"):
        response = _client(key, scheme).get("/v1/models")
        assert response.status_code == 200
        body = response.json()
        assert body["object"] == "list"
        assert [m["id"] for m in body["data"]] == ["acme", "acme/hr-desk", "acme/support"]
        assert all(m["object"] == "model" and m["owned_by"] == "acme" for m in body["data"])
    assert _client(key).get("/v1/models/acme/support").json()["id"] == "acme/support"
    for other in ("globex", "globex/secret-bot", "acme/secret-bot", "gpt-4o"):
        error = _error(_client(key).get(f"/v1/models/{other}"), 404)
        assert error["code"] == "model_not_found" and other in error["message"]
    other_key = api_key_issue(tenant=tenant_b)[1]
    assert [m["id"] for m in _client(other_key).get("/v1/models").json()["data"]] == ["globex", "globex/secret-bot"]


def test_a_missing_wrong_or_revoked_key_is_a_401_in_openais_shape(tenant_a, client_a):
    key, raw = api_key_issue(tenant=tenant_a)
    for client in (_client(), _client("rs_wrong_key"), _client("rs_wrong_key", "Api-Key"), _client(raw, "Token")):
        for method, url in (("get", "/v1/models"), ("post", "/v1/chat/completions")):
            response = getattr(client, method)(url, {"model": "acme", "messages": []}, format="json")
            error = _error(response, 401)
            assert error["code"] == "invalid_api_key" and response["WWW-Authenticate"] == "Bearer"
    api_key_revoke(tenant=tenant_a, api_key=key, actor=None)
    _error(_client(raw).get("/v1/models"), 401)
    # A signed-in session is not a key: this door is for clients that send one.
    _error(client_a.get("/v1/models"), 401)


def test_malformed_bodies_and_requests_without_a_question_are_400s(tenant_a):
    client = _client(api_key_issue(tenant=tenant_a)[1])
    url = "/v1/chat/completions"
    bad = client.generic("POST", url, b'{"model": "acme", "messages": [', content_type="application/json")
    assert "JSON" in _error(bad, 400)["message"]
    cases = [
        ({}, "model"),
        ({"model": "acme"}, "messages"),
        ({"model": "acme", "messages": []}, "messages"),
        ({"model": "acme", "messages": [{"role": "system", "content": "Be brief."}]}, "messages"),
        ({"model": "acme", "messages": [{"role": "user", "content": "  "}]}, "messages"),
        (
            {"model": "acme", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "messages",
        ),
        ({"model": "acme", "messages": [{"role": "wizard", "content": "hi"}]}, "messages"),
        ({"model": "acme", "messages": "How long?"}, "messages"),
        ({"model": "acme", "messages": [{"role": "user", "content": "x" * 2001}]}, "messages"),
        ({"model": "acme", "messages": [{"role": "user", "content": "hi"}], "temperature": 9}, "temperature"),
        ({"model": "acme", "messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
        ({"model": "acme", "messages": [{"role": "user", "content": "hi"}], "stream": "maybe"}, "stream"),
    ]
    for body, param in cases:
        error = _error(client.post(url, body, format="json"), 400)
        assert error["type"] == "invalid_request_error" and error["param"] == param, (body, error)
    error = _error(client.post(url, "model=acme", content_type="application/x-www-form-urlencoded"), 415)
    assert error["type"] == "invalid_request_error"


def test_another_tenants_model_or_an_unknown_one_is_a_404_before_anything_is_read(tenant_a, tenant_b, assistants):
    client = _client(api_key_issue(tenant=tenant_a)[1])
    for model in ("globex", "globex/secret-bot", "acme/secret-bot", "acme/nope", "gpt-4o"):
        body = {"model": model, "messages": [{"role": "user", "content": "What is the warranty?"}]}
        error = _error(client.post("/v1/chat/completions", body, format="json"), 404)
        assert error["code"] == "model_not_found"


def test_past_the_keys_rate_limit_requests_get_a_429_with_retry_after(tenant_a, settings):
    from tenants.throttling import ApiKeyRateThrottle

    client = _client(api_key_issue(tenant=tenant_a)[1])
    rates = ApiKeyRateThrottle.THROTTLE_RATES
    ApiKeyRateThrottle.THROTTLE_RATES = {**rates, "api_key": "3/min"}
    try:
        statuses = [client.get("/v1/models").status_code for _ in range(4)]
        response = client.get("/v1/models")
    finally:
        ApiKeyRateThrottle.THROTTLE_RATES = rates
    assert statuses[:3] == [200, 200, 200]
    error = _error(response, 429)
    assert error["type"] == "rate_limit_error" and int(response["Retry-After"]) >= 1


@pytest.mark.parametrize("state", [STARTING, RESTARTING])
def test_while_the_chat_model_starts_an_answer_is_a_503_with_retry_after(tenant_a, settings, tmp_path, state):
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"warranty.md": "# Warranty\n\nTwo years.\n"})
    settings.RAG_LLM_RUNTIME_DIR = tmp_path / "llm"
    write_state(RuntimeState(state=state, supervisor_pid=os.getpid(), detail="Loading the chat model."))
    client = _client(api_key_issue(tenant=tenant_a)[1])
    for stream in (False, True):
        body = {"model": "acme", "stream": stream, "messages": [{"role": "user", "content": "Warranty?"}]}
        response = client.post("/v1/chat/completions", body, format="json")
        error = _error(response, 503)
        assert error["type"] == "server_error" and int(response["Retry-After"]) >= 1


def test_a_read_key_may_ask_and_the_key_acts_for_its_principals_only(tenant_a, tmp_path):
    """Answering reads: a read key may; with no chat model the answer is the excerpts themselves (extractive), which
    are cited, and a key that acts for the tenant gets nothing of a folder only the HR group sees."""
    from knowledge import services as knowledge_services
    from knowledge.index import indexer
    from tenants.services import group_create

    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"warranty.md": "# Warranty\n\n"
                       "Every product carries a two year warranty.\n"})  # fmt: skip
    hr = make_folder_source(tenant=tenant_a, root=tmp_path / "hr", files={"salaries.md": "# Salaries\n\n"
                            "The warranty team's salary band is 41,000 euros.\n"}, name="hr")  # fmt: skip
    group_create(tenant=tenant_a, name="hr")
    knowledge_services.source_set_access(tenant=tenant_a, source=hr, access=["group:hr"])
    indexer.drain()
    read_all = api_key_issue(tenant=tenant_a, scope=ApiKey.Scope.READ, acts_for=["all"])[1]
    read_tenant = api_key_issue(tenant=tenant_a, scope=ApiKey.Scope.READ)[1]
    body = {"model": "acme", "messages": [{"role": "user", "content": "What is the warranty team's salary band?"}]}
    seen = _client(read_all).post("/v1/chat/completions", body, format="json")
    assert seen.status_code == 200, seen.content[:300]
    seen = seen.json()
    assert seen["object"] == "chat.completion" and seen["choices"][0]["message"]["role"] == "assistant"
    assert seen["status"] == "extractive" and seen["answer_id"] and seen["usage"]["total_tokens"] == 0
    assert "salaries.md" in {c["document_key"] for c in seen["citations"]}
    limited = _client(read_tenant).post("/v1/chat/completions", body, format="json").json()
    assert "salaries.md" not in {c["document_key"] for c in limited["citations"]}
    assert limited["status"] in {"not_found", "extractive"}  # the warranty page does not say it: refused
    assert "41,000" not in limited["choices"][0]["message"]["content"]


def test_an_unknown_path_under_v1_is_a_json_404_in_openais_shape_never_a_page(tenant_a):
    client = _client(api_key_issue(tenant=tenant_a)[1])
    for url in ("/v1/embeddings", "/v1/chat/completion", "/v1/"):
        response = client.post(url, {}, format="json")
        error = _error(response, 404)
        assert error["type"] == "invalid_request_error" and "private" in response["Cache-Control"]


def test_a_short_message_that_points_back_is_a_follow_up_and_a_question_of_its_own_is_not():
    from chat.excerpts import follows_up

    for message in ("And which document says so?", "Where is that written?", "What about Spain?", "¿Y dónde lo dice?",
                    "Can you quote it?", "¿Eso vale también para Debian?"):  # fmt: skip
        assert follows_up(message), message
    for message in (
        "Within how many days are returns accepted?",
        "What is the default value of MAX_COOKIE_SIZE?",
        "¿Cuál es la versión de aptitude?",
        "How do I reset my password?",
        "Why does the server refuse the request when it is larger than the configured limit of 16 MB?",
    ):
        assert not follows_up(message), message


def test_a_long_earlier_turn_is_accepted_and_only_its_first_characters_condition_a_follow_up(tenant_a, tmp_path):
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"warranty.md": "# Warranty\n\nTwo years.\n"})
    client = _client(api_key_issue(tenant=tenant_a)[1])
    messages = [
        {"role": "user", "content": "How long is the warranty? " + "x" * 50_000},
        {"role": "assistant", "content": "Two years."},
        {"role": "user", "content": "Where is that written?"},
    ]
    response = client.post("/v1/chat/completions", {"model": "acme", "messages": messages}, format="json")
    assert response.status_code == 200, response.content[:300]
    from chat.models import AnswerRecord

    asked = AnswerRecord.objects.get(public_id=response.json()["answer_id"]).question
    assert asked.startswith("How long is the warranty?") and asked.endswith("Where is that written?")
    assert len(asked) <= 2000 + len(" Where is that written?")


def test_every_v1_route_takes_any_key_of_its_tenant_and_nothing_else(tenant_a, tenant_b, client_a, tmp_path):
    """The routes are enumerated from the URL configuration (a new /v1/ route is covered the day it is added): each
    declares that a read key may call it; a read or a write key may, a session or no key gets 401."""
    from django.urls import URLResolver, get_resolver

    from chat.openai_api import OpenAIApiView

    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"warranty.md": "# Warranty\n\nTwo years.\n"})
    v1 = next(r for r in get_resolver().url_patterns if isinstance(r, URLResolver) and str(r.pattern) == "v1/")
    routes = [(f"/v1/{p.pattern}".replace("<path:model>", "acme"), p.callback.view_class) for p in v1.url_patterns]
    assert {view.__name__ for _, view in routes} == {"ModelsApi", "ModelApi", "ChatCompletionsApi"}
    body = {"model": "acme", "messages": [{"role": "user", "content": "How long is the warranty?"}]}
    read, write = api_key_issue(tenant=tenant_a, scope="read")[1], api_key_issue(tenant=tenant_a, scope="write")[1]
    other = api_key_issue(tenant=tenant_b)[1]
    for url, view in routes:
        assert issubclass(view, OpenAIApiView) and view.door_role == "read key", url
        method = "post" if hasattr(view, "post") else "get"
        for key in (read, write):
            assert getattr(_client(key), method)(url, body, format="json").status_code == 200, (url, key[:8])
        for client in (_client(), client_a):
            _error(getattr(client, method)(url, body, format="json"), 401)
        if url != "/v1/models":  # another tenant's key: its own list, never this tenant's model
            _error(getattr(_client(other), method)(url, body, format="json"), 404)


def test_a_session_the_conversation_names_must_be_the_keys_own_and_live(tenant_a, tenant_b):
    """X-Ragsite-Session (or `user` as `session:<id>`): a malformed id is a 400, another key's or another tenant's
    session a 404, an ended one a 410, all in OpenAI's shape and before anything is read."""
    import datetime as dt
    import uuid

    from django.utils import timezone

    from agent_sessions import services as sessions
    from agent_sessions.models import AgentSession

    mine, raw = api_key_issue(tenant=tenant_a, name="agent")
    other_raw = api_key_issue(tenant=tenant_a, name="other")[1]
    theirs = api_key_issue(tenant=tenant_b, name="theirs")[0]
    session = sessions.session_create(tenant=tenant_a, api_key=mine)
    foreign = sessions.session_create(tenant=tenant_b, api_key=theirs)
    body = {"model": "acme", "messages": [{"role": "user", "content": "How long is the warranty?"}]}
    url = "/v1/chat/completions"

    def ask(key: str, session_id: str, *, header: bool = True):  # type: ignore[no-untyped-def]
        if header:
            return _client(key).post(url, body, format="json", HTTP_X_RAGSITE_SESSION=session_id)
        return _client(key).post(url, {**body, "user": f"session:{session_id}"}, format="json")

    assert _error(ask(raw, "not-a-uuid"), 400)["param"] == "session"
    assert _error(ask(raw, "12", header=False), 400)["param"] == "session"
    for key, named in ((other_raw, session.public_id), (raw, foreign.public_id), (raw, uuid.uuid4())):
        error = _error(ask(key, str(named)), 404)
        assert (error["code"], error["param"]) == ("session_not_found", "session")
        assert _error(ask(key, str(named), header=False), 404)
    AgentSession.objects.filter(pk=session.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    gone = _error(ask(raw, str(session.public_id)), 410)
    assert gone["code"] == "session_expired" and "expired" in gone["message"]
