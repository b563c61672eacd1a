from __future__ import annotations

import io
from pathlib import Path

import pytest
from pypdf import PdfWriter

from knowledge.ingest.extraction import ExtractionError, NeedsOCR, extract, glued_ratio
from knowledge.ingest.walker import Skip, WalkedFile, walk

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def test_every_gitignore_in_the_tree_applies_with_negations(tmp_path):
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("!keep.log\ngenerated/\n")
    (tmp_path / "a.log").write_text("x")
    (tmp_path / "sub" / "keep.log").write_text("kept")
    (tmp_path / "sub" / "drop.log").write_text("x")
    (tmp_path / "sub" / "generated").mkdir()
    (tmp_path / "sub" / "generated" / "out.md").write_text("x")
    (tmp_path / "sub" / "real.md").write_text("real")
    entries = list(walk(tmp_path, max_bytes=1024))
    files = {e.key for e in entries if isinstance(e, WalkedFile)}
    skips = {e.key: e.reason for e in entries if isinstance(e, Skip)}
    assert files == {"sub/keep.log", "sub/real.md"}
    assert skips["a.log"] == skips["sub/drop.log"] == "ignored by .gitignore"
    assert skips["sub/generated/"] == "ignored by .gitignore"


def test_symlinks_are_not_followed(tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("secret")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link.md").symlink_to(outside)
    entries = list(walk(tmp_path / "root", max_bytes=1024))
    assert entries == [Skip("link.md", "symbolic link (not followed)")]


def test_media_archives_and_weights_are_skipped_by_extension(tmp_path):
    for name in ("photo.png", "bundle.zip", "model.gguf", "weights.safetensors", "song.mp3"):
        (tmp_path / name).write_bytes(b"data")
    reasons = {e.key: e.reason for e in walk(tmp_path, max_bytes=1024)}
    assert all(reason.startswith("binary or media file") for reason in reasons.values()) and len(reasons) == 5


def test_html_keeps_main_text_and_headings():
    page = (
        b"<html><head><title>T &amp; C</title></head><body><nav>menu</nav><h2>Fees</h2><p>A&nbsp;fee.</p></body></html>"
    )
    extracted = extract(page, key="t.html", source_type="html")
    assert extracted.title == "T & C"
    assert "## Fees" in extracted.text and "menu" not in extracted.text and "A fee." in extracted.text


def test_titles_come_from_the_document_else_the_file_name():
    assert extract(b"---\ntitle: Front\n---\n# Heading\n", key="a.md", source_type="markdown").title == "Front"
    assert extract(b"intro\n\n# Real Title\n", key="a.md", source_type="markdown").title == "Real Title"
    assert extract(b"plain words", key="dir/notes.txt", source_type="text").title == "notes.txt"


def test_text_is_nfkc_normalised_so_ligatures_are_searchable():
    assert extract("e\ufb03cient".encode(), key="a.txt", source_type="text").text == "efficient"


def test_a_real_pdf_gives_pages_and_its_metadata_title():
    extracted = extract((FIXTURES / "handbook.pdf").read_bytes(), key="h.pdf", source_type="pdf")
    assert extracted.title == "Warranty Handbook"
    assert [p.number for p in extracted.pages] == [1, 2]
    assert extracted.text[extracted.pages[1].offset :].startswith("Returns")


def test_a_pdf_without_text_even_by_ocr_needs_ocr():
    with pytest.raises(NeedsOCR, match="not even by OCR"):  # blank pages: Tesseract finds nothing either
        extract((FIXTURES / "scanned.pdf").read_bytes(), key="s.pdf", source_type="pdf")


@pytest.mark.parametrize("data", [b"", b"not a pdf at all", (FIXTURES / "handbook.pdf").read_bytes()[:300]])
def test_broken_pdfs_raise_a_clear_error(data):
    with pytest.raises(ExtractionError):
        extract(data, key="b.pdf", source_type="pdf")


def test_a_password_protected_pdf_is_reported():
    writer = PdfWriter(clone_from=str(FIXTURES / "handbook.pdf"))
    writer.encrypt("secret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(ExtractionError, match="password|encrypted"):
        extract(buffer.getvalue(), key="locked.pdf", source_type="pdf")


def test_glued_text_is_detected():
    assert glued_ratio("Estonoconservaelentornodelusuarioactual y más") > 0.5
    assert glued_ratio("This text has normal spacing between its words.") == 0


def test_non_utf8_bytes_are_refused_for_text():
    with pytest.raises(ExtractionError, match="UTF-8"):
        extract("año".encode("latin-1"), key="a.txt", source_type="text")


def test_words_run_together_by_pypdf_are_separated_again():
    # A font that declares a very wide space: pypdf's default mode then drops every word gap
    # ("Estonoconservaelentorno…"), as it does on Debian's xdvipdfmx-built reference manual.
    from pypdf import PdfReader

    data = (FIXTURES / "glued.pdf").read_bytes()
    assert "Estonoconserva" in PdfReader(io.BytesIO(data)).pages[0].extract_text()
    extracted = extract(data, key="glued.pdf", source_type="pdf")
    assert extracted.text.startswith("Esto no conserva el entorno del usuario actual")
    assert glued_ratio(extracted.text) == 0
    assert not any("still have words run together" in warning for warning in extracted.warnings)


def test_an_html_table_is_kept_as_a_table_and_a_long_one_repeats_its_header_in_every_chunk():
    from knowledge.ingest.chunkers import chunk_documental

    rows = "".join(f"<tr><td>R-{n}</td><td>Gi1/0/{n}</td></tr>" for n in range(1, 121))
    page = (
        f"<html><body><h1>Network</h1><table><tr><th>Server</th><th>Switch port</th></tr>{rows}</table></body></html>"
    )
    extracted = extract(page.encode(), key="network.html", source_type="html")
    assert "| Server | Switch port |\n|---|---|\n| R-1 | Gi1/0/1 |" in extracted.text
    parts = [d.text for d in chunk_documental(extracted.text, source_type="html") if "| R-" in d.text]
    assert len(parts) >= 2 and all("| Server | Switch port |\n|---|---|" in part for part in parts)
    assert any("| R-120 | Gi1/0/120 |" in part for part in parts)


def test_blocks_inside_a_table_cell_stay_in_the_cell():
    page = (
        "<table><tr><th>Option</th><th>Meaning</th></tr><tr><td><h3>-y</h3></td><td><p>Assume yes.</p>"
        "<ul><li>Also for prompts.</li></ul>Line<br>two</td></tr></table><p>After the table.</p>"
    )
    text = extract(page.encode(), key="t.html", source_type="html").text
    assert "| -y | Assume yes. Also for prompts. Line two |" in text
    assert "#" not in text and "- " not in text and text.rstrip().endswith("After the table.")
