"""Scanned pages → text with Tesseract (one job: OCR of PDF pages that have no text layer).

A page is rendered with PDFium (pypdfium2's wheel, no system library) at OCR_DPI and read by Debian's
`tesseract` binary through pytesseract: Tesseract runs as its own process, so a crash in it, or a page that
makes it hang (OCR_PAGE_TIMEOUT_S), fails that page with a reason and never takes down the worker.

Languages are Tesseract's codes joined by "+", per source; the default is `spa+eng`. The first language leads:
with English first, Tesseract drops Spanish accents ("años" read as "anos"), while English pages read the same
either way (measured on the test's pages). The install scripts install Tesseract with English and Spanish data
(scripts/_ocr.sh).
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

logger = logging.getLogger(__name__)

OCR_DPI = 300
OCR_PAGE_TIMEOUT_S = 120
LANGUAGES_RE = re.compile(r"^[a-z_]{3,10}(\+[a-z_]{3,10}){0,5}$")  # eng, spa, chi_sim … joined by "+"


class OCRUnavailable(Exception):
    """Tesseract (or one of the requested languages) is not installed; the message says what to install."""


@dataclass
class OCRResult:
    texts: dict[int, str] = field(default_factory=dict)  # 1-based page number → text
    failures: dict[int, str] = field(default_factory=dict)  # page number → why it has no text


@cache
def installed_languages() -> frozenset[str]:
    if shutil.which("tesseract") is None:
        return frozenset()
    import pytesseract

    try:
        return frozenset(pytesseract.get_languages(config=""))
    except Exception:  # a broken installation: treated as none
        logger.exception("Tesseract does not list its languages")
        return frozenset()


def check_languages(languages: str) -> None:
    if not LANGUAGES_RE.match(languages):
        raise OCRUnavailable(f"{languages!r} is not a list of Tesseract language codes such as spa+eng.")
    have = installed_languages()
    if not have:
        raise OCRUnavailable("OCR needs Tesseract: apt-get install tesseract-ocr (scripts/up.sh installs it).")
    missing = [code for code in languages.split("+") if code not in have]
    if missing:
        packages = " ".join(f"tesseract-ocr-{code.replace('_', '-')}" for code in missing)
        raise OCRUnavailable(f"Tesseract has no data for {', '.join(missing)}: apt-get install {packages}.")


def ocr_pdf_pages(
    data: bytes, pages: list[int], *, languages: str, progress: Callable[[int, int], None] | None = None
) -> OCRResult:
    """OCR the given 1-based pages of a PDF; one page's failure is recorded and the others go on."""
    import pypdfium2
    import pytesseract

    check_languages(languages)
    result = OCRResult()
    document = pypdfium2.PdfDocument(data)
    try:
        for done, number in enumerate(pages, 1):
            try:
                page = document[number - 1]
                image = page.render(scale=OCR_DPI / 72).to_pil()
                text = pytesseract.image_to_string(image, lang=languages, timeout=OCR_PAGE_TIMEOUT_S)
                text = "\n".join(line.rstrip() for line in text.splitlines()).strip()
                if len(text) < 3:
                    result.failures[number] = "OCR found no text on the page"
                else:
                    result.texts[number] = text
            except RuntimeError as exc:  # pytesseract's timeout
                result.failures[number] = f"OCR gave up on the page ({exc})"
            except Exception as exc:  # a page that does not render, or Tesseract failing on it
                result.failures[number] = f"OCR failed on the page ({type(exc).__name__}: {exc})"
            if progress is not None:
                progress(done, len(pages))
    finally:
        document.close()
    return result
