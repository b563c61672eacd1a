"""Bytes → text with a location map (the only pypdf import).

Every extractor returns `Extracted`: NFKC-normalised text (ligatures such as 'ﬁ' unfolded), a
title taken from the document when it has one, and for PDFs the character offset where each page
starts, so chunks can carry page numbers.
"""

from __future__ import annotations

import html
import io
import logging
import re
import threading
import unicodedata
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import PurePosixPath

from knowledge.ingest.boilerplate import is_navigation_element, is_navigation_line, strip_running_lines
from knowledge.ingest.metadata import split_frontmatter
from knowledge.ingest.office import OFFICE_TYPES, OfficeError, check_container, extract_office, markdown_table
from knowledge.ingest.tables import Table, delimited_table, markdown_tables

logger = logging.getLogger(__name__)

MIN_PAGE_CHARS = 20  # a page with less text than this is taken as an image (scanned) page


class ExtractionError(Exception):
    """The document cannot be read; the message says why, in plain words."""


class EmptyDocument(ExtractionError):
    """The file holds no text at all (only whitespace): skipped with the reason "empty", not a failure."""


class NeedsOCR(ExtractionError):
    """A PDF without text on any page, even by OCR (Tesseract missing, or nothing it could read)."""


@dataclass
class Page:
    number: int  # physical, 1-based
    label: str  # the printed page label ('iv', 'T-1'), may differ from number
    offset: int  # where the page's text starts in Extracted.text


@dataclass
class Extracted:
    text: str
    title: str
    pages: list[Page] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ocr_pages: int = 0  # pages whose text OCR read
    tables: list[Table] = field(default_factory=list)  # its tables as tables (knowledge/ingest/tables.py)


def normalise_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\x00", "").replace("\u00ad", "")  # NUL and soft hyphens
    return re.sub(r"[ \t]+\n", "\n", text)


def extract(data: bytes, *, key: str, source_type: str, ocr_languages: str = "spa+eng", progress=None) -> Extracted:
    """`progress(done, total)` is called after each page OCR reads (a scanned PDF takes seconds a page)."""
    if source_type == "pdf":
        return extract_pdf(data, key=key, ocr_languages=ocr_languages, progress=progress)
    if source_type == "image":
        return extract_image(data, key=key, ocr_languages=ocr_languages)
    if source_type in OFFICE_TYPES.values():
        return extract_office_document(data, key=key, source_type=source_type)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExtractionError("The file is not valid UTF-8 text.") from exc
    if "\x00" in text[:8192]:
        raise ExtractionError("The file looks binary, not text.")
    text = text.lstrip("\ufeff")
    if source_type == "html":
        return extract_html(text, key=key)
    text = normalise_text(text)
    title = _title_from_text(text, source_type) or _title_from_key(key)
    if source_type == "markdown":
        text = without_frontmatter(text)
    return Extracted(text=text, title=title, tables=_text_tables(text, key=key, source_type=source_type, title=title))


def _text_tables(text: str, *, key: str, source_type: str, title: str) -> list[Table]:
    """A CSV or TSV file is one table; Markdown holds pipe tables."""
    suffix = PurePosixPath(key).suffix.lower()
    if suffix in (".csv", ".tsv"):
        found = delimited_table(text, title, "\t" if suffix == ".tsv" else ",")
        return [found] if found is not None else []
    return markdown_tables(text, title) if source_type == "markdown" else []


def without_frontmatter(text: str) -> str:
    """A Markdown file's text without its frontmatter: metadata (knowledge/ingest/metadata.py reads it from the
    file), not text to chunk, show or cite, and its closing `---` would make its last line a heading. Each line of
    the header becomes an empty one, so the body's line numbers stay the file's."""
    header, body = split_frontmatter(text)
    return "\n" * header.count("\n") + body if header else text


def extract_office_document(data: bytes, *, key: str, source_type: str) -> Extracted:
    """Word, Excel, PowerPoint and OpenDocument files (knowledge/ingest/office.py), with the limits of uploaded zips."""
    from knowledge.ingest.uploads import MAX_COMPRESSION_RATIO, max_unzipped_bytes

    try:
        check_container(data, max_unzipped=max_unzipped_bytes(), max_ratio=MAX_COMPRESSION_RATIO)
        office = extract_office(data, source_type)
    except OfficeError as exc:
        raise ExtractionError(str(exc)) from exc
    text = normalise_text(office.text)
    if not text.strip():
        raise EmptyDocument("The document has no text.")
    pages = [Page(number=n, label=str(n), offset=offset) for n, offset in enumerate(office.page_offsets, 1)]
    title = office.title or _title_from_text(text, "markdown") or _title_from_key(key)
    tables = office.tables or markdown_tables(text, title)  # a workbook's sheets; a document's Markdown tables
    return Extracted(text=text, title=title, pages=pages, tables=tables)


def extract_image(data: bytes, *, key: str, ocr_languages: str = "spa+eng") -> Extracted:
    """An image attachment of a vault: its text, read by OCR in the OCR child process (knowledge/ingest/ocr.py).
    An image without text (a photo, a diagram) is empty, skipped with that reason."""
    from knowledge.ingest.ocr import OCRUnavailable, ocr_image

    try:
        result = ocr_image(data, PurePosixPath(key.lower()).suffix, languages=ocr_languages)
    except OCRUnavailable as exc:
        raise NeedsOCR(f"The image needs OCR, which is not available: {exc}") from exc
    text = normalise_text(result.texts.get(1, "")).strip()
    if not text:
        reason = result.failures.get(1, "")
        if "no text" in reason or not reason:
            raise EmptyDocument("OCR found no text in the image.")
        raise ExtractionError(f"The image could not be read: {reason}")
    return Extracted(text=text, title=_title_from_key(key), pages=[Page(number=1, label="1", offset=0)],
                     warnings=[f"read by OCR ({ocr_languages})"], ocr_pages=1)  # fmt: skip


def _title_from_key(key: str) -> str:
    return PurePosixPath(key).name


def _title_from_text(text: str, source_type: str) -> str:
    lines = text.splitlines()
    if source_type == "markdown":
        fence = lines[0].strip() if lines and lines[0].strip() in ("---", "+++") else ""  # YAML or TOML header
        in_front_matter = bool(fence)
        for index, line in enumerate(lines[:200]):
            if in_front_matter:
                if index > 0 and line.strip() in (fence, "..."):
                    in_front_matter = False
                elif re.match(r"title\s*[:=]", line, re.I):
                    return re.split(r"[:=]", line, maxsplit=1)[1].strip().strip("\"'")
                continue
            match = re.match(r"^#{1,2}\s+(.+?)\s*#*\s*$", line)
            if match:
                return match.group(1)
            if index + 1 < len(lines) and line.strip() and re.match(r"^(=+|-+)\s*$", lines[index + 1]):
                return line.strip()
    if source_type == "rst":
        for index in range(min(len(lines) - 1, 200)):
            line, under = lines[index].rstrip(), lines[index + 1].rstrip()
            if line and not line[0].isspace() and re.match(r"^([=\-~^\"'`#*+])\1+$", under) and len(under) >= len(line):
                if set(line) <= set(under[0]):  # an overline, not a title
                    continue
                return line.strip()
    return ""


# --- HTML -----------------------------------------------------------------------------------
_BLOCK_TAGS = {
    "p", "div", "section", "article", "main", "header", "footer", "li", "ul", "ol", "dl", "dt", "dd", "tr",
    "table", "br", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "figure", "figcaption",
    "td", "th", "form", "fieldset", "address", "details", "summary",
}  # fmt: skip
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head", "nav", "iframe", "button", "select"}


class _HtmlText(HTMLParser):
    """Main text of an HTML page: markup, scripts, styles and navigation dropped; headings kept as Markdown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self.first_h1 = ""
        self._skip_depth = 0
        self._in_title = False
        self._heading: int | None = None
        self._heading_text: list[str] = []
        self._pre = 0
        self._tables: list[list[list[str]]] = []  # open tables (innermost last): rows of cell texts
        self._navigation: list = []  # [tag, nesting] of the navigation element being left out
        self.navigation_blocks = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if self._navigation:  # inside a navigation element: count its own nesting to find its end
            if tag == self._navigation[0]:
                self._navigation[1] += 1
            return
        if is_navigation_element(tag, attrs):
            self._navigation = [tag, 1]
            self.navigation_blocks += 1
            return
        if tag in _SKIP_TAGS:
            self._skip_depth += 1
            return
        if tag == "table":  # kept as a Markdown table: the chunker then never cuts a row and repeats the header
            self._tables.append([])
            return
        if self._tables:  # inside a table only rows and cells shape the text; a <p>, <br> or <h3> in a cell is a space
            if tag in ("tr", "td", "th"):
                rows = self._tables[-1]
                if tag == "tr" or not rows:
                    rows.append([])
                if tag != "tr":
                    rows[-1].append("")
            elif tag in _BLOCK_TAGS:
                self._cell(" ")
            return
        if tag == "pre":
            self._pre += 1
        if tag in _BLOCK_TAGS:
            self.parts.append("\n\n" if tag not in ("br", "li", "tr", "dt", "dd") else "\n")
        if re.fullmatch(r"h[1-6]", tag):
            self._heading, self._heading_text = int(tag[1]), []
            self.parts.append("#" * int(tag[1]) + " ")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if self._navigation:
            if tag == self._navigation[0]:
                self._navigation[1] -= 1
                if not self._navigation[1]:
                    self._navigation = []
            return
        if tag in _SKIP_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
            return
        if tag == "table" and self._tables:
            table = markdown_table(self._tables.pop())
            if self._tables:  # a table inside a cell: its text joins the cell
                self._cell(" ".join(table.split()))
            else:
                self.parts.append(f"\n\n{table}\n\n")
            return
        if self._tables:
            if tag in _BLOCK_TAGS and tag not in ("tr", "td", "th"):
                self._cell(" ")
            return
        if tag == "pre":
            self._pre = max(0, self._pre - 1)
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            if self._heading == 1 and not self.first_h1:
                self.first_h1 = " ".join("".join(self._heading_text).split())
            self._heading = None
        if tag in _BLOCK_TAGS:
            self.parts.append("\n\n")

    def _cell(self, text: str) -> None:
        rows = self._tables[-1]
        if not rows:
            rows.append([])
        if not rows[-1]:
            rows[-1].append("")
        rows[-1][-1] += text

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if self._skip_depth or self._navigation:
            return
        if self._tables:
            self._cell(re.sub(r"\s+", " ", data))
            return
        if not self._pre:
            data = re.sub(r"\s+", " ", data)
        if self._heading is not None:
            data = data.replace("\n", " ")
            self._heading_text.append(data)
        self.parts.append(data)


def extract_html(text: str, *, key: str) -> Extracted:
    parser = _HtmlText()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # html.parser is lenient; anything it still rejects is reported
        raise ExtractionError(f"The HTML could not be parsed: {exc}") from exc
    body = "".join(parser.parts)
    lines = [line.strip() if not line.startswith("    ") else line.rstrip() for line in body.split("\n")]
    kept = [line for line in lines if not is_navigation_line(line)]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    title = " ".join(html.unescape(parser.title).split()) or parser.first_h1 or _title_from_key(key)
    left_out = parser.navigation_blocks + len(lines) - len(kept)
    warnings = [f"{left_out} navigation block(s) left out (next/previous/up links, menus)"] if left_out else []
    text = normalise_text(body)
    return Extracted(text=text, title=title, warnings=warnings, tables=markdown_tables(text, title))  # its <table>s


# --- PDF ------------------------------------------------------------------------------------
def glued_ratio(text: str) -> float:
    """Share of letters that sit in implausibly long 'words' — text whose spaces were lost."""
    letters = sum(1 for char in text if char.isalpha())
    if not letters:
        return 0.0
    glued = sum(len(word) for word in re.findall(r"[^\W\d_]{25,}", text))
    return glued / letters


WORD_GAP_EM = 180.0  # a TJ offset wider than 0.18 em between glyph runs is a word gap
_gapfix_lock = threading.Lock()


def _extract_with_word_gaps(page: object) -> str | None:
    """Re-extract a page treating wide TJ kerning offsets as spaces.

    pypdf only adds a space for a TJ offset wider than half the font's space glyph; in PDFs
    whose fonts declare a very wide (or default) space, such as xdvipdfmx output, every word
    gap is below that and the words run together. Capping the threshold at 0.18 em restores
    them. This reaches into pypdf's text extractor (pinned <8); if that API moves, the caller
    falls back to layout mode.
    """
    try:
        from pypdf._text_extraction._text_extractor import TextExtraction
    except ImportError:
        return None
    original = getattr(TextExtraction, "process_tj_offset", None)
    if original is None:
        return None

    def capped(self: object, offset: float, space_width: float) -> None:
        original(self, offset, min(space_width, WORD_GAP_EM))

    with _gapfix_lock:
        TextExtraction.process_tj_offset = capped  # type: ignore[method-assign]
        try:
            return page.extract_text()  # type: ignore[attr-defined]
        finally:
            TextExtraction.process_tj_offset = original  # type: ignore[method-assign]


def _pdf_page_text(page: object, mode: str) -> str:
    if mode == "gaps":
        return _extract_with_word_gaps(page) or ""
    if mode == "layout":
        text = page.extract_text(extraction_mode="layout")  # type: ignore[attr-defined]
        return "\n".join(re.sub(r" {2,}", " ", line).strip() for line in text.splitlines())
    return page.extract_text()  # type: ignore[attr-defined]


def _ocr_image_pages(data: bytes, texts: list[str], warnings: list[str], *, languages: str, progress) -> int:
    """Pages without a text layer (scans) get their text from OCR, in place; each page OCR cannot read is a
    warning with its reason, never a silent empty chunk. Returns how many pages OCR read."""
    from knowledge.ingest.ocr import OCRUnavailable, ocr_pdf_pages

    scanned = [index + 1 for index, text in enumerate(texts) if len(text) < MIN_PAGE_CHARS]
    if not scanned:
        return 0
    try:
        result = ocr_pdf_pages(data, scanned, languages=languages, progress=progress)
    except OCRUnavailable as exc:
        warnings.append(f"{len(scanned)} page(s) need OCR, which is not available: {exc}")
        return 0
    for number, text in result.texts.items():
        texts[number - 1] = normalise_text(text).strip()
    if result.texts:
        warnings.append(f"{len(result.texts)} page(s) read by OCR ({languages}): "
                        + ", ".join(str(n) for n in sorted(result.texts)[:20]))  # fmt: skip
    for number, reason in sorted(result.failures.items()):
        warnings.append(f"page {number}: {reason}")
    return len(result.texts)


def extract_pdf(data: bytes, *, key: str, ocr_languages: str = "spa+eng", progress=None) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # per-glyph font warnings would flood the job log

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("The PDF is password-protected.")
        pages = list(reader.pages)
        labels = list(reader.page_labels) if len(pages) < 20000 else []
    except (FileNotDecryptedError, DependencyError) as exc:
        raise ExtractionError(f"The PDF is encrypted and cannot be read ({exc}).") from exc
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise ExtractionError(f"The PDF is damaged or not a PDF ({exc}).") from exc
    if not pages:
        raise ExtractionError("The PDF has no pages.")

    texts: list[str] = []
    warnings: list[str] = []
    relayout = 0
    for index, page in enumerate(pages):
        try:
            # pypdf's default mode drops the spaces between words in some PDFs (xdvipdfmx output, tight
            # layouts). Word-gap detection keeps them, and on PDFs without the problem it gives the same text
            # (measured: 662 of 663 pages of five such manuals identical, the other one space apart) at the
            # same cost, so it is the first extraction, not a second one. Layout mode is the last resort
            # for a page that still looks glued.
            text = normalise_text(_pdf_page_text(page, "gaps") or _pdf_page_text(page, "plain"))
            if glued_ratio(text) > 0.15:
                alternative = normalise_text(_pdf_page_text(page, "layout"))
                if len(alternative) >= MIN_PAGE_CHARS and glued_ratio(alternative) < glued_ratio(text):
                    text, relayout = alternative, relayout + 1
        except Exception as exc:  # one bad page must not lose the rest of the document
            warnings.append(f"page {index + 1}: text could not be extracted ({type(exc).__name__})")
            text = ""
        texts.append(text.strip())

    ocr_pages = _ocr_image_pages(data, texts, warnings, languages=ocr_languages, progress=progress)
    if all(len(text) < MIN_PAGE_CHARS for text in texts):
        detail = "; ".join(warnings[-3:])
        raise NeedsOCR(f"The PDF has no text on any of its {len(pages)} page(s), not even by OCR ({detail}).")
    texts, running = strip_running_lines(texts)
    if running:
        shown = "; ".join(f"“{line}”" for line in running[:3])
        warnings.append(f"{len(running)} running header/footer line(s) left out where they repeat: {shown}")
    empty = [str(i + 1) for i, text in enumerate(texts) if len(text) < MIN_PAGE_CHARS]
    if empty:
        warnings.append(f"{len(empty)} page(s) without text: {', '.join(empty[:20])}")
    if relayout:
        warnings.append(f"{relayout} page(s) re-extracted in layout mode because words ran together")
    still_glued = sum(1 for text in texts if glued_ratio(text) > 0.15)
    if still_glued:
        warnings.append(f"{still_glued} page(s) still have words run together")

    parts: list[str] = []
    page_map: list[Page] = []
    offset = 0
    for index, text in enumerate(texts):
        label = labels[index] if index < len(labels) else str(index + 1)
        page_map.append(Page(number=index + 1, label=str(label), offset=offset))
        parts.append(text)
        offset += len(text) + 2
    title = ""
    try:
        title = str((reader.metadata or {}).get("/Title") or "").strip()  # type: ignore[call-overload]  # pypdf's DocumentInformation is a dict of PDF names
    except Exception:  # broken metadata is not worth failing over
        title = ""
    if not title:
        first_line = next((line.strip() for line in texts[0].splitlines() if len(line.strip()) > 3), "")
        title = first_line[:200] if first_line else _title_from_key(key)
    return Extracted(text="\n\n".join(parts), title=title, pages=page_map, warnings=warnings, ocr_pages=ocr_pages)
