"""A folder is checked where it is read: enqueue, retry and the worker — never only where it was typed.

Reproduces the review's finding: a tenant admin changed the path of a CLI-created folder source and
retried its job; the retry ingested whatever the new path pointed at (other tenants' uploads, secrets)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from knowledge import services
from knowledge.ingest import pipeline
from knowledge.models import Document, IngestJob, Source
from knowledge.tasks import ingest_job_task
from tenants.services import api_key_issue
from tests.factories import CommittingClientMixin


class CommittingAPIClient(CommittingClientMixin, APIClient):
    pass


@pytest.fixture
def folders(tmp_path, settings):  # type: ignore[no-untyped-def]
    allowed, secret = tmp_path / "allowed" / "kb", tmp_path / "secret"
    for folder, name, text in ((allowed, "faq.md", "# FAQ\n\nOpen the account page.\n"),
                               (secret, "keys.md", "# Keys\n\nThe root password is hunter2.\n")):  # fmt: skip
        folder.mkdir(parents=True)
        (folder / name).write_text(text)
    settings.RAG_ALLOWED_FOLDER_ROOTS = [(tmp_path / "allowed").resolve()]
    return allowed, secret


def _client(tenant) -> APIClient:  # type: ignore[no-untyped-def]
    client = CommittingAPIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant)[1]}")
    return client


def test_retrying_a_cli_job_after_the_source_path_changed_never_reads_the_new_path(tenant_a, folders):
    allowed, secret = folders
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="kb", path=allowed)
    job = pipeline.sync_folder(source=source, root=allowed)  # what `manage.py ingest` does
    Source.objects.filter(pk=source.pk).update(path=str(secret))  # the edit the admin form allowed then
    response = _client(tenant_a).post(f"/api/v1/tenants/acme/jobs/{job.public_id}/retry/")
    assert response.status_code == 202
    assert not Document.objects.filter(document_key="keys.md").exists()  # the secret folder was never read
    assert Document.objects.filter(document_key="faq.md").exists()


def test_an_api_job_whose_folder_is_no_longer_allowed_cannot_be_retried(tenant_a, folders, settings, tmp_path):
    allowed, _ = folders
    source = services.folder_source_create(tenant=tenant_a, name="kb", path=str(allowed))
    client = _client(tenant_a)
    synced = client.post(f"/api/v1/tenants/acme/sources/{source.public_id}/sync/")
    assert synced.status_code == 202
    settings.RAG_ALLOWED_FOLDER_ROOTS = [(tmp_path / "elsewhere").resolve()]  # the operator narrowed the roots
    response = client.post(f"/api/v1/tenants/acme/jobs/{synced.json()['id']}/retry/")
    assert response.status_code == 400 and "outside the folders this server allows" in response.json()["path"][0]


def test_the_worker_checks_the_folder_again_before_reading(tenant_a, folders):
    allowed, secret = folders
    source = services.folder_source_create(tenant=tenant_a, name="kb", path=str(allowed))
    job = IngestJob.objects.create(
        tenant=tenant_a, source=source, kind=IngestJob.Kind.FOLDER, params={"path": str(secret), "operator": False}
    )  # a forged or stale row
    ingest_job_task(job.pk)
    job.refresh_from_db()
    assert job.state == IngestJob.State.FAILED and "outside the folders this server allows" in job.message
    assert not Document.objects.filter(document_key="keys.md").exists()


def test_the_admin_cannot_change_a_source_path(tenant_a, folders, admin_a):  # type: ignore[no-untyped-def]
    from django.contrib import admin as django_admin

    allowed, _ = folders
    source = services.folder_source_create(tenant=tenant_a, name="kb", path=str(allowed))
    model_admin = django_admin.site._registry[Source]
    request = type("R", (), {"user": admin_a})()
    assert "path" in model_admin.get_readonly_fields(request, source)


def test_a_folder_source_added_in_the_admin_must_lie_inside_an_allowed_root(tenant_a, folders, admin_a, client):
    from django.urls import reverse

    allowed, secret = folders
    client.force_login(admin_a)
    url = reverse("admin:knowledge_source_add")
    refused = client.post(url, {"tenant": tenant_a.pk, "kind": "folder", "label": "secrets", "path": str(secret),
                                "default_mode": "auto", "ocr_languages": "spa+eng"})  # fmt: skip
    assert refused.status_code == 200 and "outside the folders this server allows" in refused.content.decode()
    assert not Source.objects.filter(label="secrets").exists()
    added = client.post(url, {"tenant": tenant_a.pk, "kind": "folder", "label": "kb", "path": str(allowed / "."),
                              "default_mode": "auto", "ocr_languages": "spa+eng"})  # fmt: skip
    assert added.status_code == 302
    assert Source.objects.get(label="kb").path == str(allowed.resolve())
