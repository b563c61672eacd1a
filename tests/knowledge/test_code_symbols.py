"""Code retrieval that knows definitions: the symbol index (what each code chunk defines, from a real parser), the
definition signal (a name of the question puts its defining chunk first, inside the vector query), file cards (a
file's docstring and definitions rank it, and expand to its best chunk), tests below the code they test.
Real files, the real pipeline, embedder and vector store."""

from __future__ import annotations

import pytest

from knowledge.index import indexer
from knowledge.ingest.symbols import file_symbols
from knowledge.models import Chunk, Document
from knowledge.search.retrieval import retrieve
from knowledge.services import document_set_access
from tenants.principals import Viewer
from tenants.services import group_create
from tests.factories import make_folder_source

CONFIG = '''"""Connection settings shared by every client."""

import ssl

DEFAULT_POOL_SIZE = 10
DEFAULT_RETRIES = 3


class Limits:
    """How many connections a client may open."""

    max_idle = 5

    def __init__(self, max_connections=DEFAULT_POOL_SIZE, keepalive=20):
        self.max_connections = max_connections
        self.keepalive = keepalive
'''
CLIENT = '''"""The client."""

from .config import DEFAULT_POOL_SIZE, DEFAULT_RETRIES, Limits


class Client:
    def __init__(self):
        # DEFAULT_POOL_SIZE connections at most, DEFAULT_POOL_SIZE kept; DEFAULT_RETRIES attempts
        self.limits = Limits(DEFAULT_POOL_SIZE)
        self.retries = DEFAULT_RETRIES
        self.pool = [None] * DEFAULT_POOL_SIZE

    def follow(self, response):
        """Send the request again at the location the server gave."""
        method = response.request.method
        if response.status == 303 and method != "HEAD":
            method = "GET"
        return method
'''
TESTS = """from pkg.client import Client
from pkg.config import DEFAULT_POOL_SIZE


def test_pool_size_default():
    assert len(Client().pool) == DEFAULT_POOL_SIZE  # DEFAULT_POOL_SIZE DEFAULT_POOL_SIZE


def test_follow_see_other_becomes_get():
    assert Client().follow(make_response(303, "POST")) == "GET"
"""
JS = """// Routing helpers
export const DEFAULT_PORT = 3000;

/** Start listening on the port the caller gives, else DEFAULT_PORT. */
export function listen(app, port = DEFAULT_PORT) {
  return app.listen(port);
}

export class Router {
  route(path) { return path; }
}
"""


@pytest.fixture
def code(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    source = make_folder_source(
        tenant=tenant_a, root=tmp_path / "pkg", name="pkg",
        files={"pkg/config.py": CONFIG, "pkg/client.py": CLIENT, "tests/test_client.py": TESTS, "web/app.js": JS},
    )  # fmt: skip
    indexer.drain()
    return source


def _keys(hits) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.chunk.document.document_key for h in hits]


def test_the_parser_finds_every_kind_of_definition():
    python = file_symbols(CONFIG, "python")
    assert python is not None
    kinds = {s.qualname: s.kind for s in python.symbols}
    assert kinds["DEFAULT_POOL_SIZE"] == "constant" and kinds["Limits"] == "class"
    assert kinds["Limits.max_idle"] == "attribute" and kinds["Limits.__init__"] == "method"
    assert kinds["Limits.__init__.keepalive"] == "parameter"  # a default argument is a definition too
    assert python.docstring == "Connection settings shared by every client."
    javascript = file_symbols(JS, "javascript")
    assert javascript is not None
    assert {s.qualname for s in javascript.symbols} >= {"DEFAULT_PORT", "listen", "Router", "Router.route"}


def test_a_named_constant_puts_its_definition_first_above_every_use(code, tenant_a):  # type: ignore[no-untyped-def]
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="What is DEFAULT_POOL_SIZE?", top_k=5)
    assert hits[0].chunk.document.document_key == "pkg/config.py"
    assert "DEFAULT_POOL_SIZE = 10" in hits[0].text and hits[0].signals["defines"] == "DEFAULT_POOL_SIZE"
    assert "defines" not in hits[1].signals  # the uses rank below, without the signal
    qualified = retrieve(viewer=Viewer.everything(tenant_a), query="Where is `Limits.max_idle` set?", top_k=3)
    assert qualified[0].chunk.document.document_key == "pkg/config.py"
    js = retrieve(viewer=Viewer.everything(tenant_a), query="what port does DEFAULT_PORT give", top_k=3)
    assert js[0].chunk.document.document_key == "web/app.js"


def test_each_code_file_has_a_card_that_ranks_it_and_is_never_returned(code, tenant_a):  # type: ignore[no-untyped-def]
    card = Chunk.objects.get(document__document_key="pkg/config.py", mode="card")
    assert "Connection settings shared by every client." in card.text
    assert "- DEFAULT_POOL_SIZE = 10" in card.text and "class Limits: How many connections" in card.text
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="connection settings shared by clients", top_k=8)
    assert hits and all(h.chunk.mode != "card" for h in hits)
    assert "pkg/config.py" in _keys(hits)[:2]


def test_a_test_that_only_calls_the_code_ranks_below_it(code, tenant_a):  # type: ignore[no-untyped-def]
    question = "which code turns a 303 answer to a POST into a GET?"
    hits = retrieve(viewer=Viewer.everything(tenant_a), query=question, top_k=5)
    assert _keys(hits).index("pkg/client.py") < _keys(hits).index("tests/test_client.py")
    asked = retrieve(viewer=Viewer.everything(tenant_a), query="which test checks that a 303 becomes a GET?", top_k=5)
    assert asked[0].chunk.document.document_key == "tests/test_client.py"


def test_a_definition_the_viewer_may_not_see_is_never_found(code, tenant_a):  # type: ignore[no-untyped-def]
    group_create(tenant=tenant_a, name="core")
    document_set_access(tenant=tenant_a, document=Document.objects.get(document_key="pkg/config.py"),
                        access=["group:core"])  # fmt: skip
    indexer.drain()
    viewer = Viewer(tenant=tenant_a, principals=frozenset({"tenant"}))
    hits = retrieve(viewer=viewer, query="What is DEFAULT_POOL_SIZE?", top_k=5)
    assert "pkg/config.py" not in _keys(hits) and hits  # the uses it may see are still found


def test_a_name_written_with_capitals_means_that_case(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    make_folder_source(tenant=tenant_a, root=tmp_path / "lib", files={
        "lib/errors.py": '"""Errors."""\n\nSCHEMA = "_schema"  # the key of errors about the whole input\n',
        "lib/schema.py": '"""Schemas."""\n\n\nclass Schema:\n    """A schema: fields, and how to load them."""\n\n'
                         '    def load(self, data):\n        return data\n',
    })  # fmt: skip
    indexer.drain()
    upper = retrieve(viewer=Viewer.everything(tenant_a), query="Where is the SCHEMA key defined?", top_k=3)
    assert upper[0].chunk.document.document_key == "lib/errors.py" and upper[0].signals["defines"] == "SCHEMA"
    lower = retrieve(viewer=Viewer.everything(tenant_a), query="where is `schema.load`", top_k=3)
    assert lower[0].chunk.document.document_key == "lib/schema.py"


def test_code_indexed_before_symbols_is_read_again_by_the_next_sync(code, tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    from knowledge.ingest import pipeline
    from knowledge.models import DocumentVersion

    config = Document.objects.get(document_key="pkg/config.py")
    # As an index built before symbols and cards: no card, no names, indexing version 2.
    Chunk.objects.filter(document=config, mode="card").delete()
    Chunk.objects.filter(document=config).update(defines=[])
    DocumentVersion.objects.filter(document=config).update(indexing_version=2)
    job = pipeline.sync_folder(source=code, root=tmp_path / "pkg")
    indexer.drain()
    assert job.updated == 1 and job.unchanged == 3  # only the file indexed before; the prose and others untouched
    current = Document.objects.get(pk=config.pk)
    assert current.version == 2 and Chunk.objects.filter(document_version__document=current, mode="card",
                                                          document_version__version=2).exists()  # fmt: skip
    again = pipeline.sync_folder(source=code, root=tmp_path / "pkg")
    assert again.updated == 0 and again.unchanged == 4
