"""The chat model in its own process, with real processes: gunicorn, `manage.py llm_serve` and llama.cpp's server.

- the model process SIGKILLed mid-answer: the stream ends with an error event saying so, a JSON answer in the
  meantime gets 503 + Retry-After, retrieves in flight all succeed, and the next answer works after the restart;
- a model that keeps crashing gives way: answers become extractive and say why; the health endpoint shows it;
- `RAG_LLM_URL` pointing at a plain llama.cpp server started here: answers and enrichment with citations, and
  this process never maps a model file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import (
    ROOT,
    environment,
    free_port,
    manage,
    model_state,
    start_gunicorn,
    start_model_server,
    stop,
    wait_for_model,
)

pytestmark = pytest.mark.slow

HANDBOOK = {
    "warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n"
    "Claims need the original receipt and the serial number.\n",
    "returns.md": "# Returns\n\nReturns are accepted within thirty days of purchase.\n",
}
SETUP = """
from pathlib import Path
from knowledge.ingest import pipeline
from tenants.services import api_key_issue, tenant_create
tenant = tenant_create(slug="acme", name="Acme")
source = pipeline.folder_source_get_or_create(tenant=tenant, name="handbook", path=Path("{folder}"))
pipeline.sync_folder(source=source, root=Path("{folder}"))
print(api_key_issue(tenant=tenant, scope="read")[1])
"""
LONG_QUESTION = "Describe the warranty in detail: how long it lasts, what a claim needs, and how returns work."


@pytest.fixture(scope="module")
def web(tmp_path_factory) -> Iterator[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """gunicorn on a tenant with a handbook; its chat model comes from whatever supervisor writes `runtime`."""
    data = tmp_path_factory.mktemp("web")
    folder = data / "handbook"
    folder.mkdir()
    for name, text in HANDBOOK.items():
        (folder / name).write_text(text)
    runtime = data / "llm"
    env = environment(data, RAG_LLM_RUNTIME_DIR=str(runtime), RAG_API_RATE="100000/min")
    assert manage(env, "migrate", "-v0").returncode == 0
    setup = manage(env, "shell", "-c", SETUP.replace("{folder}", str(folder)))
    assert setup.returncode == 0, setup.stderr
    log = (data / "server.log").open("w")
    server = start_gunicorn(env, log)
    try:
        yield {"base": f"http://127.0.0.1:{env['PORT']}", "key": setup.stdout.split()[-1], "runtime": runtime}
    finally:
        stop(server)
        log.close()


@pytest.fixture
def supervisor(web, settings) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    from inference.packaged import QWEN_0_5B

    runtime = web["runtime"]
    (runtime / "state.json").unlink(missing_ok=True)
    process = start_model_server(runtime, [str(QWEN_0_5B.target())], RAG_LLM_MAX_CRASHES="2")
    try:
        wait_for_model(runtime)
        yield runtime
    finally:
        stop(process)


def _post(web: dict[str, Any], path: str, body: dict[str, Any], accept: str = "application/json"):  # type: ignore[no-untyped-def]
    request = urllib.request.Request(
        web["base"] + path, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Api-Key {web['key']}", "Content-Type": "application/json", "Accept": accept},
    )  # fmt: skip
    try:
        return urllib.request.urlopen(request, timeout=600)
    except urllib.error.HTTPError as error:
        return error


def _events(response) -> Iterator[tuple[str, dict[str, Any]]]:  # type: ignore[no-untyped-def]
    name = ""
    for raw in response:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))


class Retrievals:
    """Clients retrieving in a loop while something else happens; every status they got."""

    def __init__(self, web: dict[str, Any], clients: int = 3) -> None:
        self.web, self.statuses, self.stopping = web, [], threading.Event()
        self.threads = [threading.Thread(target=self.run) for _ in range(clients)]

    def run(self) -> None:
        while not self.stopping.is_set():
            response = _post(self.web, "/api/v1/tenants/acme/retrieve/", {"query": "returns", "top_k": 3})
            hits = json.loads(response.read()).get("hits") if response.status == 200 else None
            self.statuses.append(response.status if hits else f"{response.status} without hits")

    def __enter__(self) -> Retrievals:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join()


def test_a_model_process_killed_mid_answer_is_an_error_event_and_the_next_answer_works(web, supervisor):
    with Retrievals(web) as retrievals:
        response = _post(web, "/api/v1/tenants/acme/answer/", {"question": LONG_QUESTION, "stream": True},
                         accept="text/event-stream")  # fmt: skip
        assert response.status == 200
        names, killed_at, last = [], None, {}
        for name, data in _events(response):
            names.append(name)
            last = data
            if name == "sentence" and killed_at is None:  # the model has written one sentence and goes on
                os.kill(model_state(supervisor)["pid"], signal.SIGKILL)  # the model process, mid-answer
                killed_at = time.monotonic()
                health = json.loads(urllib.request.urlopen(web["base"] + "/healthz", timeout=10).read())
                assert health["chat_model"]["state"] != "ready"  # at once, not when the supervisor notices
        ended_after = time.monotonic() - killed_at
        # Meanwhile: a JSON answer is told to come back, with a wait, instead of hanging or failing with 500.
        meanwhile = _post(web, "/api/v1/tenants/acme/answer/", {"question": "How long is the warranty?"})
        assert meanwhile.status == 503 and int(meanwhile.headers["Retry-After"]) >= 1
        assert "chat model" in json.loads(meanwhile.read())["detail"].lower()
        state = wait_for_model(supervisor, restarts=1)
    assert names[0] == "sources" and "sentence" in names and names[-1] == "error" and "done" not in names
    assert "stopped in the middle of the answer" in last["detail"] and last["retry_after"] >= 1
    assert ended_after < 60  # ended, rather than waiting for a timeout (RAG_LLM_TIMEOUT_S is 300 s)
    assert retrievals.statuses and set(retrievals.statuses) == {200}  # retrieval never noticed
    assert state["last_exit"].startswith("killed by SIGKILL while serving")
    after = _post(web, "/api/v1/tenants/acme/answer/", {"question": "How long is the warranty?"})
    body = json.loads(after.read())
    assert after.status == 200 and body["generated"] and body["status"] == "answered"
    assert body["citations"][0]["document_key"] == "warranty.md"
    health = json.loads(urllib.request.urlopen(web["base"] + "/healthz", timeout=10).read())
    assert health["status"] == "ok" and health["chat_model"]["state"] == "ready"
    assert health["chat_model"]["restarts"] == 1


def test_a_model_that_keeps_crashing_gives_way_and_answers_say_why(web, supervisor):
    for crash in (1, 2):  # RAG_LLM_MAX_CRASHES=2 for this supervisor
        os.kill(wait_for_model(supervisor, restarts=crash - 1)["pid"], signal.SIGKILL)
    state = wait_for_model(supervisor, ("failed",))
    assert "crashed 2 times (killed by SIGKILL)" in state["failures"][0]
    response = _post(web, "/api/v1/tenants/acme/answer/", {"question": "How long is the warranty?"})
    body = json.loads(response.read())
    assert response.status == 200 and body["generated"] is False and body["status"] == "extractive"
    assert "crashed 2 times" in body["reason"] and body["citations"][0]["document_key"] == "warranty.md"
    health = json.loads(urllib.request.urlopen(web["base"] + "/healthz", timeout=10).read())
    assert health["status"] == "ok" and health["chat_model"]["state"] == "failed"
    assert set(health["chat_model"]) <= {"state", "model", "restarts", "since", "remote"}  # no paths, no key


@pytest.fixture
def plain_llama_server(tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """llama.cpp's own server, started the way an operator would, outside the product."""
    from inference.packaged import QWEN_0_5B

    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(QWEN_0_5B.target()), "--host", "127.0.0.1",
               "--port", str(port), "--model_alias", "qwen-small", "--n_ctx", "4096", "--n_threads", "2",
               "--interrupt_requests", "false", "--api_key", "operator-key"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DJANGO_", "PORT"))}
    log = (tmp_path / "llama.log").open("w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=2).read()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "llama.log").read_text()
            time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(process)
        log.close()


def _mapped_model_files() -> list[str]:
    maps = Path(f"/proc/{os.getpid()}/maps").read_text()
    return sorted({line.split()[-1] for line in maps.splitlines() if line.endswith(".gguf")})


def test_rag_llm_url_answers_and_enriches_through_any_openai_compatible_server(plain_llama_server, settings, tmp_path,
                                                                                tenant_a):  # fmt: skip
    from rest_framework.test import APIClient

    from knowledge.ingest.enrichment import EnrichmentRequest, enrich
    from tenants.services import api_key_issue
    from tests.factories import make_folder_source

    settings.RAG_LLM_URL, settings.RAG_LLM_MODEL = plain_llama_server, "qwen-small"
    settings.RAG_LLM_API_KEY, settings.RAG_ENRICH_TIMEOUT_S = "operator-key", 3600
    make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=HANDBOOK)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    response = client.post("/api/v1/tenants/acme/answer/", {"question": "How long is the warranty?"}, format="json")
    body = response.json()
    assert response.status_code == 200 and body["generated"] and body["model"] == "qwen-small"
    assert body["status"] == "answered" and body["citations"][0]["document_key"] == "warranty.md"
    # Enrichment goes to the same server (its JSON mode: llama.cpp takes a schema, not OpenAI's json_schema).
    record = enrich(request=EnrichmentRequest(model_path="", model_name="remote", directives="extract the warranty"),
                    title="warranty.md", text=HANDBOOK["warranty.md"])  # fmt: skip
    assert record["status"] == "ok" and record["summary"], record
    health = client.get("/healthz").json()
    assert health["chat_model"] == {"state": "ready", "model": "qwen-small", "remote": True}
    assert _mapped_model_files() == []  # the product loaded no model file: the server did
    settings.RAG_LLM_API_KEY = "wrong-key"  # a misconfigured key is a clear 503, not a hang or a 500
    refused = client.post("/api/v1/tenants/acme/answer/", {"question": "How long is the warranty?"}, format="json")
    assert refused.status_code == 503 and "answered 401" in refused.json()["detail"]
