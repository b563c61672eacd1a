"""Scanned pages → text with Tesseract (one job: OCR of PDF pages that have no text layer, and of a vault's image
attachments).

Native code never runs in the caller's process: a child Python process (`python -m knowledge.ingest.ocr`, no Django)
renders each page with PDFium (pypdfium2's wheel, no system library) at OCR_DPI and has Debian's `tesseract`
read it through pytesseract, which runs Tesseract as a process of its own. A crash in PDFium or Tesseract, a
page that makes either hang (OCR_PAGE_TIMEOUT_S) or a page too large to render fails those pages with a
reason, and the job worker, or the web worker that runs jobs inline, goes on. The child reports each page as
one JSON line, so `progress(done, total)` follows the pages as they are read.

Languages are Tesseract's codes joined by "+", per source; the default is `spa+eng`. The first language leads:
with English first, Tesseract drops Spanish accents ("años" read as "anos"), while English pages read the same
either way (measured on the test's pages). The install scripts install Tesseract with English and Spanish data
(scripts/_ocr.sh).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from knowledge.ids import OCR_LANGUAGES_RE
from knowledge.ingest.classify import IMAGE_SUFFIXES

if TYPE_CHECKING:
    from PIL import Image

logger = logging.getLogger(__name__)

OCR_DPI = 300
OCR_MAX_SIDE_PX = 10_000  # a poster-sized page is rendered smaller rather than at 300 dpi
OCR_PAGE_TIMEOUT_S = 120  # Tesseract's limit for one page
CHILD_SILENCE_S = OCR_PAGE_TIMEOUT_S + 60  # no page from the child for this long: it is stopped
CHILD_MEMORY_BYTES = 4 * 1024**3  # address space of the child (a rendered page is tens of MiB)


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
    if not OCR_LANGUAGES_RE.match(languages):
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
    """OCR the given 1-based pages of a PDF in a child process; one page's failure is recorded, the others go on.
    `progress(done, total)` is called before the first page and after each one."""
    return _ocr_file(data, "document.pdf", pages, languages=languages, progress=progress)


def ocr_image(data: bytes, suffix: str, *, languages: str) -> OCRResult:
    """OCR an image (page 1 of the result), decoded by Pillow in the same child process a PDF's pages are."""
    if suffix.lower() not in IMAGE_SUFFIXES:
        raise ValueError(f"{suffix} is not an image format OCR reads")
    return _ocr_file(data, f"image{suffix.lower()}", [1], languages=languages, progress=None)


def _ocr_file(
    data: bytes, name: str, pages: list[int], *, languages: str, progress: Callable[[int, int], None] | None
) -> OCRResult:
    check_languages(languages)
    result = OCRResult()
    if progress is not None:
        progress(0, len(pages))
    with tempfile.TemporaryDirectory(prefix="ragsite-ocr-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        stderr_path = Path(folder) / "stderr.txt"
        with stderr_path.open("wb") as stderr:
            child = subprocess.Popen(  # noqa: S603  (our own module, arguments checked above)
                [sys.executable, "-m", "knowledge.ingest.ocr", str(path), languages, ",".join(map(str, pages))],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True,
                env={**os.environ, "OMP_THREAD_LIMIT": "1"},  # one core a page: the server keeps the other
                cwd=Path(__file__).resolve().parents[2],  # the project root: `-m knowledge.ingest.ocr` imports
            )  # fmt: skip
            try:
                for line in _lines(child, CHILD_SILENCE_S):
                    report = json.loads(line)
                    number = int(report["page"])
                    if "text" in report:
                        result.texts[number] = report["text"]
                    else:
                        result.failures[number] = str(report["error"])
                    if progress is not None:
                        progress(len(result.texts) + len(result.failures), len(pages))
            except TimeoutError:
                os.killpg(child.pid, signal.SIGKILL)  # the child and the Tesseract it runs
                reason = f"the OCR process gave no answer for {CHILD_SILENCE_S} s and was stopped"
            else:
                reason = ""
            code = child.wait()
        if not reason and code != 0:
            tail = stderr_path.read_text(errors="replace").strip().splitlines()[-1:]
            reason = f"the OCR process stopped (exit code {code}{': ' + tail[0][:200] if tail else ''})"
    for number in pages:
        if number not in result.texts and number not in result.failures:
            result.failures[number] = f"OCR failed on the page ({reason or 'no answer from the OCR process'})"
    if reason:
        logger.warning("OCR: %s", reason)
    return result


def _lines(child: subprocess.Popen[bytes], silence_s: float) -> Iterator[bytes]:
    """The child's output lines; TimeoutError when it says nothing for `silence_s`."""
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True, name="ocr-output").start()
    while True:
        try:
            line = lines.get(timeout=silence_s)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            return
        if line.strip():
            yield line


def _read_pages(path: str, languages: str, pages: list[int]) -> None:
    """The child: one JSON line per page, {"page", "text"} or {"page", "error"}."""
    import resource

    import pypdfium2
    import pytesseract

    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))  # Tesseract inherits it
    document = pypdfium2.PdfDocument(path) if path.endswith(".pdf") else None
    for number in pages:
        try:
            if document is None:  # an image: Pillow decodes it here (a decompression bomb is an error)
                image = _image(path)
            else:
                page = document[number - 1]
                width, height = page.get_size()
                scale = min(OCR_DPI / 72, OCR_MAX_SIDE_PX / max(width, height, 1))
                image = page.render(scale=scale).to_pil()
            text = pytesseract.image_to_string(image, lang=languages, timeout=OCR_PAGE_TIMEOUT_S)
            text = "\n".join(line.rstrip() for line in text.splitlines()).strip()
            report = {"page": number, "text": text} if len(text) >= 3 else {
                "page": number, "error": "OCR found no text on the page"}  # fmt: skip
        except RuntimeError as exc:  # pytesseract's timeout
            report = {"page": number, "error": f"OCR gave up on the page ({exc})"}
        except Exception as exc:  # a page that does not render, or Tesseract failing on it
            report = {"page": number, "error": f"OCR failed on the page ({type(exc).__name__}: {exc})"}
        print(json.dumps(report), flush=True)


def _image(path: str) -> Image.Image:
    """An image file's first frame, in RGB, no side over OCR_MAX_SIDE_PX."""
    from PIL import Image

    with Image.open(path) as opened:
        opened.seek(0)
        image = opened.convert("RGB")
    if max(image.size) > OCR_MAX_SIDE_PX:
        image.thumbnail((OCR_MAX_SIDE_PX, OCR_MAX_SIDE_PX))
    return image


if __name__ == "__main__":
    _read_pages(sys.argv[1], sys.argv[2], [int(n) for n in sys.argv[3].split(",")])
