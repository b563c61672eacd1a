"""Word, Excel, PowerPoint and OpenDocument files, made here by the libraries that write them, ingested for real
(extraction, chunking, the packaged embedder, Qdrant Edge) and found through retrieval with their structure."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from knowledge.ingest import pipeline
from knowledge.models import Document, Status
from knowledge.search.retrieval import retrieve
from tenants.principals import Viewer

FILLER = " ".join(f"Paragraph {i} of this section describes how the company works in some detail." for i in range(25))


def write_docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Employee handbook"
    document.add_heading("Employee handbook", level=0)
    document.add_paragraph(FILLER)
    document.add_heading("Travel", level=1)
    document.add_paragraph(FILLER)
    document.add_heading("Per diem", level=2)
    document.add_paragraph("Staff travelling abroad receive a per diem of 85 euros for meals.")
    table = document.add_table(rows=3, cols=2)
    for row, values in zip(table.rows, [("Country", "Hotel cap"), ("France", "140 EUR"), ("Japan", "21000 JPY")],
                           strict=True):  # fmt: skip
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_heading("Leave", level=1)
    document.add_paragraph(FILLER)
    document.add_paragraph("Parental leave lasts sixteen weeks at full pay.")
    document.save(path)


def write_xlsx(path: Path) -> None:
    import openpyxl
    from openpyxl.comments import Comment

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Rack A"
    sheet.append(["Server", "Switch port", "VLAN"])
    for n in range(100, 130):
        sheet.append([f"R-{n}", f"Gi1/0/{n - 99}", 20 + n % 3])
    sheet["B19"].comment = Comment("Moved from Gi2/0/5 during the March upgrade", "ops")
    prices = book.create_sheet("Prices")
    prices.append(["Product", "Price"])
    prices.append(["Widget Pro", 49.5])
    book.save(path)


def write_pptx(path: Path) -> None:
    from pptx import Presentation

    deck = Presentation()
    for title, body, notes in [
        ("Welcome aboard", "Your first week at Acme.", ""),
        ("Security basics", "Badges must be worn visibly at all times.", "Remind them the lobby guard checks badges."),
        ("Your laptop", "IT hands out laptops on Tuesday mornings in room 4.12.", ""),
    ]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    deck.save(path)


def write_odt(path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P

    document = OpenDocumentText()
    document.text.addElement(H(outlinelevel=1, text="Data protection policy"))
    document.text.addElement(P(text=FILLER))
    document.text.addElement(H(outlinelevel=2, text="Retention"))
    document.text.addElement(P(text="Customer invoices are kept for ten years, then deleted."))
    document.save(str(path))


@pytest.fixture
def office_folder(tmp_path: Path) -> Path:
    root = tmp_path / "company"
    root.mkdir()
    write_docx(root / "handbook.docx")
    write_xlsx(root / "network.xlsx")
    write_pptx(root / "onboarding.pptx")
    write_odt(root / "policy.odt")
    (root / "old.doc").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    (root / "locked.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)  # an encrypted OOXML
    (root / "broken.xlsx").write_bytes(b"PK\x03\x04 this is not really a workbook")
    return root


def _sync(tenant, root: Path):  # type: ignore[no-untyped-def]
    source = pipeline.folder_source_get_or_create(tenant=tenant, name="company", path=root)
    return pipeline.sync_folder(source=source, root=root)


def _top(tenant, query: str):  # type: ignore[no-untyped-def]
    return retrieve(viewer=Viewer.everything(tenant), query=query, top_k=3)[0]


def test_each_office_format_is_found_with_its_heading_page_or_sheet(tenant_a, office_folder):
    _sync(tenant_a, office_folder)
    word = _top(tenant_a, "How much is the per diem for meals abroad?")
    assert word.chunk.document.document_key == "handbook.docx"
    assert "Travel" in word.chunk.heading and "Per diem" in word.chunk.heading
    assert Document.objects.get(document_key="handbook.docx").title == "Employee handbook"
    sheet = _top(tenant_a, "Which switch port does server R-117 use?")
    assert sheet.chunk.document.document_key == "network.xlsx" and "Rack A" in sheet.chunk.heading
    assert "Server: R-117; Switch port: Gi1/0/18" in sheet.chunk.text  # the row keeps its column headers
    assert "(comment: Moved from Gi2/0/5 during the March upgrade)" in sheet.chunk.text
    slide = _top(tenant_a, "When does IT hand out laptops?")
    assert slide.chunk.document.document_key == "onboarding.pptx"
    assert slide.chunk.page == 3 and "Your laptop" in slide.chunk.heading
    notes = _top(tenant_a, "Who checks the badges in the lobby?")
    assert notes.chunk.page == 2 and "Speaker notes: Remind them the lobby guard checks badges." in notes.chunk.text
    odt = _top(tenant_a, "How long are customer invoices kept?")
    assert odt.chunk.document.document_key == "policy.odt" and "Retention" in odt.chunk.heading


def test_legacy_encrypted_and_corrupt_office_files_get_a_reason_and_never_stop_the_batch(tenant_a, office_folder):
    job = _sync(tenant_a, office_folder)
    assert {s["key"]: s["reason"] for s in job.skips}["old.doc"] == (
        "legacy binary Office format (.doc): save it as .docx to ingest it"
    )
    errors = {e["key"]: e["error"] for e in job.errors}
    assert "password-protected" in errors["locked.docx"]
    assert "not a readable Office document" in errors["broken.xlsx"]
    assert job.added == 4 and job.failed == 2  # the good ones were ingested all the same
    assert Document.objects.filter(document_key="handbook.docx", status=Status.ACTIVE).exists()


def test_an_office_file_that_would_expand_past_the_limit_is_refused_before_it_is_opened(settings):
    from knowledge.ingest.extraction import ExtractionError, extract

    settings.RAG_MAX_UNZIPPED_BYTES = 5 * 2**20
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("[Content_Types].xml", "<Types/>")
        bundle.writestr("word/document.xml", b"<w:document>" + b" " * (8 * 2**20) + b"</w:document>")
    with pytest.raises(ExtractionError, match="would expand to 8 MiB; the limit is 5 MiB"):
        extract(buffer.getvalue(), key="bomb.docx", source_type="docx")


def test_office_files_uploaded_alone_or_inside_a_zip_are_ingested(
    tenant_a, tmp_path, django_capture_on_commit_callbacks
):
    from knowledge.services import upload_enqueue

    write_pptx(tmp_path / "onboarding.pptx")
    write_xlsx(tmp_path / "network.xlsx")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.write(tmp_path / "network.xlsx", "it/network.xlsx")
    uploads = [("onboarding.pptx", (tmp_path / "onboarding.pptx").read_bytes()), ("it.zip", archive.getvalue())]
    with django_capture_on_commit_callbacks(execute=True):
        job = upload_enqueue(tenant=tenant_a, source=None, uploads=uploads)
    job.refresh_from_db()
    assert job.errors == [] and job.skips == []
    assert _top(tenant_a, "Which switch port does server R-117 use?").chunk.document.document_key == "it/network.xlsx"
    assert _top(tenant_a, "When does IT hand out laptops?").page == 3


def test_a_large_workbook_is_streamed_with_its_rows_under_their_headers(tmp_path, monkeypatch):
    from knowledge.ingest import office

    write_xlsx(tmp_path / "network.xlsx")
    monkeypatch.setattr(office, "XLSX_FULL_LOAD_BYTES", 0)  # every workbook counts as large
    text = office.extract_office((tmp_path / "network.xlsx").read_bytes(), "xlsx").text
    assert "- Row 19: Server: R-117; Switch port: Gi1/0/18; VLAN: 20" in text and "# Sheet Prices" in text
    assert "comment" not in text  # read-only mode has no comments: the price of flat memory


def test_a_word_tables_hits_carry_the_section_it_sits_in_not_the_documents_title(tenant_a, tmp_path):
    """Issue 50: a short Word file is one chunk, named by its first heading (the title); its table's rows were found
    under "Price handbook" instead of the section that holds them."""
    import docx

    document = docx.Document()
    document.core_properties.title = "Price handbook"
    document.add_heading("Price handbook", 0)
    document.add_heading("Shipping", 1)
    document.add_paragraph("Shipping costs depend on the zone of the address.")
    document.add_heading("Zone prices", 2)
    table = document.add_table(rows=3, cols=2)
    for row, cells in zip(table.rows, (("Zone", "Price"), ("North", "12 EUR"), ("South", "15 EUR")), strict=True):
        row.cells[0].text, row.cells[1].text = cells
    document.add_heading("Returns", 1)
    document.add_paragraph("Returns are accepted within thirty days.")
    root = tmp_path / "prices"
    root.mkdir()
    document.save(root / "prices.docx")
    _sync(tenant_a, root)
    hit = _top(tenant_a, "price of the North zone")
    assert "| North | 12 EUR |" in hit.chunk.text and hit.chunk.heading == "Shipping › Zone prices"
    assert _top(tenant_a, "shipping costs depend on the zone").chunk.heading == "Price handbook"
