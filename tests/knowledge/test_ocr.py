"""Scanned PDFs, made here as page images without a text layer, read by the real Tesseract (spa+eng)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from knowledge import pipeline
from knowledge.extraction import NeedsOCR, extract
from knowledge.models import Document
from knowledge.ocr import installed_languages
from knowledge.retrieval import retrieve

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
pytestmark = pytest.mark.skipif(
    not {"eng", "spa"} <= installed_languages(), reason="needs Tesseract with eng and spa (scripts/_ocr.sh)"
)


def page_image(lines: list[str]) -> Image.Image:
    image = Image.new("L", (1700, 2200), 255)  # A4-ish at 200 dpi
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(FONT, 40)
    for n, line in enumerate(lines):
        draw.text((150, 200 + n * 70), line, fill=0, font=font)
    return image


def scanned_pdf(pages: list[list[str]]) -> bytes:
    images = [page_image(lines) for lines in pages]
    buffer = io.BytesIO()
    images[0].save(buffer, format="PDF", save_all=True, append_images=images[1:], resolution=200)
    return buffer.getvalue()


SPANISH = ["Política de garantía", "La garantía del lavavajillas cubre", "tres años de piezas y mano de obra."]
ENGLISH = ["Returns policy", "Customers may return an unopened", "dishwasher within forty five days."]


def test_a_scanned_pdf_is_read_by_ocr_and_each_page_is_found_with_its_number(tenant_a, tmp_path: Path):
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "policies.pdf").write_bytes(scanned_pdf([SPANISH, ENGLISH]))
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="scans", path=folder)
    job = pipeline.sync_folder(source=source, root=folder)
    assert job.failed == 0 and job.added == 1
    spanish = retrieve(tenant=tenant_a, query="¿Cuántos años cubre la garantía del lavavajillas?", top_k=1)[0]
    assert spanish.page == 1 and "tres años" in spanish.chunk.text  # accents read with the Spanish data
    english = retrieve(tenant=tenant_a, query="Within how many days can a dishwasher be returned?", top_k=1)[0]
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
