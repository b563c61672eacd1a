"""One scope rule for every read: a tag given to a source scopes its documents everywhere (searches, bootstrap's
critical points, topics and counts, the documents page and API), as it scopes the vector payloads."""

from __future__ import annotations

from pathlib import Path

from knowledge import services
from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.models import Document
from knowledge.search.bootstrap import bootstrap
from knowledge.search.retrieval import RetrieveFilters
from tenants.principals import Viewer


def _handbook_and_notes(tenant, tmp_path: Path):  # type: ignore[no-untyped-def]
    handbook, notes = tmp_path / "handbook", tmp_path / "notes"
    handbook.mkdir()
    notes.mkdir()
    (handbook / "leave.md").write_text("# Leave\n\n## Annual leave\n\nEvery employee has 25 days of annual leave.\n")
    (handbook / "expenses.md").write_text("# Expenses\n\n## Travel\n\nTrain tickets are refunded within 30 days.\n")
    (notes / "standup.md").write_text("# Standup\n\n## Tuesday\n\nThe release moved to Thursday.\n")
    tagged = pipeline.folder_source_get_or_create(tenant=tenant, name="handbook", path=handbook)
    pipeline.sync_folder(source=tagged, root=handbook)
    other = pipeline.folder_source_get_or_create(tenant=tenant, name="notes", path=notes)
    pipeline.sync_folder(source=other, root=notes)
    services.source_set_tags(tenant=tenant, source=tagged, tags=["hr"])
    leave = Document.objects.filter(document_key="leave.md")
    services.documents_set_critical(tenant=tenant, documents=leave, critical=True)
    indexer.drain()
    return tagged


def test_a_bootstrap_scoped_to_a_source_tag_counts_and_maps_that_sources_documents(tenant_a, tmp_path: Path):
    _handbook_and_notes(tenant_a, tmp_path)
    pack = bootstrap(viewer=Viewer.everything(tenant_a), intent="annual leave", filters=RetrieveFilters(tags=["hr"]))
    assert pack["scope"]["documents"] == 2 and pack["scope"]["chunks"] >= 2
    assert [p["document_key"] for p in pack["critical_points"]] == ["leave.md"]
    assert {t["topic"] for t in pack["topics"]} == {"Leave", "Expenses"}
    assert all(i["document_key"] != "standup.md" for i in pack["items"])


def test_the_documents_page_and_api_filter_a_source_tag_alike(tenant_a, client_a, tmp_path: Path):
    _handbook_and_notes(tenant_a, tmp_path)
    api = client_a.get(f"/api/v1/tenants/{tenant_a.slug}/documents/?tag=HR").json()
    assert sorted(d["document_key"] for d in api["results"]) == ["expenses.md", "leave.md"]
    page = client_a.get(f"/t/{tenant_a.slug}/documents/?tag=HR").content.decode()
    assert "expenses.md" in page and "leave.md" in page and "standup.md" not in page


def test_the_sources_page_shows_each_sources_newest_job_and_no_other_tenants(tenant_a, tenant_b, tmp_path: Path):
    from knowledge import selectors
    from knowledge.models import IngestJob

    tagged = _handbook_and_notes(tenant_a, tmp_path)
    newer = IngestJob.objects.create(tenant=tenant_a, source=tagged, kind=IngestJob.Kind.UPLOAD)
    IngestJob.objects.create(tenant=tenant_b, source=None, kind=IngestJob.Kind.UPLOAD)
    last = selectors.last_job_by_source(tenant=tenant_a)
    assert last[tagged.pk] == newer and len(last) == 2
    assert selectors.last_job_by_source(tenant=tenant_b) == {}
