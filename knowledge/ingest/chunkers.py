"""Text → chunks. Documental: headings, then paragraphs, then length. Code: top-level blocks.

No chunk ever starts or ends mid-line (except a single line longer than the maximum, which is
cut at a space as the last resort). Every chunk keeps its 1-based line range and heading path.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

TARGET_CHARS = 1500
MAX_CHARS = 2200
OVERLAP_CHARS = 200
HEADING_SEPARATOR = " › "


@dataclass
class ChunkDraft:
    text: str
    line_start: int
    line_end: int
    heading: str = ""
    char_start: int = 0
    page: int | None = None  # the page its first character is on
    page_label: str = ""
    page_end: int | None = None  # the page its last character is on
    page_spans: list = field(default_factory=list)  # [[offset in text, page, label], …] where each page begins
    defines: list[str] = field(default_factory=list)  # code: the names it defines (knowledge/ingest/symbols.py)


@dataclass
class _Block:
    """A run of whole lines [start, end) (0-based) that belongs together."""

    start: int
    end: int
    heading: str = ""
    header: tuple[int, int] | None = None  # a table's header lines [start, end), repeated in every chunk of it


TABLE_SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _table_header(lines: list[str], start: int, end: int) -> tuple[int, int] | None:
    """The header row and its separator of the first Markdown table in lines [start, end), if any."""
    for index in range(start, end - 1):
        if lines[index].lstrip().startswith("|") and TABLE_SEPARATOR_RE.match(lines[index + 1]):
            return index, index + 2
    return None


def _line_offsets(lines: list[str]) -> list[int]:
    offsets, position = [], 0
    for line in lines:
        offsets.append(position)
        position += len(line) + 1
    return offsets


def _block_len(lines: list[str], start: int, end: int) -> int:
    return sum(len(line) + 1 for line in lines[start:end])


def _split_long_line(line: str) -> list[str]:
    """The last resort: a single line longer than MAX_CHARS, cut at spaces near TARGET_CHARS."""
    pieces = []
    while len(line) > MAX_CHARS:
        cut = line.rfind(" ", TARGET_CHARS // 2, TARGET_CHARS)
        cut = cut if cut > 0 else TARGET_CHARS
        pieces.append(line[:cut])
        line = line[cut:].lstrip()
    return [*pieces, line]


def _pack(
    lines: list[str], blocks: list[_Block], *, overlap: bool, hard: frozenset[int] = frozenset()
) -> list[ChunkDraft]:
    """Pack consecutive blocks into chunks near TARGET_CHARS; split blocks above MAX_CHARS by lines. A block
    starting at a line of `hard` (a slide, a sheet) always starts a new chunk."""
    offsets = _line_offsets(lines)
    units: list[_Block] = []
    for block in blocks:
        if _block_len(lines, block.start, block.end) <= MAX_CHARS:
            units.append(block)
            continue
        # Too big: fall back to lines, grouped up to the target. A table is cut between rows, never inside one,
        # and every part of it after the first repeats its header row (a row found alone says what it holds).
        header = _table_header(lines, block.start, block.end)
        start = block.start
        size = 0
        for index in range(block.start, block.end):
            line_size = len(lines[index]) + 1
            if size and size + line_size > TARGET_CHARS:
                units.append(_Block(start, index, block.heading, header if header and start >= header[1] else None))
                start, size = index, (_block_len(lines, *header) if header and index >= header[1] else 0)
            size += line_size
        units.append(_Block(start, block.end, block.heading, header if header and start >= header[1] else None))

    drafts: list[ChunkDraft] = []
    current: list[_Block] = []

    def flush() -> None:
        if not current:
            return
        start, end = current[0].start, current[-1].end
        text_lines = lines[start:end]
        # Trim blank edges so ranges point at content.
        while text_lines and not text_lines[0].strip():
            text_lines, start = text_lines[1:], start + 1
        while text_lines and not text_lines[-1].strip():
            text_lines, end = text_lines[:-1], end - 1
        if text_lines:
            text = "\n".join(text_lines)
            header = next((unit.header for unit in current if unit.header), None)
            if header and start >= header[1]:
                text = "\n".join(lines[header[0] : header[1]]) + "\n" + text
            if len(text) > MAX_CHARS and len(text_lines) == 1:
                for piece in _split_long_line(text):
                    drafts.append(ChunkDraft(piece, start + 1, end, current[0].heading, offsets[start]))
            else:
                drafts.append(ChunkDraft(text, start + 1, end, current[0].heading, offsets[start]))
        current.clear()

    # A section holding a table starts a chunk of its own: its rows are found alone, and their chunk must be named
    # by the section they sit in, not by the heading of the text packed before them (a Word table's hits read the
    # document's title).
    tabled = {unit.heading for unit in units if unit.heading and _table_header(lines, unit.start, unit.end)}
    size = 0
    for unit in units:
        unit_size = _block_len(lines, unit.start, unit.end)
        if current and (unit.start in hard or (unit.heading in tabled and unit.heading != current[-1].heading)):
            flush()
            size = 0
        same_section = not current or unit.heading == current[0].heading
        if current and (size + unit_size > TARGET_CHARS or (not same_section and size >= TARGET_CHARS // 3)):
            previous_end = current[-1].end
            flush()
            size = 0
            if overlap and same_section:
                # Carry whole trailing lines (≈OVERLAP_CHARS) of the previous chunk into this one.
                carry_start, carried = previous_end, 0
                while carry_start > unit.start - 50 and carry_start > 0:
                    line_size = len(lines[carry_start - 1]) + 1
                    if carried + line_size > OVERLAP_CHARS or carry_start - 1 < (
                        drafts[-1].line_start if drafts else 0
                    ):
                        break
                    carry_start, carried = carry_start - 1, carried + line_size
                if carry_start < unit.start and carried:
                    current.append(_Block(carry_start, unit.start, unit.heading))
                    size = carried
        if current and size < OVERLAP_CHARS and unit.heading and unit.heading.startswith(current[0].heading):
            # Only a parent heading so far ("# Part 1", then "## Topic"): name the chunk by the deeper section.
            current[0] = _Block(current[0].start, current[0].end, unit.heading)
        current.append(unit)
        size += unit_size
    flush()
    return drafts


# --- documental --------------------------------------------------------------------------------
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_RST_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")


def _headings(lines: list[str], source_type: str) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every heading; rst levels follow the order adornments appear."""
    found: list[tuple[int, int, str]] = []
    in_fence = False
    rst_levels: list[str] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = _MD_HEADING.match(line) if source_type in ("markdown", "html", "text") else None
        if match:
            found.append((index, len(match.group(1)), match.group(2).strip()))
            continue
        if index + 1 < len(lines) and stripped and not line[0].isspace():
            under = lines[index + 1].rstrip()
            if source_type == "rst" and _RST_UNDERLINE.match(under) and len(under) >= len(stripped) * 0.8:
                overline = index > 0 and lines[index - 1].rstrip() == under
                style = ("o" if overline else "u") + under[0]
                if style not in rst_levels:
                    rst_levels.append(style)
                found.append((index, rst_levels.index(style) + 1, stripped))
            elif source_type == "markdown" and re.match(r"^(=+|-+)\s*$", under) and not stripped.startswith("-"):
                found.append((index, 1 if under.startswith("=") else 2, stripped))
    return found


def chunk_documental(text: str, *, source_type: str = "text", break_level: int = 0) -> list[ChunkDraft]:
    """Chunks of whole paragraphs under their heading path; a heading of level <= break_level (a slide's title,
    a sheet's name) always starts a new chunk."""
    lines = text.split("\n")
    blocks: list[_Block] = []
    heading_at = {index: (level, title) for index, level, title in _headings(lines, source_type)}
    stack: list[tuple[int, str]] = []
    heading = ""
    start = 0
    for index, line in enumerate(lines + [""]):
        boundary = index in heading_at or index == len(lines)
        blank = not line.strip()
        if boundary or blank:
            if index > start:
                blocks.append(_Block(start, index, heading))
            if boundary and index < len(lines):
                level, title = heading_at[index]
                stack = [(lvl, ttl) for lvl, ttl in stack if lvl < level] + [(level, title)]
                heading = HEADING_SEPARATOR.join(ttl for _, ttl in stack)
            start = index if boundary else index + 1
    # A heading line and its underline stay with the paragraph that follows.
    merged: list[_Block] = []
    for block in blocks:
        if (
            merged
            and merged[-1].heading == block.heading
            and merged[-1].end - merged[-1].start <= 3
            and (merged[-1].start in heading_at)
        ):
            merged[-1] = _Block(merged[-1].start, block.end, block.heading)
        else:
            merged.append(block)
    hard = frozenset(index for index, (level, _) in heading_at.items() if level <= break_level)
    return _pack(lines, merged, overlap=True, hard=hard)


# --- code ------------------------------------------------------------------------------------
TREE_SITTER_GRAMMARS = {
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "bash": ("tree_sitter_bash", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
}


@cache
def tree_sitter_parser(language: str):
    import importlib

    import tree_sitter

    module_name, attribute = TREE_SITTER_GRAMMARS[language]
    module = importlib.import_module(module_name)
    return tree_sitter.Parser(tree_sitter.Language(getattr(module, attribute)()))


def _python_blocks(text: str) -> list[tuple[int, int, str]] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    lines = text.split("\n")
    return _python_spans(tree.body, lines, prefix="")


def _python_name(node: ast.stmt) -> str:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return f"def {node.name}"
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    return ""


def _python_spans(body: list[ast.stmt], lines: list[str], *, prefix: str) -> list[tuple[int, int, str]]:
    spans = []
    for node in body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        end = node.end_lineno or node.lineno
        name = _python_name(node)
        label = f"{prefix}{HEADING_SEPARATOR}{name}" if prefix and name else (name or prefix)
        if isinstance(node, ast.ClassDef) and _block_len(lines, start, end) > MAX_CHARS and node.body:
            # A class too big for one chunk: its header, then each member, named "class X › def m".
            first = node.body[0]
            body_start = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", [])]) - 1
            spans.append((start, body_start, label))
            spans.extend(_python_spans(node.body, lines, prefix=label))
        else:
            spans.append((start, end, label))
    return spans


def _tree_sitter_blocks(text: str, language: str) -> list[tuple[int, int, str]] | None:
    if language not in TREE_SITTER_GRAMMARS:
        return None
    try:
        tree = tree_sitter_parser(language).parse(text.encode("utf-8"))
    except Exception:  # a missing grammar package degrades to blank-line blocks
        return None
    spans = []
    for node in tree.root_node.children:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            for child in node.children:  # export_statement → declaration
                name_node = child.child_by_field_name("name")
                if name_node is not None:
                    break
        name = name_node.text.decode("utf-8", "replace") if name_node is not None and name_node.text else ""
        kind = node.type.replace("_declaration", "").replace("_definition", "").replace("_item", "")
        spans.append((node.start_point[0], node.end_point[0] + 1, f"{kind} {name}".strip() if name else ""))
    return spans


def _blank_line_blocks(lines: list[str]) -> list[tuple[int, int, str]]:
    spans, start = [], None
    for index, line in enumerate(lines):
        top_level = line.strip() and not line[0].isspace()
        if top_level and start is not None and index > 0 and not lines[index - 1].strip():
            spans.append((start, index, ""))
            start = index
        if start is None and line.strip():
            start = index
    if start is not None:
        spans.append((start, len(lines), ""))
    return spans


def chunk_code(text: str, *, language: str = "") -> list[ChunkDraft]:
    lines = text.split("\n")
    if language == "python":
        spans = _python_blocks(text)
    else:
        spans = _tree_sitter_blocks(text, language)
    if not spans:
        spans = _blank_line_blocks(lines)
    blocks: list[_Block] = []
    cursor = 0
    for start, end, name in sorted(spans):
        start = max(start, cursor)
        # Comments and blank lines just above a definition belong to it.
        if start > cursor:
            blocks.append(_Block(cursor, start, ""))
        blocks.append(_Block(start, max(end, start + 1), name))
        cursor = max(end, start + 1)
    if cursor < len(lines):
        blocks.append(_Block(cursor, len(lines), ""))
    blocks = _attach_leading_comments(lines, blocks)
    drafts = _pack(lines, blocks, overlap=False)
    for draft in drafts:
        if not draft.heading:
            draft.heading = ""
    return drafts


def _attach_leading_comments(lines: list[str], blocks: list[_Block]) -> list[_Block]:
    out: list[_Block] = []
    for block in blocks:
        if out and not out[-1].heading and block.heading and out[-1].end == block.start:
            gap = lines[out[-1].start : out[-1].end]
            if all(not line.strip() or line.lstrip().startswith(("#", "//", "/*", "*", "--")) for line in gap):
                out[-1] = _Block(out[-1].start, block.end, block.heading)
                continue
        out.append(block)
    return out


def assign_pages(drafts: list[ChunkDraft], page_offsets: list[tuple[int, int, str]]) -> None:
    """Give each chunk the pages it covers; page_offsets = [(offset, number, label)] in the extracted text.

    A chunk records the page of its first character, of its last, and where inside its text each further
    page begins, so a hit or a citation can name the page its matching text actually sits on."""
    if not page_offsets:
        return
    starts = [offset for offset, _, _ in page_offsets]
    for draft in drafts:
        position = max(0, bisect.bisect_right(starts, draft.char_start) - 1)
        draft.page, draft.page_label = page_offsets[position][1], page_offsets[position][2]
        end = draft.char_start + len(draft.text)
        spans: list[list[Any]] = [[0, draft.page, draft.page_label]]
        for offset, number, label in page_offsets[position + 1 :]:
            if offset >= end:
                break
            spans.append([offset - draft.char_start, number, label])
        draft.page_end, draft.page_spans = spans[-1][1], spans if len(spans) > 1 else []
