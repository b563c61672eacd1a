"""Page furniture and navigation, left out of chunks: it repeats on every page, says nothing of the subject,
and would otherwise reach prompts and citations ("Debian Reference 12", "Next: Index, Previous: Memory Usage").

- PDF: a line at the top or bottom of a page (its first or last RUNNING_EDGE_LINES lines) that stands there
  on at least RUNNING_MIN_SHARE of the pages, or on RUNNING_MIN_PAGES pages in a row, is a running header or
  footer (the page's own number in it aside); a bare page number there ("12", "Page 12 of 40", "- 12 -",
  "xiv") is one too. Headings that merely look alike ("Section 3", "Section 4") are kept.
- HTML: elements that are navigation by their role or their class (DocBook's navheader/navfooter, Sphinx's
  related bar and sidebar, texinfo's nav panel, breadcrumbs), and lines made only of navigation links
  ("Next: Index, Previous: Memory Usage, Up: libffi   [Contents][Index]").
"""

from __future__ import annotations

import re
from collections import Counter

RUNNING_EDGE_LINES = 2
RUNNING_MIN_PAGES = 3
RUNNING_MIN_SHARE = 0.5
RUNNING_MAX_CHARS = 120  # a longer line is prose, even if it repeats

PAGE_NUMBER_RE = re.compile(  # "12", "Page 12 of 40", "- 12 -", "Página 3", and front matter's "xiv" (lowercase)
    r"^[-–—\s]*(?:(?i:page|p[áa]gina|p\.|seite)\s*)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?i:/|of|de|von)\s*\d{1,4})?[-–—\s]*$"
)
NAV_CLASSES = {
    "navheader", "navfooter", "nav-panel", "navigation", "related", "breadcrumb", "breadcrumbs",
    "sphinxsidebar", "skip-link", "skiplink", "pager", "prev-next",
}  # fmt: skip
NAV_KEYS = (
    r"(?:next|previous|prev|up|top|home|contents|index|siguiente|anterior|arriba|subir|inicio|[íi]ndice|contenido)"
)
NAV_SEGMENT_RE = re.compile(rf"^\s*{NAV_KEYS}\s*:\s*[^:]{{0,80}}$", re.IGNORECASE)
NAV_BRACKETS_RE = re.compile(rf"\s*(?:\[\s*{NAV_KEYS}\s*\]\s*)+$", re.IGNORECASE)


def _shape(line: str, number: int) -> str:
    """The line, whitespace folded, with the page's own number (if it carries it) as "#": "Debian Reference — 12"
    on page 12 and "Debian Reference — 13" on page 13 are one line."""
    folded = " ".join(line.split())
    return re.sub(rf"(?<!\d){number}(?!\d)", "#", folded) if str(number) in folded else folded


def _edges(lines: list[str]) -> list[int]:
    """Indexes of a page's first and last non-empty lines (RUNNING_EDGE_LINES of each)."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return sorted(set(filled[:RUNNING_EDGE_LINES] + filled[-RUNNING_EDGE_LINES:]))


def strip_running_lines(pages: list[str]) -> tuple[list[str], list[str]]:
    """The pages without their running headers, footers and page numbers, and the distinct lines left out.

    A line at a page's edge is furniture when it stands at the edge of at least RUNNING_MIN_SHARE of the pages
    (the document's title, its footer), or of RUNNING_MIN_PAGES pages in a row (a chapter's running head)."""
    split = [page.split("\n") for page in pages]
    shapes = [
        {_shape(lines[i], n) for i in _edges(lines) if len(lines[i].strip()) <= RUNNING_MAX_CHARS}
        for n, lines in enumerate(split, 1)
    ]
    filled_pages = sum(1 for page in pages if page.strip())
    if filled_pages < RUNNING_MIN_PAGES:
        return pages, []
    seen = Counter(shape for page in shapes for shape in page if shape)
    running = {
        shape for shape, count in seen.items() if count >= max(RUNNING_MIN_PAGES, RUNNING_MIN_SHARE * filled_pages)
    }
    for start in range(len(shapes) - RUNNING_MIN_PAGES + 1):
        window = shapes[start : start + RUNNING_MIN_PAGES]
        running |= {shape for shape in set.intersection(*window) if shape}
    removed: dict[str, None] = {}
    cleaned = []
    for n, lines in enumerate(split, 1):
        drop = {i for i in _edges(lines) if _shape(lines[i], n) in running or PAGE_NUMBER_RE.match(lines[i])}
        for i in sorted(drop):
            removed.setdefault(" ".join(lines[i].split()), None)
        kept = [line for i, line in enumerate(lines) if i not in drop]
        cleaned.append("\n".join(kept).strip() if drop else "\n".join(lines))
    return cleaned, list(removed)


def is_navigation_element(tag: str, attrs: list[tuple[str, str | None]]) -> bool:
    values = dict(attrs)
    if (values.get("role") or "").lower() == "navigation":
        return True
    if "breadcrumb" in (values.get("aria-label") or "").lower():
        return True
    return tag in ("div", "table", "ul", "p", "section", "aside") and bool(
        NAV_CLASSES & set((values.get("class") or "").lower().split())
    )


def is_navigation_line(line: str) -> bool:
    """A line made only of navigation links: "Next: Index, Previous: Memory Usage, Up: libffi [Contents][Index]"."""
    text = line.strip()
    if not text or len(text) > 300:
        return False
    rest = NAV_BRACKETS_RE.sub("", text)
    if not rest:
        return bool(NAV_BRACKETS_RE.match(text))
    segments = [s for s in re.split(r"\s*[,;|]\s*", rest) if s]
    return len(segments) >= 2 and all(NAV_SEGMENT_RE.match(s) for s in segments)
