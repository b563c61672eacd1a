"""The curation web app: admin-only, tenant-scoped, and curation reaches retrieval at once."""

from __future__ import annotations

import pytest
from django.test import Client

from inference.embedders import get_embedder
from knowledge.index.vectorstore import Scope, get_store
from knowledge.models import Chunk, Document, IngestJob, Source, Status
from tenants.models import Membership
from tests.factories import CommittingClientMixin, make_folder_source, make_member


class CommittingClient(CommittingClientMixin, Client):
    pass


@pytest.fixture
def corpus(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    files = {
        "setup.md": "# Setup\n\nInstall the agent with the installer, then start the agent.\n",
        "network.md": "# Network\n\nOpen port 8443 so that it can reach the cloud.\n",
        "billing.md": "# Billing\n\nInvoices are sent on the first day of the month.\n",
    }
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=files)
    return source


@pytest.fixture
def admin_client(tenant_a) -> Client:  # type: ignore[no-untyped-def]
    client = CommittingClient()
    client.force_login(make_member(tenant_a, role=Membership.Role.ADMIN))
    return client


def _pages(slug: str, source: Source, document: Document, chunk: Chunk, job: IngestJob) -> list[tuple[str, str]]:
    base = f"/t/{slug}"
    return [
        ("get", f"{base}/sources/"),
        ("post", f"{base}/sources/{source.public_id}/tags/"),
        ("get", f"{base}/sources/{source.public_id}/delete/"),
        ("post", f"{base}/sources/{source.public_id}/sync/"),
        ("get", f"{base}/upload/"),
        ("get", f"{base}/jobs/{job.public_id}/"),
        ("get", f"{base}/jobs/{job.public_id}/progress/"),
        ("get", f"{base}/documents/"),
        ("get", f"{base}/documents/{document.public_id}/"),
        ("post", f"{base}/documents/{document.public_id}/critical/"),
        ("post", f"{base}/documents/{document.public_id}/tags/"),
        ("post", f"{base}/documents/{document.public_id}/status/"),
        ("post", f"{base}/chunks/{chunk.public_id}/critical/"),
        ("post", f"{base}/chunks/{chunk.public_id}/tags/"),
        ("get", f"{base}/search/?q=agent"),
    ]


def _objects(source: Source):  # type: ignore[no-untyped-def]
    document = source.documents.get(document_key="setup.md")
    return source, document, document.chunks.first(), IngestJob.objects.filter(source=source).first()


def test_every_page_renders_for_the_tenants_admin(corpus, admin_client):
    for method, url in _pages("acme", *_objects(corpus)):
        if method == "get":
            assert admin_client.get(url).status_code in (200, 286), url


def test_staff_members_get_404_on_every_curation_page(corpus, tenant_a):
    client = Client()
    client.force_login(make_member(tenant_a, role=Membership.Role.STAFF))
    for method, url in _pages("acme", *_objects(corpus)):
        assert getattr(client, method)(url).status_code == 404, url
    assert client.get("/t/acme/chat/").status_code == 200  # staff still chat


def test_another_tenants_admin_gets_404_everywhere_and_changes_nothing(corpus, tenant_b):
    client = Client()
    client.force_login(make_member(tenant_b, role=Membership.Role.ADMIN))
    objects = _objects(corpus)
    for method, url in _pages("acme", *objects) + _pages("globex", *objects)[1:4] + _pages("globex", *objects)[5:7]:
        assert getattr(client, method)(url).status_code == 404, url
    for method, url in _pages("globex", *objects)[8:14]:  # acme's objects under globex's own slug
        assert getattr(client, method)(url).status_code == 404, url
    document = objects[1]
    document.refresh_from_db()
    assert not document.critical and document.status == Status.ACTIVE


def test_marking_a_chunk_critical_reaches_qdrant_and_ranks_it_first(corpus, admin_client, tenant_a):
    chunk = Chunk.objects.get(text__contains="port 8443")
    response = admin_client.post(f"/t/acme/chunks/{chunk.public_id}/critical/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "★ Critical" in response.content.decode()
    chunk.refresh_from_db()
    assert chunk.critical
    identity = get_embedder().identity
    assert get_store().count(identity, Scope(tenant=str(tenant_a.public_id), critical_only=True)) == 1
    preview = admin_client.get("/t/acme/search/?q=agent", HTTP_HX_REQUEST="true").content.decode()
    assert preview.index("port 8443") < preview.index("installer")
    pack = admin_client.get("/t/acme/search/?q=agent&bootstrap=1").content.decode()
    assert "port 8443" in pack.split('id="bootstrap-critical"')[1].split("</ol>")[0]


def test_tags_retire_and_restore_from_the_document_page(corpus, admin_client, tenant_a):
    document = Document.objects.get(document_key="billing.md")
    response = admin_client.post(f"/t/acme/documents/{document.public_id}/tags/", {"add": "Finance, invoices"})
    assert 'class="tag">finance' in response.content.decode()
    assert set(document.tags.values_list("name", flat=True)) == {"finance", "invoices"}
    admin_client.post(f"/t/acme/documents/{document.public_id}/tags/", {"remove": "invoices"})
    assert list(document.tags.values_list("name", flat=True)) == ["finance"]
    identity = get_embedder().identity
    assert get_store().count(identity, Scope(tenant=str(tenant_a.public_id), tags=["finance"])) == 1

    admin_client.post(f"/t/acme/documents/{document.public_id}/status/", {"action": "retire"})
    document.refresh_from_db()
    assert document.status == Status.RETIRED
    assert get_store().count(identity, Scope(tenant=str(tenant_a.public_id), document_ids=[document.document_id])) == 0
    admin_client.post(f"/t/acme/documents/{document.public_id}/status/", {"action": "restore"})
    document.refresh_from_db()
    assert document.status == Status.ACTIVE
    assert get_store().count(identity, Scope(tenant=str(tenant_a.public_id), document_ids=[document.document_id])) == 1


def test_document_list_filters_and_searches(corpus, admin_client):
    page = admin_client.get("/t/acme/documents/?q=bill", HTTP_HX_REQUEST="true").content.decode()
    assert "billing.md" in page and "setup.md" not in page
    assert "setup.md" in admin_client.get("/t/acme/documents/?mode=documental").content.decode()
    assert "No documents match" in admin_client.get("/t/acme/documents/?critical=1").content.decode()
    assert "No documents match" in admin_client.get("/t/acme/documents/?source=not-a-uuid").content.decode()


def test_upload_through_the_page_runs_a_job_and_the_progress_poll_stops_when_done(tenant_a, admin_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    files = [SimpleUploadedFile("faq.md", b"# FAQ\n\nReset the router by holding the button.\n")]
    response = admin_client.post("/t/acme/upload/", {"files": files, "tags": "support", "ingest_mode": "basic"})
    assert response.status_code == 302 and "/jobs/" in response["Location"]
    job_page = admin_client.get(response["Location"]).content.decode()
    assert "100 %" in job_page and "1 added" in job_page
    progress = admin_client.get(response["Location"] + "progress/")
    assert progress.status_code == 286  # tells htmx to stop polling
    assert Document.objects.get(document_key="faq.md").tags.get().name == "support"


def test_deleting_a_source_asks_first_then_removes_its_vectors(corpus, admin_client, tenant_a):
    confirm = admin_client.get(f"/t/acme/sources/{corpus.public_id}/delete/")
    assert "cannot be undone" in confirm.content.decode()
    admin_client.post(f"/t/acme/sources/{corpus.public_id}/delete/")
    assert not Source.objects.filter(pk=corpus.pk).exists()
    assert get_store().count(get_embedder().identity, Scope(tenant=str(tenant_a.public_id), statuses=None)) == 0


@pytest.mark.slow
def test_an_enriched_upload_stores_a_summary_and_indexes_it(tenant_a, admin_client, chat_model, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from inference.catalog import catalog_register_packaged

    settings.RAG_ENRICH_TIMEOUT_S = 3600  # a loaded machine is slow, not wrong
    catalog_register_packaged()
    sheet = b"# Widget 3000\n\nThe Widget 3000 costs 49 euros and has a three year warranty.\n"
    response = admin_client.post(
        "/t/acme/upload/",
        {"files": [SimpleUploadedFile("widget.md", sheet)], "ingest_mode": "enriched",
         "enrich_model": "qwen2.5-coder-0.5b-instruct enrichment (packaged)",
         "directives": "extract price and warranty"},
    )  # fmt: skip
    assert response.status_code == 302
    document = Document.objects.get(document_key="widget.md")
    enrichment = document.versions.get().enrichment
    assert (
        enrichment["status"] == "ok"
        and enrichment["summary"]
        and enrichment["directives"] == "extract price and warranty"
    )
    summary_chunk = document.chunks.get(mode="summary")
    assert summary_chunk.chunk_id.endswith(":summary:0") and "Summary:" in summary_chunk.text
    assert "49" in enrichment["summary"] + " ".join(enrichment["key_points"])  # the instruct model read the sheet
    page = admin_client.get(f"/t/acme/documents/{document.public_id}/").content.decode()
    assert "extract price and warranty" in page and 'id="enrichment-summary"' in page


def test_a_failing_enrichment_model_keeps_the_plain_chunks(tenant_a, admin_client, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from inference.models import ModelEntry

    ModelEntry.objects.create(name="broken", kind=ModelEntry.Kind.ENRICHMENT, path=str(tmp_path / "gone.gguf"))
    admin_client.post(
        "/t/acme/upload/",
        {"files": [SimpleUploadedFile("note.md", b"# Note\n\nThe office opens at nine.\n")], "ingest_mode": "enriched",
         "enrich_model": "broken"},
    )  # fmt: skip
    document = Document.objects.get(document_key="note.md")
    version = document.versions.get()
    assert version.status == Status.ACTIVE and version.enrichment["status"] == "failed"
    assert "gone.gguf: no such file" in version.enrichment["error"]
    assert document.chunks.exclude(mode="summary").count() == 1 and not document.chunks.filter(mode="summary").exists()


@pytest.mark.slow
def test_the_model_catalog_registers_packaged_models_and_checks_loading(db, tmp_path):
    from inference.catalog import catalog_check, catalog_choices
    from inference.models import ModelEntry

    choices = catalog_choices(ModelEntry.Kind.ENRICHMENT)
    assert [c.name for c in choices] == [
        "qwen2.5-coder-0.5b-instruct enrichment (packaged)", "qwen2.5-coder-1.5b-instruct enrichment (packaged)",
    ]  # fmt: skip
    checked = catalog_check(choices[0])  # the 0.5B is assembled for the suite
    assert checked.loads and checked.context_length == 32768 and checked.size_bytes == 491_400_064
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 100)
    entry = catalog_check(ModelEntry.objects.create(name="broken", kind=ModelEntry.Kind.CHAT, path=str(broken)))
    assert entry.loads is False and entry.load_error
    assert "broken" not in [c.name for c in catalog_choices(ModelEntry.Kind.CHAT)]


def _points(tenant, **scope) -> int:  # type: ignore[no-untyped-def]
    return get_store().count(get_embedder().identity, Scope(tenant=str(tenant.public_id), statuses=None, **scope))


def test_the_django_admin_goes_through_the_services_so_the_vector_store_follows(corpus, admin_client, tenant_a):
    from django.urls import reverse

    document = Document.objects.get(document_key="network.md")
    assert _points(tenant_a, critical_only=True) == 0
    change = reverse("admin:knowledge_document_change", args=[document.pk])
    form = {"mode": document.mode, "title": document.title, "critical": "on",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}  # fmt: skip
    response = admin_client.post(change, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert _points(tenant_a, critical_only=True) == Chunk.objects.filter(document=document).count() > 0
    # Documents are retired, not deleted, in the admin; deleting a source removes its points.
    assert admin_client.get(reverse("admin:knowledge_document_delete", args=[document.pk])).status_code == 403
    delete = reverse("admin:knowledge_source_delete", args=[corpus.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Source.objects.filter(pk=corpus.pk).exists() and _points(tenant_a) == 0


def test_deleting_a_tenant_in_the_admin_removes_its_vectors_and_uploads_and_spares_the_others(
    corpus, tenant_a, tenant_b, tmp_path, django_capture_on_commit_callbacks
):
    from pathlib import Path

    from django.contrib.auth import get_user_model
    from django.urls import reverse

    from knowledge.services import upload_enqueue
    from tenants.models import Tenant

    make_folder_source(tenant=tenant_b, root=tmp_path / "b", files={"b.md": "# B\n\nGlobex text.\n"})
    kept = upload_enqueue(tenant=tenant_a, source=None, uploads=[("u.md", b"# U\n\nUploaded.\n")])  # not run yet
    assert Path(kept.params["dir"]).is_dir() and _points(tenant_a) > 0
    root = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    client = CommittingClient()
    client.force_login(root)
    response = client.post(reverse("admin:tenants_tenant_delete", args=[tenant_a.pk]), {"post": "yes"})
    assert response.status_code == 302 and not Tenant.objects.filter(pk=tenant_a.pk).exists()
    assert _points(tenant_a) == 0 and not Path(kept.params["dir"]).exists()
    assert _points(tenant_b) > 0  # the other tenant is untouched


def test_a_superuser_cannot_attach_another_tenants_tag_in_the_admin(corpus, tenant_a, tenant_b):
    from django.contrib.auth import get_user_model
    from django.urls import reverse

    from knowledge.models import Tag

    foreign = Tag.objects.create(tenant=tenant_b, name="globex-secret")
    own = Tag.objects.create(tenant=tenant_a, name="manual")
    document = Document.objects.get(document_key="network.md")
    client = CommittingClient()
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-for-tests-123"))
    form = {"mode": document.mode, "title": document.title, "tags": [foreign.pk, own.pk],
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}  # fmt: skip
    assert client.post(reverse("admin:knowledge_document_change", args=[document.pk]), form).status_code == 302
    assert list(document.tags.values_list("name", flat=True)) == ["manual"]
