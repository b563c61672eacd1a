from __future__ import annotations

import pytest

from knowledge.ingest.chunkers import MAX_CHARS, TARGET_CHARS, chunk_code, chunk_documental
from knowledge.ingest.classify import classify


def _long_markdown() -> str:
    sections = []
    for s in range(3):
        sections.append(f"# Part {s}\n")
        for sub in range(3):
            sections.append(f"## Topic {s}.{sub}\n")
            for p in range(6):
                sections.append(f"Paragraph {s}.{sub}.{p} " + "words and more words " * 12 + "\n")
    return "\n".join(sections)


def test_documental_chunks_respect_size_and_never_cut_mid_line():
    text = _long_markdown()
    lines = text.split("\n")
    chunks = chunk_documental(text, source_type="markdown")
    assert len(chunks) > 5
    for chunk in chunks:
        assert len(chunk.text) <= MAX_CHARS
        # Every chunk is exactly the whole lines of its range.
        assert chunk.text == "\n".join(lines[chunk.line_start - 1 : chunk.line_end])


def test_documental_chunks_keep_their_heading_path_and_follow_sections():
    chunks = chunk_documental(_long_markdown(), source_type="markdown")
    assert chunks[0].heading.startswith("Part 0")
    assert any(c.heading == "Part 1 › Topic 1.2" for c in chunks)
    assert all(" › " in c.heading for c in chunks[1:])


def test_consecutive_chunks_of_one_section_overlap_by_whole_lines():
    text = "# Big\n\n" + "\n".join(f"line {i} " + "x" * 60 for i in range(200))
    chunks = chunk_documental(text, source_type="markdown")
    assert len(chunks) >= 4
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.line_start <= before.line_end  # overlap
        assert before.line_end - after.line_start + 1 <= 4  # ≈200 characters of 68-char lines


def test_rst_headings_form_the_path():
    text = "Guide\n=====\n\nIntro.\n\nInstall\n-------\n\nLinux\n~~~~~\n\nRun it.\n"
    chunks = chunk_documental(text, source_type="rst")
    holding = [c for c in chunks if "Run it." in c.text]
    assert holding and all(c.heading == "Guide › Install › Linux" for c in holding)


def test_a_single_huge_line_is_split_as_the_last_resort():
    chunks = chunk_documental("word " * 2000, source_type="text")
    assert len(chunks) >= 4 and all(len(c.text) <= MAX_CHARS for c in chunks)


def test_python_is_chunked_by_top_level_blocks_with_line_ranges():
    functions = "\n\n".join(
        f"def f{i}(x):\n" + "\n".join(f"    x += {j}" for j in range(40)) + "\n    return x" for i in range(6)
    )
    text = "import os\n\n" + functions + "\n"
    chunks = chunk_code(text, language="python")
    lines = text.split("\n")
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.line_start - 1 : chunk.line_end])
        assert len(chunk.text) <= MAX_CHARS
        first_code = chunk.text.lstrip().splitlines()[0]
        assert not first_code.startswith("    ") or chunk.heading  # never starts inside a signature's body alone
    assert any(c.heading == "def f3" for c in chunks)


def test_a_big_python_class_is_split_by_methods():
    methods = "\n\n".join(f"    def m{i}(self):\n" + "\n".join(f"        a = {j}" for j in range(30)) for i in range(8))
    source = f"class Big:\n    '''Doc.'''\n\n{methods}\n"
    chunks = chunk_code(source, language="python")
    assert len(chunks) >= 3
    assert all(c.heading.startswith("class Big › def m") for c in chunks[1:])
    lines = source.split("\n")
    assert all(lines[c.line_start - 1].startswith("    def m") for c in chunks[1:])
    assert all(len(c.text) <= MAX_CHARS for c in chunks)


@pytest.mark.parametrize(
    "language, source",
    [
        ("javascript", "function a() {\n" + "  x();\n" * 150 + "}\n\nclass B {\n" + "  m() {}\n" * 150 + "}\n"),
        ("go", "package x\n\nfunc A() {\n" + "\tx()\n" * 200 + "}\n\nfunc B() {\n" + "\ty()\n" * 200 + "}\n"),
        ("rust", "fn a() {\n" + "    x();\n" * 200 + "}\n\nfn b() {\n" + "    y();\n" * 200 + "}\n"),
    ],
)
def test_tree_sitter_languages_split_at_top_level_blocks(language, source):
    chunks = chunk_code(source, language=language)
    lines = source.split("\n")
    assert len(chunks) >= 2
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.line_start - 1 : chunk.line_end])
    headings = [c.heading for c in chunks if c.heading]
    assert headings and all(h.split()[-1] in {"a", "A", "B", "b"} for h in headings)


def test_unparseable_python_still_chunks_on_line_boundaries():
    chunks = chunk_code("def broken(:\n    pass\n\nx = 1\n", language="python")
    assert chunks and chunks[0].line_start == 1


@pytest.mark.parametrize(
    "key, head, expected",
    [
        ("install.sh", "", ("code", "bash")),
        ("Makefile", "", ("code", "make")),
        ("Dockerfile", "", ("code", "dockerfile")),
        ("README", "", ("documental", "text")),
        ("LICENSE", "", ("documental", "text")),
        ("docs/guide.md", "", ("documental", "markdown")),
        ("bin/deploy", "#!/usr/bin/env python3\nprint()", ("code", "python")),
        ("bin/run", "#!/bin/bash\n", ("code", "bash")),
        ("notes", "just some words", ("documental", "text")),
        ("manual.pdf", "", ("documental", "pdf")),
    ],
)
def test_auto_mode_uses_extension_then_basename_then_shebang(key, head, expected):
    assert classify(key, head) == expected


def test_a_caller_can_force_the_mode():
    assert classify("install.sh", forced="documental")[0] == "documental"
    assert classify("README.md", forced="code")[0] == "code"
    with pytest.raises(ValueError):
        classify("a.md", forced="poetry")


def test_a_long_document_is_cut_near_the_target_and_never_above_the_maximum():
    sentence = "the router keeps its settings after a reboot. "
    paragraphs = [f"Paragraph {n}: " + sentence * (2 + n % 9) for n in range(80)]
    chunks = chunk_documental("\n\n".join(paragraphs), source_type="text")
    sizes = [len(c.text) for c in chunks]
    assert max(sizes) <= MAX_CHARS
    assert sum(sizes[:-1]) / len(sizes[:-1]) >= TARGET_CHARS * 0.6  # not a shower of tiny pieces


def test_a_long_markdown_table_is_cut_between_rows_and_every_part_repeats_its_header():
    rows = "\n".join(f"| R-{n} | Gi1/0/{n} | rack {n // 10} |" for n in range(1, 121))
    text = f"# Network\n\nThe servers and their ports:\n\n| Server | Switch port | Rack |\n|---|---|---|\n{rows}\n"
    drafts = chunk_documental(text, source_type="markdown")
    parts = [d for d in drafts if "| R-" in d.text]
    assert len(parts) >= 3
    for part in parts:
        lines = part.text.splitlines()
        table = lines[lines.index("| Server | Switch port | Rack |") :]  # the header, then whole rows only
        assert table[1] == "|---|---|---|" and len(table) > 2
        assert all(line.startswith("| R-") and line.endswith(" |") for line in table[2:])
    last = [d for d in parts if "| R-120 |" in d.text][0]
    assert "| R-120 | Gi1/0/120 | rack 12 |" in last.text.splitlines()
    assert last.line_end == text.count("\n")  # its location is its rows' lines
