from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from knowledge.ingest.uploads import UploadRejected, expand_upload
from knowledge.locations import FolderNotAllowed, folder_path_check
from knowledge.models import Document, IngestJob, Status
from knowledge.search.retrieval import retrieve
from knowledge.services import upload_enqueue
from tenants.principals import Viewer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _zip(entries: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in entries.items():
            bundle.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            bundle.writestr(info, "/etc/passwd")
    return buffer.getvalue()


def test_uploads_and_zips_are_ingested_in_the_background_with_every_refusal_explained(
    tenant_a, django_capture_on_commit_callbacks
):
    archive = _zip(
        {
            "manual/setup.md": b"# Setup\n\nPlug the router into port 4.\n",
            "manual/img.png": b"\x89PNG....",
            "../escape.md": b"# Escape\n",
            "inner.zip": b"PK..",
            "bomb.txt": b"0" * 5_000_000,
        },
        symlink="manual/link.md",
    )
    uploads = [("guide.md", b"# Guide\n\nThe guide covers routers.\n"), ("bundle.zip", archive),
               ("handbook.pdf", (FIXTURES / "handbook.pdf").read_bytes()), ("broken.zip", b"not a zip")]  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):  # the queued task runs inline (Q_CLUSTER sync)
        job = upload_enqueue(tenant=tenant_a, source=None, uploads=uploads)
    job.refresh_from_db()
    assert job.state == IngestJob.State.PARTIAL
    keys = set(Document.objects.for_tenant(tenant_a).values_list("document_key", flat=True))
    assert keys == {"guide.md", "manual/setup.md", "handbook.pdf"}
    assert all(d.source.is_default for d in Document.objects.for_tenant(tenant_a))
    skips = {s["key"]: s["reason"] for s in job.skips}
    assert skips["manual/img.png"].startswith("binary or media file")
    assert skips["../escape.md"].startswith("unsafe path")
    assert skips["inner.zip"] == "nested archive (not expanded)"
    assert "zip bomb" in skips["bomb.txt"]
    assert skips["manual/link.md"].startswith("symbolic link")
    assert [e["key"] for e in job.errors] == ["broken.zip"]
    assert (
        retrieve(viewer=Viewer.everything(tenant_a), query="router port", top_k=3)[0].chunk.document.document_key
        == "manual/setup.md"
    )


def test_an_upload_over_the_limit_is_refused(settings):
    settings.RAG_MAX_UPLOAD_BYTES = 100
    with pytest.raises(UploadRejected, match="larger than the upload limit"):
        expand_upload("big.md", b"x" * 101)


def test_a_zip_that_declares_too_much_is_refused(settings):
    settings.RAG_MAX_UNZIPPED_BYTES = 1000
    with pytest.raises(UploadRejected, match="would expand"):
        expand_upload("a.zip", _zip({"a.md": b"a" * 600, "b.md": b"b" * 600}))


def test_uploading_again_the_same_content_changes_nothing(tenant_a, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        upload_enqueue(tenant=tenant_a, source=None, uploads=[("a.md", b"# A\n\nalpha\n")])
    with django_capture_on_commit_callbacks(execute=True):
        job = upload_enqueue(tenant=tenant_a, source=None, uploads=[("a.md", b"# A\n\nalpha\n")])
    job.refresh_from_db()
    assert (job.unchanged, job.chunks_done) == (1, 0)
    assert Document.objects.get(document_key="a.md").versions.get().status == Status.ACTIVE


@pytest.mark.django_db
def test_web_folders_must_be_inside_an_allowed_root(settings, tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "docs").mkdir(parents=True)
    outside.mkdir()
    (allowed / "escape").symlink_to(outside)
    settings.RAG_ALLOWED_FOLDER_ROOTS = [allowed.resolve()]
    assert folder_path_check(str(allowed / "docs")) == (allowed / "docs").resolve()
    for bad in (str(outside), str(allowed / "docs" / ".." / ".."), str(allowed / "escape"), "/nonexistent"):
        with pytest.raises(FolderNotAllowed):
            folder_path_check(bad)
    settings.RAG_ALLOWED_FOLDER_ROOTS = []
    with pytest.raises(FolderNotAllowed, match="disabled"):
        folder_path_check(str(allowed / "docs"))


def test_names_that_cannot_be_stored_are_reported_and_the_rest_of_the_upload_goes_on(
    tenant_a, django_capture_on_commit_callbacks
):
    long_part = "x" * 300
    archive = _zip({
        "docs.md": b"# Docs\n\nThe docs page.\n", "docs.md/inner.md": b"# Inner\n\nInner text.\n",
        f"{long_part}/a.md": b"# Deep\n\nDeep text.\n", "ok/fine.md": b"# Fine\n\nAll fine.\n",
    })  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        job = upload_enqueue(tenant=tenant_a, source=None, uploads=[("bundle.zip", archive)])
    job.refresh_from_db()
    assert job.state == IngestJob.State.PARTIAL  # finished, never stuck in queued
    keys = set(Document.objects.for_tenant(tenant_a).values_list("document_key", flat=True))
    assert keys == {"docs.md", "ok/fine.md"}
    reasons = {e["key"]: e["error"] for e in job.errors}
    assert "conflicts with another file" in reasons["docs.md/inner.md"]
    assert "longer than 255 bytes" in reasons[f"{long_part}/a.md"]


def test_raw_uploads_are_removed_once_ingested_and_with_their_source(tenant_a, django_capture_on_commit_callbacks):
    from rest_framework.test import APIClient

    from knowledge.services import source_create, source_delete
    from tenants.services import api_key_issue

    source = source_create(tenant=tenant_a, kind="upload", name="manuals")
    with django_capture_on_commit_callbacks(execute=True):
        job = upload_enqueue(tenant=tenant_a, source=source, uploads=[("a.md", b"# A\n\nAlpha text.\n")])
    job.refresh_from_db()
    folder = Path(job.params["dir"])
    assert job.state == IngestJob.State.SUCCEEDED and not folder.exists()  # ingested: the raw file is gone
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    retry = client.post(f"/api/v1/tenants/acme/jobs/{job.public_id}/retry/")
    assert retry.status_code == 400 and "upload them again" in retry.json()["job"][0]
    # A job whose files are still there (it crashed before ingesting) loses them with its source.
    kept = upload_enqueue(tenant=tenant_a, source=source, uploads=[("b.md", b"# B\n\nBeta text.\n")])  # not run
    assert Path(kept.params["dir"]).is_dir()
    source_delete(tenant=tenant_a, source=source)
    assert not Path(kept.params["dir"]).exists()


def test_a_bidi_name_is_refused_and_nfc_nfd_twins_do_not_silently_merge(tenant_a, tmp_path):
    from knowledge.ingest import pipeline

    root = tmp_path / "kb"
    root.mkdir()
    (root / "ok.md").write_text("# Ok\n\nFine.\n")
    (root / "invoice\u202efdp.md").write_text("# Evil\n\nSpoofed name.\n")
    (root / "caf\u00e9.md").write_text("# Composed\n\nThe composed one.\n")  # NFC
    (root / "cafe\u0301.md").write_text("# Decomposed\n\nThe decomposed one.\n")  # NFD: the same name once normalised
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="kb", path=root)
    job = pipeline.sync_folder(source=source, root=root)
    keys = sorted(Document.objects.for_tenant(tenant_a).values_list("document_key", flat=True))
    assert "ok.md" in keys and not any("\u202e" in k for k in keys)
    reported = {e["key"] for e in job.errors} | {s["key"] for s in job.skips}
    assert any("\u202e" in k for k in reported)  # the refusal has its reason, nothing silently dropped
    assert keys.count("caf\u00e9.md") == 1 and any("twin" in (e.get("error") or "") or "twin" in (e.get("reason") or "")
                                                   for e in [*job.errors, *job.skips])  # fmt: skip


def test_a_tenant_cannot_queue_more_upload_bytes_than_its_quota(tenant_a, tenant_b, settings):
    """Issue 10 #12: one request could queue ~2 GiB for the single shared worker."""
    from rest_framework.test import APIClient

    from tenants.services import api_key_issue

    settings.RAG_TENANT_QUEUED_BYTES = 3000
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")

    from knowledge.services import source_default_get

    url = f"/api/v1/tenants/acme/sources/{source_default_get(tenant=tenant_a).public_id}/upload/"

    def upload(name: str, data: bytes):  # type: ignore[no-untyped-def]
        return client.post(url, {"files": _named(name, data)}, format="multipart")

    first = upload("a.md", b"# A\n" + b"a" * 1996)
    assert first.status_code == 202  # queued, not run yet: its 2,000 bytes count against the quota
    # An archive that expands past the quota: members beyond it are refused by name, the rest is kept.
    partly = upload("more.zip", _zip({"b.md": b"# B\n" + b"b" * 496, "c.md": b"# C\n" + b"c" * 996}))
    assert partly.status_code == 202
    job = IngestJob.objects.get(public_id=partly.json()["id"])
    assert job.params["files"] == ["b.md"] and "c.md" in [e["key"] for e in job.params["errors"]]
    refused = upload("d.md", b"# D\n" + b"d" * 600)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "waiting to be indexed" in refused.json()["detail"]
    assert IngestJob.objects.filter(tenant=tenant_a).count() == 2  # the refused upload left no job behind
    assert upload_enqueue(tenant=tenant_b, source=None, uploads=[("e.md", b"# E\n" + b"e" * 2000)])  # B's own quota


def _named(name: str, data: bytes):  # type: ignore[no-untyped-def]
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def test_an_upload_job_shows_its_totals_at_once_and_says_which_document_it_is_on(tenant_a, caplog):
    import logging

    from knowledge.ingest import pipeline
    from knowledge.models import IngestJob
    from knowledge.services import source_default_get

    source = source_default_get(tenant=tenant_a)
    job = IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.UPLOAD)
    files = [("a.md", b"# A\n\nAlpha text.\n"), ("b.md", b"# B\n\nBeta text.\n")]
    stored_totals = []

    class WhatThePageWouldShow(logging.Handler):  # reads the job row as the polling page does, at each report
        def emit(self, record: logging.LogRecord) -> None:
            stored_totals.append(IngestJob.objects.get(pk=job.pk).documents_total)

    watcher = WhatThePageWouldShow()
    logging.getLogger("knowledge.jobs").addHandler(watcher)
    try:
        with caplog.at_level(logging.DEBUG, logger="knowledge.jobs"):
            pipeline.ingest_files(source=source, files=files, job=job)
    finally:
        logging.getLogger("knowledge.jobs").removeHandler(watcher)
    said = [r.getMessage().split(": ", 1)[1] for r in caplog.records if r.name == "knowledge.jobs"]
    assert said[:3] == ["Document 1 of 2: a.md", "Document 2 of 2: b.md", "(activity cleared)"]
    assert stored_totals[0] == 2  # "0 of 2 documents" while the first one is read, not "0 of 0"
    job.refresh_from_db()
    assert job.documents_total == 2 and job.activity == ""


def test_an_upload_into_a_kind_that_takes_none_is_refused_on_every_door_and_nothing_is_queued(tenant_a, tmp_path):
    """A vault, folder, git or website source is read from elsewhere: its next sync would retire an uploaded file.
    The registry says which kinds take uploads; the page offers only those, and REST and the page refuse the others
    in words (knowledge.ingest.sources.upload_refusal)."""
    from django.test import Client
    from rest_framework.test import APIClient

    from knowledge.ingest import pipeline, sources
    from tenants.services import api_key_issue
    from tests.factories import make_member

    root = tmp_path / "vault"
    root.mkdir()
    (root / "note.md").write_text("# Note\n\nA vault note.\n")
    vault = pipeline.folder_source_get_or_create(tenant=tenant_a, name="vault", path=root, kind="obsidian")
    assert sources.upload_kinds() == ["upload"]
    with pytest.raises(ValueError, match="would be retired by its next sync"):
        upload_enqueue(tenant=tenant_a, source=vault, uploads=[("a.md", b"# A\n")])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, name='w')[1]}")
    sent = io.BytesIO(b"# A\n\nText.\n")
    sent.name = "a.md"
    response = api.post(f"/api/v1/tenants/acme/sources/{vault.public_id}/upload/", {"files": [sent]},
                        format="multipart")  # fmt: skip
    assert response.status_code == 400 and "retired by its next sync" in response.json()["source"][0]
    admin = Client()
    admin.force_login(make_member(tenant_a, role="admin"))
    page = admin.get("/t/acme/upload/").content.decode()
    assert str(vault.public_id) not in page  # not offered
    sent.seek(0)
    refused = admin.post("/t/acme/upload/", {"files": [sent], "source": str(vault.public_id)}, follow=True)
    assert "retired by its next sync" in refused.content.decode()
    assert not IngestJob.objects.filter(tenant=tenant_a, kind=IngestJob.Kind.UPLOAD).exists()
