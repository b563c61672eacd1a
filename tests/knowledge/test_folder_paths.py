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
    # A git URL added in the admin keeps its credential sealed apart too (knowledge/sealed.py).
    from django.test import override_settings

    from knowledge.sealed import unseal

    with override_settings(RAG_ALLOWED_GIT_URLS=["https://git.example.com/acme/"]):
        token_url = "https://ada:t0ken@git.example.com/acme/repo.git"
        client.post(url, {"tenant": tenant_a.pk, "kind": "git", "label": "repo", "default_mode": "auto",
                          "path": token_url, "ocr_languages": "spa+eng"})  # fmt: skip
    repo = Source.objects.get(label="repo")
    assert repo.path == "https://git.example.com/acme/repo.git" and unseal(repo.credential) == "ada:t0ken"


def test_a_new_folder_source_syncs_at_once_over_rest_and_on_the_pages(tenant_a, folders):
    """Issue 50: a new folder, vault or git source sat at 0 documents until someone found "Re-sync"."""
    from django.test import Client

    from tenants.models import Membership
    from tests.factories import make_member

    allowed, _ = folders
    created = _client(tenant_a).post("/api/v1/tenants/acme/sources/",
                                     {"kind": "folder", "name": "kb", "path": str(allowed)}, format="json")  # fmt: skip
    assert created.status_code == 201 and created.json()["sync_job_id"]
    job = IngestJob.objects.get(public_id=created.json()["sync_job_id"])
    assert job.params["trigger"] == "created" and job.state == IngestJob.State.SUCCEEDED and job.added == 1
    assert Document.objects.filter(source__label="kb", document_key="faq.md").exists()
    quiet = _client(tenant_a).post("/api/v1/tenants/acme/sources/",
                                   {"kind": "folder", "name": "later", "path": str(allowed), "sync": False},
                                   format="json")  # fmt: skip
    assert quiet.status_code == 201 and quiet.json()["sync_job_id"] is None

    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    page = type("CommittingClient", (CommittingClientMixin, Client), {})()
    page.force_login(admin)
    response = page.post("/t/acme/sources/", {"kind": "folder", "name": "pages", "path": str(allowed)}, follow=True)
    assert "Its first sync is running" in response.content.decode()
    assert Document.objects.filter(source__label="pages", document_key="faq.md").exists()


def test_each_tenant_reads_its_own_drop_folder_and_what_the_operator_allows_on_the_page(tenant_a, tenant_b, settings,
                                                                                         tmp_path):  # fmt: skip
    """Issue 50: folder sources were off out of the box (a disabled field saying "set RAG_ALLOWED_FOLDER_ROOTS").
    Now each workspace has a drop folder its admins may add from, which no other workspace reads; the operator
    allows more on a page, with no restart."""
    from django.test import Client

    from knowledge.locations import FolderNotAllowed, drop_folder, folder_path_check
    from tenants.models import Membership
    from tests.factories import make_member, make_user

    settings.RAG_ALLOWED_FOLDER_ROOTS, settings.RAG_DROP_DIR = [], tmp_path / "drop"
    handbook = drop_folder("acme") / "handbook"
    handbook.mkdir()
    (handbook / "leave.md").write_text("# Leave\n\nTwenty-five days of paid leave a year.\n")
    assert folder_path_check("handbook", "acme") == handbook.resolve()  # a name is read from the drop folder
    assert folder_path_check(str(handbook), "acme") == handbook.resolve()
    for bad, tenant in (("handbook", "globex"), (str(handbook), "globex"), ("../acme/handbook", "globex"),
                        ("..", "acme"), (str(tmp_path), "acme")):  # fmt: skip
        with pytest.raises(FolderNotAllowed):
            folder_path_check(bad, tenant)

    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    page = type("CommittingClient", (CommittingClientMixin, Client), {})()
    page.force_login(admin)
    listing = page.get("/t/acme/sources/").content.decode()
    assert str(drop_folder("acme")) in listing and "<code>handbook</code>" in listing and "disabled" not in listing
    page.post("/t/acme/sources/", {"kind": "folder", "name": "handbook", "path": "handbook"})
    assert Document.objects.filter(tenant=tenant_a, document_key="leave.md").exists()

    shares = tmp_path / "shares" / "policies"
    shares.mkdir(parents=True)
    with pytest.raises(FolderNotAllowed):
        folder_path_check(str(shares), "acme")
    assert page.get("/operator/locations/").status_code == 404  # a workspace admin is no operator
    operator = make_user(username="root", is_superuser=True, is_staff=True)
    page.force_login(operator)
    refused = page.post("/operator/locations/", {"kind": "folder", "value": "relative/path"}, follow=True)
    assert "not an absolute path" in refused.content.decode()
    page.post("/operator/locations/", {"kind": "folder", "value": str(tmp_path / "shares")})
    assert folder_path_check(str(shares), "acme") == shares.resolve() == folder_path_check(str(shares), "globex")
    assert str(tmp_path / "shares") in page.get("/operator/locations/").content.decode()
    # Bad input is a message, never a 500.
    assert page.post("/operator/locations/", {"remove": "not-a-number"}).status_code == 302
    too_long = page.post("/operator/locations/", {"kind": "web", "value": "https://x/" + "a" * 1200}, follow=True)
    assert "at most 1,000 characters" in too_long.content.decode()


def test_an_admin_sends_a_folder_as_a_zip_into_the_drop_folder_and_adds_it_with_no_shell(
    tenant_a, tenant_b, settings, tmp_path
):
    """Issue 50, done when: a new admin adds a folder and a vault from the browser on a fresh install."""
    import io
    import zipfile

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from knowledge.locations import drop_folder
    from tenants.models import Membership
    from tests.factories import make_member

    settings.RAG_ALLOWED_FOLDER_ROOTS, settings.RAG_DROP_DIR = [], tmp_path / "drop"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("Handbook/leave.md", "# Leave\n\nTwenty-five days of paid leave a year.\n")
        archive.writestr("Handbook/.obsidian/app.json", "{}")
        archive.writestr("../../escape.md", "# Escape\n\nOutside.\n")
        archive.writestr("Handbook/photo.exe", b"MZ\x00\x00")
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    page = type("CommittingClient", (CommittingClientMixin, Client), {})()
    page.force_login(admin)
    sent = page.post("/t/acme/sources/drop/", {"name": "wiki", "archive": SimpleUploadedFile(
        "wiki.zip", buffer.getvalue(), content_type="application/zip")}, follow=True).content.decode()  # fmt: skip
    assert "Unpacked 2 file(s) into wiki" in sent and "left out" in sent
    wiki = drop_folder("acme") / "wiki"
    assert (wiki / "Handbook" / "leave.md").is_file() and not list(tmp_path.rglob("escape.md"))  # never written
    page.post("/t/acme/sources/", {"kind": "obsidian", "name": "wiki", "path": "wiki"})
    assert Document.objects.filter(tenant=tenant_a, source__kind="obsidian", document_key="Handbook/leave.md").exists()
    assert not (drop_folder("globex") / "wiki").exists()  # another workspace's drop folder is untouched
    # A folder compressed as itself (hq-policies.zip holding hq-policies/) lands as that folder, not one level deeper:
    # its keys and its files' own `supersedes:` stay as written.
    policies = io.BytesIO()
    with zipfile.ZipFile(policies, "w") as archive:
        archive.writestr("hq-policies/travel-2025.md", "# Travel 2025\n\nThe per diem is 42 EUR.\n")
        archive.writestr("hq-policies/travel-2026.md", "---\nsupersedes: travel-2025.md\n---\n# Travel\n\n45 EUR.\n")
    page.post("/t/acme/sources/drop/", {"archive": SimpleUploadedFile("hq-policies.zip", policies.getvalue())})
    landed = sorted(p.name for p in (drop_folder("acme") / "hq-policies").iterdir())
    assert landed == ["travel-2025.md", "travel-2026.md"]
    page.post("/t/acme/sources/", {"kind": "folder", "name": "hq-policies", "path": "hq-policies"})
    newer = Document.objects.get(tenant=tenant_a, source__name="hq-policies", document_key="travel-2026.md")
    assert newer.supersedes is not None and newer.supersedes.document_key == "travel-2025.md"
    refused = page.post("/t/acme/sources/drop/", {"archive": SimpleUploadedFile("notes.txt", b"plain")}, follow=True)
    assert "Send the folder as a .zip archive" in refused.content.decode()
    settings.RAG_MAX_REQUEST_BYTES = 100
    too_big = page.post("/t/acme/sources/drop/", {"archive": SimpleUploadedFile("big.zip", buffer.getvalue())},
                        follow=True)  # fmt: skip
    assert too_big.status_code == 200 and "one request may carry at most" in too_big.content.decode()
