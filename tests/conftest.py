from __future__ import annotations

import os

import pytest
from django.test import Client

from tenants.models import Membership, Tenant
from tests.factories import make_member, make_tenant

# The slow lane: tests that start a process (Chromium, gunicorn, the model server, a worker, the installer) or load a
# packaged model; scripts/test.sh runs the others first (`-m "not process"`), then these (`-m process`).
PROCESS_FIXTURES = {
    "browser",
    "chat_model",
    "model_server",
    "oidc_provider",
    "slapd",
    "saml_idp",
    "dokuwiki",
    "redmine",
    "dovecot",
}
PROCESS_MODULES = {"test_answer", "test_backup", "test_clean_stop", "test_faults", "test_install_script",
                   "test_model_process", "test_shared_store", "test_setup_commands", "test_mcp"}  # fmt: skip


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Each test's lane (`process` or not); and in the production-configuration run, tests of the embedded store's
    own rules (one owning process, its files on disk) have no counterpart: a Qdrant server has neither."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if (module in PROCESS_MODULES or PROCESS_FIXTURES & set(getattr(item, "fixturenames", ()))
                or item.get_closest_marker("slow")):  # fmt: skip
            item.add_marker(pytest.mark.process)
    if not os.environ.get("RAG_TEST_QDRANT_URL"):
        return
    reason = pytest.mark.skip(reason="about the embedded Qdrant Edge store; this run uses the Qdrant-server path")
    for item in items:
        if item.get_closest_marker("embedded_store"):
            item.add_marker(reason)


@pytest.fixture
def tenant_a(db) -> Tenant:  # type: ignore[no-untyped-def]
    return make_tenant(slug="acme", name="Acme")


@pytest.fixture
def tenant_b(db) -> Tenant:  # type: ignore[no-untyped-def]
    return make_tenant(slug="globex", name="Globex")


@pytest.fixture
def admin_a(tenant_a: Tenant):  # type: ignore[no-untyped-def]
    return make_member(tenant_a, role=Membership.Role.ADMIN, username="alice")


@pytest.fixture
def client_a(client: Client, admin_a) -> Client:  # type: ignore[no-untyped-def]
    client.force_login(admin_a)
    return client


@pytest.fixture
def company(tenant_a, admin_a, tmp_path, settings):  # type: ignore[no-untyped-def]
    """The access tests' company (tests/company.py): an open handbook, hr-files open to group:hr, members and keys."""
    from tests.company import build_company

    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    return build_company(tenant_a, admin_a, tmp_path)


@pytest.fixture(autouse=True)
def fresh_cache():  # type: ignore[no-untyped-def]
    """Throttle counters (API rate, wrong-key guesses) start from zero in every test."""
    from django.core.cache import cache

    from tenants import counters

    cache.clear()
    counters.reset()
    yield
    cache.clear()
    counters.reset()


@pytest.fixture(autouse=True)
def vector_store(settings, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A fresh store per test: embedded Qdrant Edge in a temp dir, or (RAG_TEST_QDRANT_URL=:memory:) a fresh
    in-process Qdrant server API through qdrant-client."""
    from knowledge.index.vectorstore import get_store, reset_store

    settings.RAG_QDRANT_PATH = tmp_path_factory.mktemp("qdrant")
    # The production-configuration run (scripts/test.sh) goes through the Qdrant-server code path instead.
    settings.QDRANT_URL = os.environ.get("RAG_TEST_QDRANT_URL") or None
    reset_store()
    yield get_store
    reset_store()


@pytest.fixture(scope="session")
def model_server(tmp_path_factory):  # type: ignore[no-untyped-def]
    """The real packaged Qwen2.5-Coder 0.5B Instruct (the 1.5B default is too slow for CI), in its own process:
    `manage.py llm_serve` runs llama.cpp's server for the whole session. The test process never maps it."""
    from inference.packaged import QWEN_0_5B, assemble_gguf
    from tests.servers import start_model_server, stop, wait_for_model

    models = tmp_path_factory.getbasetemp() / "models"
    runtime = tmp_path_factory.mktemp("llm")
    process = start_model_server(runtime, [str(assemble_gguf(QWEN_0_5B, models / QWEN_0_5B.filename))])
    try:
        wait_for_model(runtime)
        yield runtime
    finally:
        stop(process)


@pytest.fixture(autouse=True)
def fresh_chat_models(settings, tmp_path_factory, tmp_path):  # type: ignore[no-untyped-def]
    """No chat model server unless a test asks for one (`chat_model`); gateways are per test."""
    from inference.llm import reset_gateways
    from inference.packaged import QWEN_0_5B, assemble_gguf

    settings.RAG_MODELS_DIR = tmp_path_factory.getbasetemp() / "models"
    settings.RAG_LLM_MODEL_PATH = str(assemble_gguf(QWEN_0_5B))
    settings.RAG_LLM_RUNTIME_DIR = tmp_path / "no-model-server"
    settings.RAG_LLM_URL = ""
    reset_gateways()
    yield
    reset_gateways()


@pytest.fixture
def chat_model(settings, model_server):  # type: ignore[no-untyped-def]
    """Answers in this test come from the session's model server."""
    settings.RAG_LLM_RUNTIME_DIR = model_server
    return model_server


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture
def browser():  # type: ignore[no-untyped-def]
    """Debian's Chromium driven by Playwright (its own browser download does not work offline)."""
    import os

    from playwright.sync_api import sync_playwright

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop here
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()
