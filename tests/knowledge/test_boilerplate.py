"""Page furniture and navigation stay out of chunks, and the document says what was left out."""

from __future__ import annotations

from knowledge.ingest.boilerplate import strip_running_lines
from knowledge.ingest.extraction import extract


def test_running_headers_footers_and_page_numbers_are_left_out_and_the_body_is_kept():
    names = ["Pumps", "Valves", "Seals", "Motors", "Filters", "Gauges"]
    pages = [
        f"ACME Field Handbook — edition 2026\nChapter {n}: {names[n - 1]}\nThe unit on site {n} runs at {n}00 rpm.\n"
        f"Check it every {n + 1} weeks.\nRecord the reading.\nField notes — {n}\n{n}"
        for n in range(1, 7)
    ]
    cleaned, removed = strip_running_lines(pages)
    assert all("ACME Field Handbook" not in page and "Field notes" not in page for page in cleaned)
    assert (
        cleaned[2]
        == "Chapter 3: Seals\nThe unit on site 3 runs at 300 rpm.\nCheck it every 4 weeks.\nRecord the reading."
    )
    assert removed[:3] == ["ACME Field Handbook — edition 2026", "Field notes — 1", "1"]


def test_a_line_that_repeats_inside_pages_or_on_few_of_them_is_not_furniture():
    step = "Intro {n}.\nWarning: disconnect the power first.\nStep {n} body text.\nEnd of step {n}."
    pages = [f"Section {n + 10}\n" + step.format(n=n) for n in range(10)]
    pages[0] = "Safety notice\n" + pages[0]
    pages[5] = "Safety notice\n" + pages[5]
    cleaned, removed = strip_running_lines(pages)
    assert all("Warning: disconnect the power first." in page for page in cleaned)  # mid-page: kept
    assert all(f"Section {n + 10}" in page for n, page in enumerate(cleaned))  # alike headings: kept
    assert cleaned[0].startswith("Safety notice") and removed == []  # on 2 of 10 pages, apart: kept
    single, removed = strip_running_lines(["12\nA one-page note.\n12"])
    assert single == ["12\nA one-page note.\n12"] and removed == []  # too few pages to tell furniture apart


DOCBOOK = """<html><head><title>Encontrar paquetes</title></head><body>
<div class="navheader"><table summary="Navigation header"><tr><th colspan="3">Encontrar paquetes por nombre</th></tr>
<tr><td><a href="a.html">Anterior</a></td><th>Usar aptitude</th><td><a href="c.html">Siguiente</a></td></tr></table>
<hr/></div>
<div class="section"><h3>Encontrar paquetes por nombre.</h3><p>Pulse / para abrir una ventana de búsqueda.</p></div>
<div class="navfooter"><table><tr><td>Anterior</td><td>Inicio</td><td>Siguiente</td></tr></table></div>
</body></html>"""
TEXINFO = """<html><body><div class="header"><p>Next: <a href="Index.html">Index</a>, Previous:
<a href="Memory-Usage.html">Memory Usage</a>, Up: <a href="index.html">libffi</a> &nbsp;
[<a href="c.html">Contents</a>][<a href="i.html">Index</a>]</p></div><hr><h3>Missing Features</h3>
<p>There is no support for bit fields in structures.</p>
</body></html>"""


def test_html_navigation_blocks_and_link_lines_are_left_out_and_recorded():
    docbook = extract(DOCBOOK.encode(), key="aptitude/ch01.html", source_type="html")
    assert "Pulse / para abrir" in docbook.text and "Encontrar paquetes por nombre." in docbook.text
    assert "Anterior" not in docbook.text and "Siguiente" not in docbook.text and "Usar aptitude" not in docbook.text
    assert any("navigation block(s) left out" in w for w in docbook.warnings)
    texinfo = extract(TEXINFO.encode(), key="libffi/Missing-Features.html", source_type="html")
    assert "no support for bit fields" in texinfo.text
    assert "Next:" not in texinfo.text and "Memory Usage" not in texinfo.text and "[Contents]" not in texinfo.text
