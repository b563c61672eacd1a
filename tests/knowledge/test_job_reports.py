"""Job reports a user can act on: every file sent has its row (status, chunks, pages read by OCR, seconds, reason),
"N of M files" counts them all, a renamed upload says so, failed files can be retried, and the upload page lists
every format the extractor reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.ingest.classify import PROSE_TYPES
from knowledge.ingest.ocr import installed_languages
from knowledge.models import IngestJob, JobFile
from knowledge.services import upload_enqueue
from tests.factories import make_folder_source, scanned_pdf

BATCH = [
    ("guide.md", b"# Guide\n\nThe router goes into port 4.\n"),
    ("empty.md", b""),
    ("blank.md", b"   \n\n"),
    ("corrupt.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage"),
    ("../../etc/passwd.md", b"# Passwords\n\nNever share a password.\n"),
]


def _run(tenant, uploads, capture):  # type: ignore[no-untyped-def]
    with capture(execute=True):  # the queued task runs inline (Q_CLUSTER sync)
        job = upload_enqueue(tenant=tenant, source=None, uploads=uploads)
    job.refresh_from_db()
    return job


def test_a_batch_lists_every_file_sent_with_its_outcome_and_reason(tenant_a, client_a,
                                                                   django_capture_on_commit_callbacks):  # fmt: skip
    job = _run(tenant_a, BATCH, django_capture_on_commit_callbacks)
    rows = {f.key: f for f in job.files.all()}
    assert set(rows) == {"guide.md", "empty.md", "blank.md", "corrupt.pdf", "passwd.md"}
    assert rows["guide.md"].status == "added" and rows["guide.md"].chunks >= 1 and rows["guide.md"].seconds >= 0
    assert rows["guide.md"].document is not None
    assert rows["empty.md"].status == rows["blank.md"].status == "skipped" and "empty" in rows["empty.md"].reason
    assert rows["corrupt.pdf"].status == "failed" and "damaged" in rows["corrupt.pdf"].reason
    renamed = rows["passwd.md"]
    assert renamed.status == "added" and renamed.sent_as == "../../etc/passwd.md"
    assert renamed.notice == "stored as passwd.md: the name had folder parts"
    assert (job.files_total, job.files_done) == (5, 5)

    page = client_a.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    assert "5 of 5 files" in page
    for key, status in (("guide.md", "added"), ("empty.md", "skipped"), ("corrupt.pdf", "failed")):
        assert f'data-key="{key}" data-status="{status}"' in page
    assert "stored as passwd.md: the name had folder parts" in page and "../../etc/passwd.md" in page
    # A corrupt PDF fails the same way however often it is tried: no retry is offered, the page says what to do.
    assert "Retry the" not in page and "1 file cannot be read as it was sent" in page


def test_a_retry_sends_the_failed_files_again_as_a_new_job_and_the_rest_are_not_kept(
    tenant_a, client_a, django_capture_on_commit_callbacks, monkeypatch
):
    from knowledge.ingest import sync_run

    real = sync_run.ingest_bytes

    def hiccup(**kwargs):  # type: ignore[no-untyped-def]  # a failure of the moment (a disk, a worker), not the file's
        if kwargs["key"] == "guide.md":
            raise RuntimeError("the disk hiccuped")
        return real(**kwargs)

    monkeypatch.setattr(sync_run, "ingest_bytes", hiccup)
    job = _run(tenant_a, BATCH, django_capture_on_commit_callbacks)
    monkeypatch.setattr(sync_run, "ingest_bytes", real)
    folder = Path(job.params["dir"])
    # Only what a retry may fix is kept: not the corrupt PDF, whose bytes no retry can read.
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == ["guide.md"]
    with django_capture_on_commit_callbacks(execute=True):
        response = client_a.post(f"/t/acme/jobs/{job.public_id}/retry/")
    retry = IngestJob.objects.exclude(pk=job.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/t/acme/jobs/{retry.public_id}/"
    assert list(retry.files.values_list("key", "status")) == [("guide.md", "added")]
    assert retry.params["retry_of"] == str(job.public_id) and not (folder / "guide.md").exists()
    job.refresh_from_db()
    assert "a new job" in client_a.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    again = client_a.post(f"/t/acme/jobs/{job.public_id}/retry/", follow=True).content.decode()
    assert "No failed file of this job is kept" in again


def test_the_job_page_lists_files_while_the_job_runs(tenant_a, client_a):
    job = upload_enqueue(tenant=tenant_a, source=None, uploads=BATCH[:2])  # queued, not run (no commit here)
    job.refresh_from_db()
    page = client_a.get(f"/t/acme/jobs/{job.public_id}/progress/").content.decode()
    assert "1 of 2 files" in page  # the empty file was skipped as it was stored; the other waits
    assert 'data-key="guide.md" data-status="waiting"' in page and 'hx-trigger="every 1s"' in page


@pytest.mark.skipif(not {"eng", "spa"} <= installed_languages(), reason="needs Tesseract (scripts/_ocr.sh)")
def test_a_folder_sync_lists_the_pages_ocr_read_and_what_it_skipped(tenant_a, tmp_path, client_a):
    pages = [["Returns policy", "Customers may return an unopened", "dishwasher within forty five days."]] * 2
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"notes.md": "# Notes\n\nHello.\n"})
    (tmp_path / "kb" / "scan.pdf").write_bytes(scanned_pdf(pages))
    (tmp_path / "kb" / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    from knowledge.ingest.pipeline import sync_folder

    job = sync_folder(source=source, root=tmp_path / "kb")
    rows = {f.key: f for f in job.files.all()}
    assert rows["scan.pdf"].status == "added" and rows["scan.pdf"].ocr_pages == 2
    assert rows["photo.png"].status == "skipped" and rows["photo.png"].reason.startswith("binary or media file")
    assert "notes.md" not in rows  # unchanged since the first sync: counted, not listed
    assert (job.files_total, job.unchanged) == (3, 1)
    page = client_a.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    assert "3 of 3 files" in page and JobFile.objects.filter(job=job).count() == 2


def test_the_upload_page_lists_every_format_the_extractor_reads(client_a):
    page = client_a.get("/t/acme/upload/").content.decode()
    hint = page[page.index('id="formats"') : page.index("MiB per file")]
    for name in ("Word", "Excel", "PowerPoint", "OpenDocument text", "OpenDocument spreadsheet", "Markdown", "PDF",
                 "source code", "zip"):  # fmt: skip
        assert name in hint, name
    for suffix in PROSE_TYPES:
        assert suffix in hint, suffix


def _multipart(files: list[tuple[str, bytes]], fields: dict[str, str] | None = None) -> tuple[bytes, str]:
    """A multipart body with the file names exactly as given (Django's test client keeps only their last part)."""
    boundary = "ragsite-test-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in (fields or {}).items()]  # fmt: skip
    for name, data in files:
        head = (f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
                "Content-Type: text/markdown\r\n\r\n")  # fmt: skip
        parts.append(head.encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_a_name_django_strips_is_still_reported_as_sent_over_rest_and_on_the_page(
    tenant_a, client_a, django_capture_on_commit_callbacks
):
    """Issue 50: `../../evil.md` was stored as `evil.md` with no notice (Django strips a name's folder parts before
    the application sees it); a name Django drops ("..") vanished from the upload."""
    from rest_framework.test import APIClient

    from knowledge.models import Source
    from tenants.services import api_key_issue

    source = Source.objects.create(tenant=tenant_a, kind="upload", name="inbox", label="inbox",
                                   source_id="src:acme:upload:inbox")  # fmt: skip
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    body, content_type = _multipart([("../../evil.md", b"# Evil\n\nNot so evil.\n"), ("..", b"# Dots\n\nDots.\n")])
    with django_capture_on_commit_callbacks(execute=True):
        sent = api.generic("POST", f"/api/v1/tenants/acme/sources/{source.public_id}/upload/", body,
                           content_type=content_type)  # fmt: skip
    assert sent.status_code == 202, sent.content
    job = IngestJob.objects.get(public_id=sent.json()["id"])
    rows = {f.key: f for f in job.files.all()}
    assert rows["evil.md"].sent_as == "../../evil.md" and "folder parts" in rows["evil.md"].notice
    assert rows[".."].status == "failed"  # refused by name, not lost
    page = client_a.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    assert "stored as evil.md: the name had folder parts" in page and "../../evil.md" in page

    body, content_type = _multipart([("notes/../../page.md", b"# Page\n\nFrom the page.\n")],
                                    {"csrfmiddlewaretoken": "", "source": str(source.public_id)})  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        client_a.generic("POST", "/t/acme/upload/", body, content_type=content_type)
    renamed = JobFile.objects.get(key="page.md")
    assert renamed.sent_as == "notes/../../page.md" and "folder parts" in renamed.notice


def test_a_reason_the_ingestion_wrote_is_shown_in_the_readers_language_with_the_parsers_words_kept(
    tenant_a, client_a, django_capture_on_commit_callbacks
):
    """Issue 67's rough edge: English reasons on the Spanish pages. The ingestion records its reasons once, in
    English; the page puts its own into words, and what a parser said inside one stays as it was, marked English."""
    job = _run(tenant_a, BATCH, django_capture_on_commit_callbacks)
    client_a.cookies["django_language"] = "es"
    page = client_a.get(f"/t/acme/jobs/{job.public_id}/", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert 'El PDF está dañado o no es un PDF (<span lang="en">' in page and "Vacío: no hay texto que indexar." in page
    assert "The PDF is damaged" not in page
    client_a.cookies["django_language"] = "en"
    assert "The PDF is damaged or not a PDF (<span" in client_a.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    from tenants.services import api_key_issue

    api_key_issue(tenant=tenant_a, name="bot", scope="read")  # the audit log records "scope read, acts for tenant"
    assert "scope <code>read</code>, acts for <code>tenant</code>" in client_a.get("/t/acme/keys/").content.decode()
    client_a.cookies["django_language"] = "es"
    keys = client_a.get("/t/acme/keys/", HTTP_ACCEPT_LANGUAGE="es").content.decode()
    assert "alcance <code>read</code>, actúa por <code>tenant</code>" in keys and "acts for" not in keys
