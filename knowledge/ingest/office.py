"""Office Open XML and OpenDocument files → Markdown-shaped text with its structure (one job: these formats).

Word / Writer headings become Markdown headings (so chunks carry their heading path), tables become Markdown
tables, comments are text too. A PowerPoint / Impress slide is a page: its number is the chunk's `page`, its
title the heading, its speaker notes follow its text. A spreadsheet sheet is a heading, and every row is written
with its column headers ("Port: Gi1/0/17; Server: R-117"), so a row found alone still says what each value is;
cell comments follow their row. Libraries: python-docx, python-pptx, openpyxl, odfpy (docs/ingestion.md says why).

They are zip containers: the declared uncompressed size and the compression ratio are checked before any
library opens one (the limits of uploaded zips), so a zip bomb is refused, not expanded. A password-protected
OOXML file is an OLE container, not a zip: it gets that reason.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from knowledge.ingest.tables import Table, sheet_table

OFFICE_TYPES = {".docx": "docx", ".xlsx": "xlsx", ".pptx": "pptx", ".odt": "odt", ".ods": "ods", ".odp": "odp"}
PAGED_OFFICE = {"pptx", "odp", "xlsx", "ods"}  # a slide or a sheet per level-1 heading: each starts a chunk
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
XLSX_FULL_LOAD_BYTES = 32 * 2**20  # past this much XML a workbook is streamed (openpyxl's read-only mode)
MIN_RATIO_CHECK_BYTES = 2**20  # small files may compress well; the ratio only counts past a MiB expanded


class OfficeError(Exception):
    """Why the file cannot be read, in plain words (extraction turns it into an ExtractionError)."""


@dataclass
class OfficeText:
    text: str
    title: str = ""
    page_offsets: list[int] = field(default_factory=list)  # slides: where slide n + 1 starts in text
    tables: list[Table] = field(default_factory=list)  # a workbook's sheets as tables (knowledge/ingest/tables.py)


def check_container(data: bytes, *, max_unzipped: int, max_ratio: int) -> None:
    if data[:8] == OLE_MAGIC:
        raise OfficeError(
            "The file is password-protected (encrypted) or in a legacy binary Office format; save it without a "
            "password as .docx, .xlsx or .pptx."
        )
    try:
        bundle = zipfile.ZipFile(io.BytesIO(data))
        members = bundle.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise OfficeError(f"The file is not a readable Office document (its zip container is broken: {exc}).") from exc
    declared = sum(member.file_size for member in members)
    if declared > max_unzipped:
        raise OfficeError(f"The document would expand to {declared // 2**20} MiB; the limit is "
                          f"{max_unzipped // 2**20} MiB.")  # fmt: skip
    if declared > MIN_RATIO_CHECK_BYTES and declared > max_ratio * max(1, len(data)):
        raise OfficeError(f"The document's compression ratio is above {max_ratio}:1 (possible zip bomb).")


def extract_office(data: bytes, source_type: str) -> OfficeText:
    reader = {"docx": _docx, "xlsx": _xlsx, "pptx": _pptx, "odt": _odt, "ods": _ods, "odp": _odp}[source_type]
    try:
        return reader(data)
    except OfficeError:
        raise
    except Exception as exc:  # a library's own error on a corrupt part: a reason, never a crash of the batch
        raise OfficeError(f"The {source_type} file could not be read ({type(exc).__name__}: {exc}).") from exc


# --- shared shapes ---------------------------------------------------------------------------------------------
def _cell(text: object) -> str:
    return " ".join(str(text if text is not None else "").split()).replace("|", "\\|")


def markdown_table(rows: list[list[str]]) -> str:
    """Rows of cell texts as a Markdown table, the first row its header."""
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    rows = [[_cell(c) for c in row] + [""] * (width - len(row)) for row in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def sheet_records(name: str, rows: list[list[str]], notes: dict[int, list[str]] | None = None,
                  numbers: list[int] | None = None) -> str:  # fmt: skip
    """A sheet as a heading and one line a row: its row number as the spreadsheet shows it (`numbers`, else the
    position, the header being row 1) and each value with its column header; notes: per row index."""
    numbered = list(zip(numbers or range(1, len(rows) + 1), ([_cell(c) for c in row] for row in rows), strict=False))
    kept = [(number, row) for number, row in numbered if any(row)]
    out = [f"# {name}"]
    if not kept:
        return out[0]
    header = [h or f"Column {i + 1}" for i, h in enumerate(kept[0][1])]
    out.append("Columns: " + "; ".join(header))
    for index, (number, row) in enumerate(kept[1:], 1):
        pairs = [f"{header[i] if i < len(header) else f'Column {i + 1}'}: {value}" for i, value in enumerate(row)
                 if value]  # fmt: skip
        line = f"- Row {number}: " + "; ".join(pairs)
        for note in (notes or {}).get(index, []):
            line += f" (comment: {note})"
        out.append(line)
    return "\n".join(out)


def _join(blocks: Iterable[str]) -> str:
    return "\n\n".join(block.strip() for block in blocks if block and block.strip())


# --- Word ------------------------------------------------------------------------------------------------------
def _docx(data: bytes) -> OfficeText:
    import docx
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            blocks.append(markdown_table([[cell.text for cell in row.cells] for row in item.rows]))
            continue
        text = item.text.strip()
        style = (item.style.name if item.style is not None else "") or ""
        if not text:
            continue
        if style == "Title":
            blocks.append(f"# {text}")
        elif style.startswith("Heading") and style.split()[-1].isdigit():
            blocks.append("#" * min(6, int(style.split()[-1])) + f" {text}")
        elif "List" in style:
            blocks.append(f"- {text}")
        else:
            blocks.append(text)
    comments = [c.text.strip() for c in getattr(document, "comments", []) if c.text.strip()]
    if comments:
        blocks.append("Comments:\n" + "\n".join(f"- {c}" for c in comments))
    return OfficeText(_join(blocks), title=(document.core_properties.title or "").strip())


# --- Excel -----------------------------------------------------------------------------------------------------
def _xlsx(data: bytes) -> OfficeText:
    import openpyxl

    # Values as last computed, not formulas. A large workbook is streamed (read-only mode: memory stays flat, but
    # cell comments are not available there); a small one is loaded whole, comments included.
    declared = sum(member.file_size for member in zipfile.ZipFile(io.BytesIO(data)).infolist())
    streamed = declared > XLSX_FULL_LOAD_BYTES
    book = openpyxl.load_workbook(io.BytesIO(data), data_only=True, read_only=streamed)
    sheets, tables = [], []
    for sheet in book.worksheets:
        rows, notes, numbers = [], {}, []
        for number, row in enumerate(sheet.iter_rows(), sheet.min_row or 1):
            if not any(cell.value is not None for cell in row):
                continue
            rows.append(["" if cell.value is None else str(cell.value) for cell in row])
            numbers.append(number)
            found = [cell.comment.text.strip() for cell in row if getattr(cell, "comment", None) is not None]
            if found:
                notes[len(rows) - 1] = found
        sheets.append(sheet_records(f"Sheet {sheet.title}", rows, notes, numbers))
        tables.append(sheet_table(f"Sheet {sheet.title}", rows, numbers))
    title = (book.properties.title or "").strip()
    book.close()
    return OfficeText(_join(sheets), title=title, tables=[t for t in tables if t is not None])


# --- PowerPoint ------------------------------------------------------------------------------------------------
def _pptx(data: bytes) -> OfficeText:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(data))
    slides = []
    for number, slide in enumerate(deck.slides, 1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        blocks = [f"# {title or f'Slide {number}'}"]
        for shape in slide.shapes:
            if shape is title_shape:
                continue
            if getattr(shape, "has_table", False) and shape.has_table:
                blocks.append(markdown_table([[cell.text for cell in row.cells] for row in shape.table.rows]))
            elif shape.has_text_frame and shape.text_frame.text.strip():
                blocks.append(shape.text_frame.text)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                blocks.append(f"Speaker notes: {notes}")
        slides.append(_join(blocks))
    return _paged(slides, title=(deck.core_properties.title or "").strip())


def _paged(pages: list[str], *, title: str) -> OfficeText:
    text, offsets = "", []
    for page in pages:
        offsets.append(len(text))
        text += page + "\n\n"
    return OfficeText(text.rstrip(), title=title, page_offsets=offsets)


# --- OpenDocument ----------------------------------------------------------------------------------------------
def _odf_nodes(node) -> Iterator:
    for child in node.childNodes:
        if child.nodeType == child.ELEMENT_NODE:
            yield child


def _odf_text(node) -> str:
    from odf import teletype

    return " ".join(teletype.extractText(node).split())


def _odf_table_rows(table) -> list[list[str]]:
    rows = []
    for row in table.getElementsByType(_odf_class("table", "TableRow")):
        cells = []
        for cell in _odf_nodes(row):
            if cell.qname[1] not in ("table-cell", "covered-table-cell"):
                continue
            repeat = int(cell.getAttribute("numbercolumnsrepeated") or 1)
            cells += [_odf_text(cell)] * min(repeat, 64)  # an empty run to the sheet's edge is not 16,384 cells
        while cells and not cells[-1]:
            cells.pop()
        rows.append(cells)
    return rows


def _odf_class(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(f"odf.{module}"), name)


def _odf_blocks(parent) -> Iterator[str]:
    for node in _odf_nodes(parent):
        kind = node.qname[1]
        if kind == "h":
            level = int(node.getAttribute("outlinelevel") or 1)
            yield "#" * min(6, level) + " " + _odf_text(node)
        elif kind == "p":
            yield _odf_text(node)
        elif kind == "list":
            for item in node.getElementsByType(_odf_class("text", "ListItem")):
                yield "- " + _odf_text(item)
        elif kind == "table":
            yield markdown_table(_odf_table_rows(node))
        elif kind == "section":
            yield from _odf_blocks(node)


def _odf_title(document) -> str:
    titles = document.meta.getElementsByType(_odf_class("dc", "Title"))
    return _odf_text(titles[0]) if titles else ""


def _odt(data: bytes) -> OfficeText:
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    return OfficeText(_join(_odf_blocks(document.text)), title=_odf_title(document))


def _ods(data: bytes) -> OfficeText:
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    found = [(f"Sheet {table.getAttribute('name')}", _odf_table_rows(table))
             for table in document.spreadsheet.getElementsByType(_odf_class("table", "Table"))]  # fmt: skip
    tables = [sheet_table(name, rows, list(range(1, len(rows) + 1))) for name, rows in found]
    return OfficeText(_join(sheet_records(name, rows) for name, rows in found), title=_odf_title(document),
                      tables=[t for t in tables if t is not None])  # fmt: skip


def _odp(data: bytes) -> OfficeText:
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    slides = []
    for number, page in enumerate(document.presentation.getElementsByType(_odf_class("draw", "Page")), 1):
        title, blocks, notes = "", [], ""
        for frame in (node for node in _odf_nodes(page) if node.qname[1] == "frame"):  # not the notes' frames
            text = "\n".join(_odf_text(p) for p in frame.getElementsByType(_odf_class("text", "P")))
            if frame.getAttribute("class") == "title" and not title:
                title = " ".join(text.split())
            elif text.strip():
                blocks.append(text)
        for note in page.getElementsByType(_odf_class("presentation", "Notes")):
            notes = " ".join(_odf_text(p) for p in note.getElementsByType(_odf_class("text", "P"))).strip()
        slides.append(_join([f"# {title or f'Slide {number}'}", *blocks, f"Speaker notes: {notes}" if notes else ""]))
    return _paged(slides, title=_odf_title(document))
