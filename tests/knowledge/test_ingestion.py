"""End to end ingestion over a fixture tree: exact outcome for every kind of file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured

from inference.embedders import get_embedder
from knowledge.index import indexer
from knowledge.index.vectorstore import Scope, get_store
from knowledge.ingest import lookahead, pipeline, prepare, sync_run
from knowledge.models import Chunk, Document, DocumentVersion, IngestJob, Status
from knowledge.options import IngestOptions
from knowledge.search.retrieval import retrieve
from tenants.principals import Viewer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def build_tree(root: Path) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "install.md").write_text(
        "# Install\n\nRun the installer.\n\n## Linux\n\nUse `apt install acme-agent` and set the X-Api-Key header.\n"
    )
    (root / "docs" / "guide.rst").write_text("User Guide\n==========\n\nThe guide explains dashboards.\n")
    (root / "docs" / "page.html").write_text(
        "<html><head><title>Pricing page</title><style>.x{color:red}</style><script>var secret=1</script></head>"
        "<body><nav>Home | About</nav><h1>Pricing</h1><p>The Pro plan costs 20 euros a month.</p></body></html>"
    )
    shutil.copy(FIXTURES / "handbook.pdf", root / "docs" / "handbook.pdf")
    shutil.copy(FIXTURES / "scanned.pdf", root / "docs" / "scanned.pdf")
    (root / "docs" / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >>\nthis is not a real pdf")
    (root / "blob.dat").write_bytes(bytes(range(256)) * 4)
    (root / "latin1.txt").write_bytes("Configuración del año".encode("latin-1"))
    (root / "big.txt").write_text("x" * 2_000_000)
    (root / ".gitignore").write_text("secret.md\nbuild/\n")
    (root / "secret.md").write_text("# Secret\n\nnever index me\n")
    (root / "src" / "app").mkdir(parents=True)
    (root / "src" / "app" / "server.py").write_text(
        "import os\n\n\ndef get_current_object(request):\n    return request.user\n\n\nclass Router:\n"
        "    def route(self, path):\n        return path\n"
    )
    (root / "src" / "app" / "client.js").write_text(
        "// fetch helper\nexport function fetchItems(apiKey) {\n"
        "  return fetch('/items', {headers: {'X-Api-Key': apiKey}});\n}\n"
    )
    (root / "src" / "node_modules" / "dep").mkdir(parents=True)
    (root / "src" / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")
    (root / "scripts").mkdir()
    (root / "scripts" / "deploy").write_text("#!/usr/bin/env bash\necho deploying\n")
    (root / "package-lock.json").write_text("{}")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return build_tree(tmp_path / "corpus")


def sync(tenant, root: Path, name: str = "corpus") -> IngestJob:  # type: ignore[no-untyped-def]
    source = pipeline.folder_source_get_or_create(tenant=tenant, name=name, path=root)
    return pipeline.sync_folder(source=source, root=root)


def test_a_fixture_tree_ingests_with_the_exact_outcome_for_each_file(tenant_a, tree):
    job = sync(tenant_a, tree)
    documents = {d.display_key: d for d in Document.objects.for_tenant(tenant_a)}
    assert set(documents) == {
        "docs/install.md", "docs/guide.rst", "docs/page.html", "docs/handbook.pdf", "src/app/server.py",
        "src/app/client.js", "scripts/deploy",
    }  # fmt: skip
    assert all(d.status == Status.ACTIVE and d.version == 1 for d in documents.values())
    errors = {e["key"]: e for e in job.errors}
    assert errors["docs/scanned.pdf"]["kind"] == "needs_ocr" and "OCR" in errors["docs/scanned.pdf"]["error"]
    assert "damaged or not a PDF" in errors["docs/corrupt.pdf"]["error"]
    skips = {s["key"]: s["reason"] for s in job.skips}
    assert skips["blob.dat"] == "binary file"
    assert skips["latin1.txt"] == "not valid UTF-8 text"
    assert skips["big.txt"].startswith("larger than the 1024 KiB limit")
    assert skips["secret.md"] == "ignored by .gitignore"
    assert skips["src/node_modules/"] == "excluded folder"
    assert skips["package-lock.json"] == "lock file"
    assert (job.added, job.failed, job.state) == (7, 2, IngestJob.State.PARTIAL)

    assert documents["docs/page.html"].title == "Pricing page"
    html_text = " ".join(documents["docs/page.html"].chunks.values_list("text", flat=True))
    assert "20 euros" in html_text and "secret" not in html_text and "color" not in html_text
    assert documents["docs/handbook.pdf"].title == "Warranty Handbook"
    assert list(documents["docs/handbook.pdf"].chunks.values_list("page", flat=True)) != [None]
    assert {d.mode for k, d in documents.items() if k.startswith(("src/", "scripts/"))} == {"code"}
    assert documents["docs/install.md"].mode == "documental"

    server = documents["src/app/server.py"].chunks.get(mode="code")
    assert (server.line_start, server.line_end) == (1, 10)
    card = documents["src/app/server.py"].chunks.get(mode="card")  # the file's card: path and definitions
    assert card.text.startswith("File src/app/server.py") and card.line_start is None
    linux = Chunk.objects.get(document=documents["docs/install.md"], text__contains="apt install")
    assert linux.heading.startswith("Install")


def test_pdf_chunks_carry_their_page_numbers(tenant_a, tree):
    sync(tenant_a, tree)
    document = Document.objects.get(document_key="docs/handbook.pdf")
    pages = {c.page for c in document.chunks.all()}
    assert pages <= {1, 2} and 1 in pages
    returns = [hit for hit in retrieve(viewer=Viewer.everything(tenant_a), query="refund of returns", top_k=3)]
    assert returns[0].chunk.document == document


def test_every_chunk_is_stored_in_qdrant_with_its_payload(tenant_a, tree):
    sync(tenant_a, tree)
    identity = get_embedder().identity
    scope = Scope(tenant=str(tenant_a.public_id))
    assert get_store().count(identity, scope) == Chunk.objects.for_tenant(tenant_a).count()
    assert get_store().ids(identity, scope) == set(
        Chunk.objects.for_tenant(tenant_a).values_list("point_id", flat=True)
    )


def test_rerunning_on_an_unchanged_tree_embeds_nothing(tenant_a, tree, monkeypatch):
    sync(tenant_a, tree)
    calls = []
    embedder = get_embedder()
    original = embedder.embed
    monkeypatch.setattr(embedder, "embed", lambda texts: calls.append(len(texts)) or original(texts))
    job = sync(tenant_a, tree)
    assert calls == []
    assert (job.added, job.updated, job.unchanged, job.chunks_done) == (0, 0, 7, 0)


def test_touching_a_file_without_changing_it_embeds_nothing(tenant_a, tree):
    sync(tenant_a, tree)
    path = tree / "docs" / "guide.rst"
    path.write_text(path.read_text())  # new mtime, same content: the hash is the truth
    job = sync(tenant_a, tree)
    assert (job.updated, job.unchanged, job.chunks_done) == (0, 7, 0)


def test_editing_one_file_reembeds_only_it_and_keeps_the_old_version(tenant_a, tree):
    sync(tenant_a, tree)
    (tree / "docs" / "guide.rst").write_text("User Guide\n==========\n\nThe guide now explains reports too.\n")
    job = sync(tenant_a, tree)
    assert (job.updated, job.unchanged, job.added) == (1, 6, 0)
    document = Document.objects.get(document_key="docs/guide.rst")
    assert job.chunks_done == document.chunks.filter(document_version__version=2).count()
    assert document.version == 2
    statuses = dict(document.versions.values_list("version", "status"))
    assert statuses == {1: Status.SUPERSEDED, 2: Status.ACTIVE}
    texts = [hit.chunk.text for hit in retrieve(viewer=Viewer.everything(tenant_a), query="guide explains", top_k=10)]
    assert any("reports" in t for t in texts)
    assert not any("explains dashboards" in t for t in texts)  # the superseded version is not served


def test_a_removed_file_is_retired_and_no_longer_retrieved(tenant_a, tree):
    sync(tenant_a, tree)
    (tree / "docs" / "page.html").unlink()
    job = sync(tenant_a, tree)
    assert job.retired == 1
    document = Document.objects.get(document_key="docs/page.html")
    assert document.status == Status.RETIRED
    assert document.versions.get().status == Status.RETIRED
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="Pro plan costs 20 euros", top_k=10)
    assert document.pk not in {hit.chunk.document_id for hit in hits}


def test_a_job_killed_midway_leaves_no_partial_document_and_a_retry_completes_it(tenant_a, tree, monkeypatch):
    sync(tenant_a, tree)
    (tree / "docs" / "install.md").write_text(
        "# Install\n\n" + "\n\n".join(f"Step {i}: configure module {i}." for i in range(400))
    )
    store = get_store()
    real_upsert = store.upsert
    calls = {"n": 0}

    def dying_upsert(identity, points):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker killed")
        return real_upsert(identity, points)

    monkeypatch.setattr(indexer, "UPSERT_BATCH", 1)  # several batches, so the kill lands midway
    monkeypatch.setattr(store, "upsert", dying_upsert)
    sync(tenant_a, tree)
    document = Document.objects.get(document_key="docs/install.md")
    assert document.version == 1
    assert dict(document.versions.values_list("version", "status")) == {1: Status.ACTIVE, 2: Status.PENDING}
    # Readers still get the complete old version and nothing of the half-stored new one.
    texts = [
        h.chunk.text for h in retrieve(viewer=Viewer.everything(tenant_a), query="configure module step", top_k=20)
    ]
    assert not any("configure module" in t for t in texts)
    assert any(
        "apt install" in h.chunk.text
        for h in retrieve(viewer=Viewer.everything(tenant_a), query="apt install acme-agent", top_k=5)
    )

    monkeypatch.setattr(store, "upsert", real_upsert)
    indexer.drain()  # the retry
    document.refresh_from_db()
    assert document.version == 2
    assert dict(document.versions.values_list("version", "status")) == {
        1: Status.SUPERSEDED,
        2: Status.ACTIVE,
    }
    assert any(
        "configure module" in h.chunk.text
        for h in retrieve(viewer=Viewer.everything(tenant_a), query="configure module step", top_k=5)
    )


def test_drain_activates_pending_versions_in_groups_with_one_flush_each_and_a_bad_one_waits(tenant_a, tmp_path,
                                                                                           monkeypatch):  # fmt: skip
    """Eight pending versions in groups of three: three flushes, not eight. One whose points cannot be stored
    stays pending with the reason while the rest of its group becomes visible; the next drain indexes it."""
    root = tmp_path / "eight"
    root.mkdir()
    for n in range(8):
        (root / f"page-{n}.md").write_text(f"# Page {n}\n\nThe lighthouse number {n} flashes green.\n")
    real_drain = indexer.drain
    monkeypatch.setattr(indexer, "drain", lambda **kwargs: indexer.DrainResult())  # written, not yet indexed
    sync(tenant_a, root, "eight")
    monkeypatch.setattr(indexer, "drain", real_drain)
    assert DocumentVersion.objects.filter(status=Status.PENDING).count() == 8

    store, flushes = get_store(), []
    real_flush, real_store_points = store.flush, indexer.store_version_points
    monkeypatch.setattr(store, "flush", lambda: (flushes.append(1), real_flush()))
    bad = DocumentVersion.objects.get(document__document_key="page-4.md")

    def store_points(version, **kwargs):  # type: ignore[no-untyped-def]
        if version.pk == bad.pk:
            raise RuntimeError("the store refused these points")
        return real_store_points(version, **kwargs)

    monkeypatch.setattr(indexer, "ACTIVATION_GROUP", 3)
    monkeypatch.setattr(indexer, "store_version_points", store_points)
    assert indexer.drain().activated == 7 and len(flushes) == 3
    bad.refresh_from_db()
    assert bad.status == Status.PENDING and "the store refused these points" in bad.error
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="lighthouse flashes green", top_k=10)
    keys = {h.chunk.document.document_key for h in hits}
    assert keys == {f"page-{n}.md" for n in range(8)} - {"page-4.md"}

    monkeypatch.setattr(indexer, "store_version_points", real_store_points)
    assert indexer.drain().activated == 1
    assert (
        retrieve(viewer=Viewer.everything(tenant_a), query="lighthouse number 4 flashes", top_k=1)[
            0
        ].chunk.document.document_key
        == "page-4.md"
    )


def test_one_tenant_never_sees_another_tenants_chunks(tenant_a, tenant_b, tmp_path):
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    root_a.mkdir(), root_b.mkdir()
    (root_a / "handbook.md").write_text("# Alpha\n\nThe alpha handbook describes onboarding.\n")
    (root_b / "payroll.md").write_text("# Alpha\n\nThe alpha payroll lists every salary.\n")
    sync(tenant_a, root_a, "docs")
    sync(tenant_b, root_b, "docs")
    for tenant in (tenant_a, tenant_b):
        hits = retrieve(viewer=Viewer.everything(tenant), query="alpha salary payroll handbook", top_k=10)
        assert hits and {h.chunk.tenant_id for h in hits} == {tenant.pk}
    # Even a scope naming the other tenant's source cannot reach it: the tenant comes from the caller.
    foreign = Scope(tenant=str(tenant_b.public_id), source_ids=["src:globex:folder:docs"])
    assert retrieve(viewer=Viewer.everything(tenant_a), query="salary", top_k=10, scope=foreign) == []


def test_curation_reaches_the_vector_payloads_at_once(tenant_a, tree):
    from knowledge.services import documents_retire, documents_set_critical, rows_add_tag

    sync(tenant_a, tree)
    identity = get_embedder().identity
    tenant = str(tenant_a.public_id)
    guide = Document.objects.filter(document_key="docs/guide.rst")
    documents_set_critical(tenant=tenant_a, documents=guide, critical=True)
    rows_add_tag(tenant=tenant_a, rows=guide, tag_name="Manuals")
    indexer.drain()
    assert get_store().count(identity, Scope(tenant=tenant, critical_only=True)) == guide.get().chunks.count()
    assert get_store().count(identity, Scope(tenant=tenant, tags=["manuals"])) == guide.get().chunks.count()
    documents_retire(tenant=tenant_a, documents=guide)
    indexer.drain()
    assert get_store().count(identity, Scope(tenant=tenant, document_ids=[guide.get().document_id])) == 0


def test_ingest_command_prints_a_summary(tenant_a, tree, capsys):
    from django.core.management import call_command

    call_command("ingest", "acme", str(tree), "--source", "Corpus", "--tags", "docs,v1")
    out = capsys.readouterr().out
    assert "src:acme:folder:corpus: 7 added, 0 updated, 0 unchanged, 0 retired, 7 skipped, 2 failed" in out
    assert set(Document.objects.for_tenant(tenant_a).first().tags.values_list("name", flat=True)) == {
        "docs",
        "v1",
    }
    call_command("index_check", "acme")
    assert "0 missing from the vector store, 0 points without a chunk" in capsys.readouterr().out


def test_ingest_enrich_names_a_catalog_model_and_an_unknown_one_is_refused(tenant_a, tmp_path, settings):
    from django.core.management import CommandError, call_command

    from inference.catalog import catalog_register_packaged

    catalog_register_packaged()
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "lunch.md").write_text("# Lunch\n\nThe canteen serves lunch from 12:00 to 14:00.\n")
    with pytest.raises(CommandError, match="qwen2.5-coder-0.5b-instruct enrichment"):  # it lists the catalog
        call_command("ingest", "acme", str(folder), "--enrich", "gpt-9")
    assert not Document.objects.exists()  # nothing was read with the wrong options
    settings.RAG_LLM_RUNTIME_DIR = str(tmp_path / "no-model-server")  # no model server runs here
    call_command("ingest", "acme", str(folder), "--enrich", "qwen2.5-coder-0.5b-instruct enrichment (packaged)",
                 "--directives", "name the opening hours")  # fmt: skip
    version = Document.objects.get(document_key="lunch.md").versions.get()
    assert version.enrichment["model"] == "qwen2.5-coder-0.5b-instruct enrichment (packaged)"
    assert version.enrichment["directives"] == "name the opening hours"
    assert version.enrichment["status"] == "failed" and version.status == Status.ACTIVE  # indexed all the same


def test_index_check_finds_and_repairs_drift(tenant_a, tree, capsys):
    from django.core.management import CommandError, call_command

    sync(tenant_a, tree)
    identity = get_embedder().identity
    victim = Chunk.objects.for_tenant(tenant_a).first()
    get_store().delete(identity, Scope(tenant=str(tenant_a.public_id), statuses=None, point_ids=[victim.point_id]))
    with pytest.raises(CommandError, match="Drift"):
        call_command("index_check", "acme")
    call_command("index_check", "acme", "--repair")
    capsys.readouterr()
    call_command("index_check", "acme")
    assert "0 missing" in capsys.readouterr().out
    assert DocumentVersion.objects.filter(status=Status.PENDING).count() == 0


def test_a_background_job_syncs_a_folder_and_can_be_retried(tenant_a, tree, django_capture_on_commit_callbacks):
    from knowledge.services import job_retry, source_sync_enqueue

    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="corpus", path=tree)
    with django_capture_on_commit_callbacks(execute=True):
        job = source_sync_enqueue(tenant=tenant_a, source=source, options=IngestOptions(tags=("kb",)), operator=True)
    job.refresh_from_db()
    assert (job.state, job.added, job.documents_done, job.documents_total) == (IngestJob.State.PARTIAL, 7, 9, 9)
    assert job.chunks_done == job.chunks_total > 0 and job.seconds is not None
    with django_capture_on_commit_callbacks(execute=True):
        job_retry(tenant=tenant_a, job=job)
    job.refresh_from_db()
    assert (job.attempts, job.added, job.unchanged) == (2, 0, 7)


def test_a_cancelled_job_stops_between_documents(tenant_a, tree):
    from knowledge.services import job_cancel
    from knowledge.tasks import ingest_job_task

    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="corpus", path=tree)
    job = IngestJob.objects.create(
        tenant=tenant_a, source=source, kind=IngestJob.Kind.FOLDER, params={"path": str(tree), "operator": True}
    )
    job_cancel(tenant=tenant_a, job=job)
    ingest_job_task(job.pk)  # what the worker runs
    job.refresh_from_db()
    assert job.state == IngestJob.State.CANCELLED and job.message == "Cancelled on request."
    assert job.documents_done == 1 < job.documents_total  # it stopped at the first checkpoint
    assert job.added + job.failed == 1  # only the first file was handled
    # Whatever finished before the stop is a complete version the indexer can still activate.
    indexer.drain()
    assert not DocumentVersion.objects.for_tenant(tenant_a).filter(status=Status.PENDING).exists()


def test_the_same_pipeline_works_against_a_qdrant_server_backend(tenant_a, tenant_b, tree, settings):
    from knowledge.index.vectorstore import ClientStore, reset_store

    settings.QDRANT_URL = ":memory:"  # qdrant-client's in-process server API, same calls as a real server
    reset_store()
    assert isinstance(get_store(), ClientStore)
    sync(tenant_a, tree)
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="apt install acme-agent X-Api-Key", top_k=5)
    assert hits[0].chunk.document.document_key == "docs/install.md"
    assert retrieve(viewer=Viewer.everything(tenant_b), query="apt install acme-agent", top_k=5) == []


@pytest.mark.embedded_store
def test_maintenance_commands_explain_when_another_process_owns_the_store(tenant_a, tree, settings):
    from django.core.management import CommandError, call_command

    from knowledge.index.vectorstore import EdgeStore, reset_store

    sync(tenant_a, tree)
    reset_store()
    owner = EdgeStore(settings.RAG_QDRANT_PATH)  # stands for the web server holding the store
    owner.ensure_collection(get_embedder().identity)
    try:
        with pytest.raises(CommandError, match="Stop the web server first"):
            call_command("index_check", "acme")
        # Ingestion still works: it writes SQL and leaves activation to the owner.
        (tree / "docs" / "new.md").write_text("# New\n\nA new page about invoices.\n")
        job = sync(tenant_a, tree)
        assert job.state == IngestJob.State.INDEXING
        assert Document.objects.get(document_key="docs/new.md").versions.get().status == Status.PENDING
    finally:
        owner.close()
    indexer.drain()  # the owner's next pass
    job.refresh_from_db()
    assert job.state == IngestJob.State.PARTIAL  # finished; the two broken PDFs of the tree still fail
    assert Document.objects.get(document_key="docs/new.md").status == Status.ACTIVE


def test_empty_and_blank_files_are_skipped_as_empty_never_failed(tenant_a, tmp_path):
    """Issue 11: `dependency_links.txt` (one newline) was a failure that turned the whole job partial."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "README.md").write_text("# Package\n\nInstall it with pip.\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "dependency_links.txt").write_text("\n")
    (root / "blank.md").write_text("   \n\n\t\n")
    job = sync(tenant_a, root, name="pkg")
    assert job.state == IngestJob.State.SUCCEEDED and job.failed == 0 and job.errors == []
    assert {s["key"]: s["reason"] for s in job.skips} == {
        "empty.txt": "empty", "dependency_links.txt": "empty", "blank.md": "empty",
    }  # fmt: skip
    assert [d.display_key for d in Document.objects.for_tenant(tenant_a)] == ["README.md"]

    (root / "blank.md").write_text("# Notes\n\nNow with text.\n")
    assert sync(tenant_a, root, name="pkg").added == 1
    (root / "blank.md").write_text("\n")  # emptied again: skipped, and its old version is retired
    again = sync(tenant_a, root, name="pkg")
    assert again.retired == 1 and again.state == IngestJob.State.SUCCEEDED
    assert not Document.objects.for_tenant(tenant_a).filter(document_key="blank.md", status=Status.ACTIVE).exists()


def test_a_chunk_spanning_pages_names_the_page_its_matching_text_is_on(tenant_a, tmp_path):
    """Issue 11: a 3-page PDF whose fact is on page 2 came back as one chunk with `page: 1`."""
    from rest_framework.test import APIClient

    from chat.citations import citation_of
    from tenants.services import api_key_issue
    from tests.factories import make_pdf

    root = tmp_path / "manuals"
    root.mkdir()
    (root / "router.pdf").write_bytes(make_pdf([
        ["Router manual", "The router has four network ports and one power socket."],
        ["Resetting", "Hold the reset button for ten seconds to restore the factory settings."],
        ["Support", "Call the helpdesk on weekdays between nine and five."],
    ]))  # fmt: skip
    sync(tenant_a, root, name="manuals")
    chunk = Chunk.objects.get(document__document_key="router.pdf")  # short pages: one chunk holds all three
    assert (chunk.page, chunk.page_end) == (1, 3)

    hit = retrieve(viewer=Viewer.everything(tenant_a), query="How long do I hold the reset button?", top_k=3)[0]
    assert hit.chunk == chunk and hit.page == 2 and "page 2" in hit.label
    assert retrieve(viewer=Viewer.everything(tenant_a), query="When can I call the helpdesk?", top_k=3)[0].page == 3

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    body = client.post("/api/v1/tenants/acme/retrieve/", {"query": "reset button factory settings"}, format="json")
    first = body.json()["hits"][0]
    assert (first["page"], first["page_start"], first["page_end"]) == (2, 1, 3)
    # A citation names the page the cited sentence's support is on, not the chunk's first page.
    assert citation_of(1, hit, "Hold the reset button for ten seconds.")["page"] == 2
    assert citation_of(1, hit, "The router has four network ports.")["page"] == 1


class CountingEmbedder:
    """The real packaged embedder, counting what it is asked to embed."""

    def __init__(self) -> None:
        self.inner, self.texts = get_embedder(), []

    @property
    def identity(self):  # type: ignore[no-untyped-def]
        return self.inner.identity

    def embed(self, texts):  # type: ignore[no-untyped-def]
        return self.inner.embed(texts)

    def embed_for_index(self, texts):  # type: ignore[no-untyped-def]
        self.texts += list(texts)
        return self.inner.embed_for_index(texts)


def test_unchanged_chunks_are_never_embedded_again_across_versions_or_documents(tenant_a, tenant_b, tmp_path,
                                                                               monkeypatch):  # fmt: skip
    """Issue 11: editing one paragraph of a long document re-embedded every chunk; shared boilerplate too."""
    root = tmp_path / "handbook"
    root.mkdir()
    sections = [f"## Section {n}\n\n" + f"Policy {n} covers the topic number {n} in detail. " * 25 for n in range(8)]
    (root / "long.md").write_text("# Handbook\n\n" + "\n\n".join(sections) + "\n")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="handbook", path=root)
    embedder = CountingEmbedder()
    monkeypatch.setattr(sync_run, "get_embedder", lambda: embedder)
    pipeline.sync_folder(source=source, root=root)
    first = len(embedder.texts)
    total = Document.objects.get(document_key="long.md").chunks.count()
    assert first == total >= 6

    embedder.texts.clear()
    sections[3] = sections[3].replace("Policy 3 covers", "Policy 3 now covers")
    (root / "long.md").write_text("# Handbook\n\n" + "\n\n".join(sections) + "\n")
    job = pipeline.sync_folder(source=source, root=root)
    assert job.updated == 1 and 1 <= len(embedder.texts) <= 2  # only the edited paragraph's chunk(s)
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="Policy 3 now covers the topic", top_k=3)
    assert "Policy 3 now covers" in hits[0].chunk.text and hits[0].chunk.document_version.version == 2
    reused = Chunk.objects.get(document_version__version=2, text__contains="Policy 6 covers")
    original = Chunk.objects.get(document_version__version=1, text__contains="Policy 6 covers")
    assert bytes(reused.dense) == bytes(original.dense)

    # Boilerplate in another document of the tenant is embedded once; another tenant never borrows vectors.
    embedder.texts.clear()
    (root / "copy.md").write_text((root / "long.md").read_text())
    pipeline.sync_folder(source=source, root=root)
    assert embedder.texts == []
    other = tmp_path / "other"
    other.mkdir()
    (other / "long.md").write_text((root / "long.md").read_text())
    other_source = pipeline.folder_source_get_or_create(tenant=tenant_b, name="handbook", path=other)
    pipeline.sync_folder(source=other_source, root=other)
    assert len(embedder.texts) == total


def test_a_sync_read_and_embedded_ahead_in_many_batches_gives_each_chunk_its_own_vector(tenant_a, tmp_path,
                                                                                        monkeypatch):  # fmt: skip
    """The lookahead reads, embeds and writes different batches at once: no vector lands on another chunk,
    each distinct input is embedded once (also a copy read a batch later), and a broken file among them is
    reported while the rest are indexed."""
    monkeypatch.setattr(lookahead.Lookahead, "BATCH_CHUNKS", 4)  # 30 files: eight batches, more than DEPTH ahead
    root = tmp_path / "many"
    root.mkdir()
    for n in range(30):
        (root / f"note-{n:02d}.md").write_text(
            f"# Note {n}\n\n" + f"Station {n} measures the river level at bridge {n} every hour. " * 30 + "\n"
        )
    (root / "note-05.md").replace(root / "note-05.pdf")  # not a PDF: fails, the rest go on
    (root / "note-27.md").write_text((root / "note-01.md").read_text())  # the same text, seven batches later
    embedder = CountingEmbedder()
    monkeypatch.setattr(sync_run, "get_embedder", lambda: embedder)
    job = pipeline.sync_folder(source=pipeline.folder_source_get_or_create(tenant=tenant_a, name="many", path=root),
                               root=root)  # fmt: skip
    assert (job.added, job.failed) == (29, 1) and job.errors[0]["key"] == "note-05.pdf"
    chunks = list(Chunk.objects.for_tenant(tenant_a).select_related("document", "document_version"))
    inputs = [prepare.stored_embedding_text(chunk) for chunk in chunks]
    assert sorted(embedder.texts) == sorted(set(inputs))  # every distinct input once, nothing twice
    expected = embedder.inner.embed_for_index(inputs)  # both legs, as stored
    stored = np.vstack([np.frombuffer(bytes(chunk.dense), dtype=np.float32) for chunk in chunks])
    assert np.allclose(stored, expected, atol=1e-4)
    hit = retrieve(viewer=Viewer.everything(tenant_a), query="river level at bridge 17", top_k=1)[0]
    assert hit.chunk.document.document_key == "note-17.md"


def test_a_model_file_that_vanished_fails_the_job_with_a_reference_to_its_reason_and_a_retry_completes(
    tenant_a, settings, tmp_path, django_capture_on_commit_callbacks, caplog
):  # fmt: skip
    """The embedding GGUF a user configured is gone when the job starts: the job says it failed and where the
    details are (the log, by reference), not the server's paths; back, the retry works."""
    from inference.packaged import packaged_gemma_path
    from knowledge.services import job_retry, upload_enqueue

    model = tmp_path / "embedder.gguf"
    shutil.copyfile(packaged_gemma_path(), model)
    settings.RAG_EMBEDDER, settings.RAG_EMBEDDING_MODEL_PATH = "llama", str(model)
    get_embedder.cache_clear()
    model.rename(tmp_path / "moved-away.gguf")  # vanishes before the worker loads it
    try:
        uploads = [("guide.md", b"# Guide\n\nThe router listens on port 4.\n")]
        # The task runs inline here (Q_CLUSTER sync), so its exception reaches the test; a worker logs it.
        with pytest.raises(ImproperlyConfigured), django_capture_on_commit_callbacks(execute=True):
            upload_enqueue(tenant=tenant_a, source=None, uploads=uploads)
        job = IngestJob.objects.for_tenant(tenant_a).get()
        assert job.state == IngestJob.State.FAILED
        # The job page says what happened and where the details are; the operator's log has the setting's name.
        reference = re.search(r"\(ref ([0-9a-f]{12})\)", job.message).group(1)
        assert job.message.startswith("The job stopped on an unexpected error; the details were logged")
        assert "RAG_EMBEDDING_MODEL_PATH" not in job.message and str(tmp_path) not in job.message
        logged = [r for r in caplog.records if reference in r.getMessage()]
        assert logged and "is not a file" in str(logged[0].exc_info[1])
        assert not Document.objects.for_tenant(tenant_a).exists()  # nothing half-written
        (tmp_path / "moved-away.gguf").rename(model)
        get_embedder.cache_clear()
        with django_capture_on_commit_callbacks(execute=True):
            job_retry(tenant=tenant_a, job=job)
        job.refresh_from_db()
        assert job.state == IngestJob.State.SUCCEEDED, job.message
        assert Document.objects.for_tenant(tenant_a).get().status == Status.ACTIVE
    finally:
        get_embedder.cache_clear()  # the next test gets the packaged embedder again


def test_a_curation_click_pushes_its_own_documents_never_another_tenants_backlog(
    tenant_a, tenant_b, tree, tmp_path, django_capture_on_commit_callbacks
):
    from knowledge.services import documents_set_critical

    sync(tenant_a, tree)  # indexed
    other = pipeline.folder_source_get_or_create(tenant=tenant_b, name="big", path=tree)
    pipeline.sync_folder(source=other, root=tree)
    # Tenant B's versions as a big ingest leaves them: written to SQL, waiting for the background indexer.
    waiting = DocumentVersion.objects.filter(document__tenant=tenant_b).update(status=Status.PENDING)
    assert waiting > 0
    guide = Document.objects.filter(tenant=tenant_a, document_key="docs/guide.rst")
    with django_capture_on_commit_callbacks(execute=True):
        documents_set_critical(tenant=tenant_a, documents=guide, critical=True)
    identity = get_embedder().identity
    critical = Scope(tenant=str(tenant_a.public_id), critical_only=True)
    assert get_store().count(identity, critical) == guide.get().chunks.count()  # its own payloads: at once
    assert DocumentVersion.objects.filter(document__tenant=tenant_b, status=Status.PENDING).count() == waiting
