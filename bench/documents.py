"""Office extraction throughput and OCR seconds per page, on this machine (2 cores here).

    python bench/documents.py [--pages 4] [--repeat 3]

Writes the files itself (python-docx, openpyxl, python-pptx, odfpy; a scan is a page image without a text
layer), then times `knowledge.ingest.extraction.extract` on each, best of --repeat: characters of text a second for
the Office formats (the part before chunking and embedding, which bench/ingest.py measures), and seconds a page
for OCR (PDFium rendering at 300 dpi plus Tesseract, spa+eng). Tesseract runs one page at a time on one
thread (OMP_THREAD_LIMIT=1 is what the worker sees too), so a job's OCR time is pages × the figure.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "knowledge"))
os.environ.setdefault("RAG_DEBUG", "true")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

PARAGRAPH = "Staff travelling abroad receive a per diem for meals, paid monthly with the salary. " * 4


def office_files(folder: Path) -> dict[str, Path]:
    import docx
    import openpyxl
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P
    from pptx import Presentation

    document = docx.Document()
    for section in range(200):
        document.add_heading(f"Section {section}", level=1)
        document.add_paragraph(PARAGRAPH)
    document.save(folder / "handbook.docx")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["Server", "Switch port", "VLAN", "Owner"])
    for n in range(5000):
        sheet.append([f"R-{n}", f"Gi1/0/{n % 48}", 20 + n % 7, f"team {n % 13}"])
    book.save(folder / "network.xlsx")
    deck = Presentation()
    for number in range(60):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {number}"
        slide.placeholders[1].text = PARAGRAPH
        slide.notes_slide.notes_text_frame.text = "Speaker notes for this slide."
    deck.save(folder / "deck.pptx")
    odt = OpenDocumentText()
    for section in range(200):
        odt.text.addElement(H(outlinelevel=1, text=f"Section {section}"))
        odt.text.addElement(P(text=PARAGRAPH))
    odt.save(str(folder / "policy.odt"))
    return {name: folder / name for name in ("handbook.docx", "network.xlsx", "deck.pptx", "policy.odt")}


def best(repeat: int, run) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import django

    django.setup()
    from test_ocr import ENGLISH, SPANISH, scanned_pdf

    from knowledge.ingest.extraction import extract

    folder = Path(tempfile.mkdtemp(prefix="ragsite-docs-"))
    print(f"cores: {os.cpu_count()}")
    print(f"| file | bytes | text chars | seconds (best of {args.repeat}) | chars/s |")
    print("|---|---|---|---|---|")
    for name, path in office_files(folder).items():
        data = path.read_bytes()
        seconds, extracted = best(args.repeat, lambda d=data, n=name: extract(d, key=n, source_type=n.split(".")[-1]))
        chars = len(extracted.text)  # type: ignore[attr-defined]
        print(f"| {name} | {len(data):,} | {chars:,} | {seconds:.3f} | {chars / seconds:,.0f} |")
    pages = [SPANISH if n % 2 == 0 else ENGLISH for n in range(args.pages)]
    scan = scanned_pdf(pages)
    seconds, extracted = best(1, lambda: extract(scan, key="scan.pdf", source_type="pdf"))
    ok = sum(1 for lines in pages if lines[-1].split()[0] in extracted.text)  # type: ignore[attr-defined]
    print(f"\nOCR: {args.pages} scanned pages in {seconds:.1f} s = {seconds / args.pages:.2f} s a page "
          f"({ok}/{args.pages} pages' last line read back; spa+eng)")  # fmt: skip


if __name__ == "__main__":
    main()
