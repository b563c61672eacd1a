"""Answers with the real packaged GGUF (Gemma 3 270M base): streaming, grounding, fallbacks, extractive mode."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from chat import services
from chat.llm import get_gateway
from chat.models import Assistant
from tenants.services import api_key_issue
from tests.factories import make_folder_source

pytestmark = pytest.mark.slow


@pytest.fixture
def handbook(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    files = {
        "warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n"
        "Claims need the original receipt and the serial number.\n",
        "returns.md": "# Returns\n\nReturns are accepted within thirty days of purchase.\n",
    }
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=files)
    return source


@pytest.fixture
def key_a(tenant_a) -> str:  # type: ignore[no-untyped-def]
    return api_key_issue(tenant=tenant_a)[1]


def _events(response) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    body = b"".join(response.streaming_content).decode()
    events = []
    for block in body.strip().split("\n\n"):
        name = block.split("\n")[0].removeprefix("event: ")
        data = json.loads(block.split("\n", 1)[1].removeprefix("data: "))
        events.append((name, data))
    return events


def test_a_streamed_answer_arrives_in_several_events_and_ends_with_citations(handbook, key_a):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key_a}")
    response = client.post(
        "/api/v1/tenants/acme/answer/", {"question": "How long is the warranty?", "stream": True}, format="json"
    )
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    events = _events(response)
    tokens = [data["delta"] for name, data in events if name == "token"]
    assert len(tokens) >= 3
    name, final = events[-1]
    assert name == "done" and [n for n, _ in events].count("done") == 1
    assert final["generated"] is True and final["model"] == "gemma-3-270m-q4_k_m.gguf"
    assert final["status"] == "answered" and final["ttft_ms"] > 0
    assert final["hits"][0]["document_key"] == "warranty.md"
    assert isinstance(final["citations"], list)
    # Every citation left in the answer points at an excerpt that was in the prompt.
    for citation in final["citations"]:
        assert f"[{citation['n']}]" in final["answer"] and citation["n"] <= len(final["hits"])
    # The final answer is the streamed text, less any [n] marker that pointed at no excerpt.
    strip = lambda text: " ".join(re.sub(r"\[[\d, ]+\]", "", text).replace(" .", ".").split())  # noqa: E731
    assert strip(final["answer"]) == strip("".join(tokens))


def test_the_json_answer_has_the_documented_shape(handbook, key_a):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key_a}")
    response = client.post("/api/v1/tenants/acme/answer/", {"question": "Can I return a product?"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert set(body) >= {"answer", "generated", "model", "citations", "hits"}
    assert body["answer"].strip() and body["hits"][0]["document_key"] == "returns.md"


def test_a_question_the_corpus_cannot_answer_cites_nothing_and_is_flagged(handbook, tenant_a):
    result = services.answer_question(
        tenant=tenant_a, question="What is the capital of Mongolia?", options=services.AnswerSettings()
    )
    assert result.status == "no_evidence" and result.citations == []
    assert result.generated is True  # the prompt still went to the model, with "No matching chunks were found."


def test_the_fallback_chain_survives_a_corrupt_gguf(handbook, tenant_a, settings, tmp_path, caplog):
    from ragsite.packaged_models import packaged_llm_path

    corrupt = tmp_path / "broken.gguf"
    corrupt.write_bytes(packaged_llm_path().read_bytes()[:1_000_000])  # a truncated, unloadable model
    settings.RAG_LLM_MODEL_PATH = str(corrupt)
    settings.RAG_LLM_FALLBACK_PATHS = [str(tmp_path / "missing.gguf"), str(packaged_llm_path())]
    result = services.answer_question(
        tenant=tenant_a, question="How long is the warranty?", options=services.AnswerSettings()
    )
    assert result.generated and result.model == "gemma-3-270m-q4_k_m.gguf"
    failures = get_gateway().failures
    assert "broken.gguf" in failures[0] and "missing.gguf: no such file" in failures[1]
    assert "failed to load" in caplog.text


def test_with_no_loadable_model_the_answer_is_extractive(handbook, tenant_a, settings, tmp_path):
    settings.RAG_LLM_MODEL_PATH = str(tmp_path / "nothing-here.gguf")
    settings.RAG_LLM_FALLBACK_PATHS = []
    result = services.answer_question(
        tenant=tenant_a, question="How long is the warranty?", options=services.AnswerSettings()
    )
    assert result.generated is False and result.status == "extractive"
    assert "no such file" in result.reason
    assert result.citations[0]["document_key"] == "warranty.md" and "[1]" in result.answer
    assert "two year warranty" in result.answer


def test_concurrent_generations_queue_on_one_model_instead_of_crashing():
    from chat.prompting import PromptExcerpt, build_grounded_history

    model = get_gateway().model()
    prompt = build_grounded_history("warranty?", [PromptExcerpt("Two year warranty.", "w.md, lines 1-1")])
    outputs, errors = [], []

    def generate() -> None:
        try:
            outputs.append("".join(model.stream(prompt.messages, max_tokens=16, temperature=0.0, top_p=1.0)))
        except Exception as exc:  # pragma: no cover - the assertion below reports it
            errors.append(exc)

    threads = [threading.Thread(target=generate) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(outputs) == 3
    assert len(set(outputs)) == 1  # greedy decoding, serialised: three identical, uncorrupted answers


def test_an_assistant_bundles_persona_scope_and_sampling(handbook, tenant_a, key_a):
    Assistant.objects.create(tenant=tenant_a, name="support-bot", persona="Answer as the support team.", top_k=1,
                             temperature=0.0, max_tokens=32, tags=["nothing-has-this-tag"])  # fmt: skip
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key_a}")
    scoped = client.post(
        "/api/v1/tenants/acme/answer/", {"question": "warranty?", "assistant": "support-bot"}, format="json"
    )
    assert scoped.status_code == 200 and scoped.json()["hits"] == [] and scoped.json()["status"] == "no_evidence"
    missing = client.post(
        "/api/v1/tenants/acme/answer/", {"question": "warranty?", "assistant": "nobody"}, format="json"
    )
    assert missing.status_code == 400 and "assistant" in missing.json()


def test_answer_is_tenant_scoped(handbook, tenant_b):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_b)[1]}")
    assert client.post("/api/v1/tenants/acme/answer/", {"question": "warranty?"}, format="json").status_code == 404
    own = client.post("/api/v1/tenants/globex/answer/", {"question": "How long is the warranty?"}, format="json")
    assert own.status_code == 200 and own.json()["hits"] == [] and own.json()["citations"] == []


def test_the_packaged_model_file_is_the_assembled_gguf():
    from ragsite.packaged_models import packaged_llm_path

    assert Path(packaged_llm_path()).read_bytes()[:4] == b"GGUF"


def test_an_assistant_can_name_a_catalog_model_and_falls_back_when_it_is_broken(handbook, tenant_a, tmp_path):
    from knowledge.models import ModelEntry

    broken = ModelEntry.objects.create(name="broken-chat", kind=ModelEntry.Kind.CHAT, path=str(tmp_path / "x.gguf"))
    assistant = Assistant.objects.create(tenant=tenant_a, name="catalog-bot", model=broken, max_tokens=16)
    options = services.AnswerSettings.from_assistant(assistant)
    assert options.model_paths[0] == str(tmp_path / "x.gguf")
    result = services.answer_question(tenant=tenant_a, question="warranty?", options=options)
    assert result.generated and result.model == "gemma-3-270m-q4_k_m.gguf"  # the default chain took over
