"""Scanned PDFs, made here as page images without a text layer, read by the real Tesseract (spa+eng)."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from knowledge.ingest import pipeline, prepare
from knowledge.ingest.extraction import NeedsOCR, extract
from knowledge.ingest.ocr import installed_languages, ocr_pdf_pages
from knowledge.models import Document, IngestJob
from knowledge.search.retrieval import retrieve
from tenants.principals import Viewer
from tests.factories import scanned_pdf

pytestmark = pytest.mark.skipif(
    not {"eng", "spa"} <= installed_languages(), reason="needs Tesseract with eng and spa (scripts/_ocr.sh)"
)


SPANISH = ["Política de garantía", "La garantía del lavavajillas cubre", "tres años de piezas y mano de obra."]
ENGLISH = ["Returns policy", "Customers may return an unopened", "dishwasher within forty five days."]


def test_a_scanned_pdf_is_read_by_ocr_and_each_page_is_found_with_its_number(tenant_a, tmp_path: Path):
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "policies.pdf").write_bytes(scanned_pdf([SPANISH, ENGLISH]))
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="scans", path=folder)
    job = pipeline.sync_folder(source=source, root=folder)
    assert job.failed == 0 and job.added == 1
    spanish = retrieve(
        viewer=Viewer.everything(tenant_a), query="¿Cuántos años cubre la garantía del lavavajillas?", top_k=1
    )[0]
    assert spanish.page == 1 and "tres años" in spanish.chunk.text  # accents read with the Spanish data
    english = retrieve(
        viewer=Viewer.everything(tenant_a), query="Within how many days can a dishwasher be returned?", top_k=1
    )[0]
    assert english.page == 2 and "forty five days" in english.chunk.text
    document = Document.objects.get(document_key="policies.pdf")
    assert document.chunks.exists()


def test_a_page_ocr_cannot_read_is_a_recorded_reason_and_a_blank_scan_needs_ocr():
    data = scanned_pdf([ENGLISH, []])  # the second page is blank paper
    extracted = extract(data, key="mixed.pdf", source_type="pdf")
    assert "forty five days" in extracted.text
    assert any("page 2: OCR found no text" in warning for warning in extracted.warnings)
    with pytest.raises(NeedsOCR, match="not even by OCR"):
        extract(scanned_pdf([[]]), key="blank.pdf", source_type="pdf")


def test_ocr_languages_are_checked_where_they_are_used():
    with pytest.raises(NeedsOCR, match="is not a list of Tesseract language codes"):
        extract(scanned_pdf([ENGLISH]), key="x.pdf", source_type="pdf", ocr_languages="eng;rm -rf /")


def test_the_job_says_which_scanned_page_it_is_reading_and_a_later_save_does_not_erase_it(tenant_a, client_a):
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="scans", path=Path("/nonexistent"))
    job = IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.UPLOAD)
    prepare.prepare_text(source, "returns.pdf", scanned_pdf([ENGLISH, SPANISH]), "auto", job=job)
    job.documents_done = 1
    job.save()  # the job's own thread saves its counts with a stale activity in memory
    job.refresh_from_db()
    assert job.activity == "Reading returns.pdf with OCR: 2 of 2 scanned pages read"
    page = client_a.get(f"/t/{tenant_a.slug}/jobs/{job.public_id}/progress/").content.decode()
    assert "Reading returns.pdf with OCR: 2 of 2 scanned pages read" in page
    api = client_a.get(f"/api/v1/tenants/{tenant_a.slug}/jobs/{job.public_id}/").json()
    assert api["progress"]["activity"] == job.activity


def test_a_crash_of_the_ocr_process_fails_the_pages_it_had_not_read_and_the_caller_goes_on():
    def kill_the_child_after_the_first_page(done: int, total: int) -> None:
        if done != 1:
            return
        for entry in Path("/proc").iterdir():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"knowledge.ingest.ocr" in command and parent == os.getpid():
                os.kill(int(entry.name), signal.SIGKILL)

    result = ocr_pdf_pages(scanned_pdf([ENGLISH, SPANISH, ENGLISH]), [1, 2, 3], languages="spa+eng",
                           progress=kill_the_child_after_the_first_page)  # fmt: skip
    assert "forty five days" in result.texts[1]
    assert set(result.failures) == {2, 3}
    assert "the OCR process stopped (exit code -9" in result.failures[3]


def test_a_scan_that_fails_in_a_sync_is_read_once_and_its_reason_recorded(tenant_a, tmp_path: Path, caplog):
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "blank.pdf").write_bytes(scanned_pdf([[]]))
    (folder / "notes.md").write_text("# Notes\n\nThe warehouse opens at seven.\n")
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="scans", path=folder)
    with caplog.at_level(logging.INFO, logger="knowledge.ingest.prepare"):
        job = pipeline.sync_folder(source=source, root=folder)
    assert job.added == 1 and job.failed == 1
    assert "not even by OCR" in job.errors[0]["error"] and "OCR found no text" in job.errors[0]["error"]
    assert sum("OCR blank.pdf: 0 of 1 pages read" in r.getMessage() for r in caplog.records) == 1
