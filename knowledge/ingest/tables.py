"""Tables as tables: every table a document holds (a spreadsheet's sheets, a CSV or TSV file, the Markdown tables
that Markdown, Word, PowerPoint and OpenDocument text become) kept with its columns, each column's type (number,
date, text) and its rows as found, so an answer can compute over it (knowledge/compute.py) and cite the rows it used.

A cell is data, whatever it says (a formula string, a very long text, quotes in a column's name): it is cut to
MAX_CELL_CHARS and never read as anything else. A table is at most MAX_TABLE_ROWS rows and MAX_COLUMNS columns."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from dataclasses import dataclass, field

MAX_TABLE_ROWS = 100_000
MAX_COLUMNS = 200
MAX_CELL_CHARS = 1000
MAX_TABLES = 50  # per document

NUMBER_RE = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$|^[-+]?\.\d+$")
DATE_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y/%m/%d", "%d/%m/%Y", "%d.%m.%Y")
SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass
class Table:
    name: str  # the sheet, the heading it sits under, or the file
    columns: list[str]
    rows: list[list[str]]
    row_numbers: list[int]  # as the source shows them: a spreadsheet's row, a text file's line
    types: list[str] = field(default_factory=list)  # per column: number | date | text

    def __post_init__(self) -> None:
        self.columns = _unique([(c or f"Column {i + 1}")[:200] for i, c in enumerate(self.columns[:MAX_COLUMNS])])
        width = len(self.columns)
        self.rows = [[_cell(v) for v in (row + [""] * width)[:width]] for row in self.rows[:MAX_TABLE_ROWS]]
        self.row_numbers = self.row_numbers[: len(self.rows)]
        self.types = self.types or column_types(self.rows, width)


def _cell(value: object) -> str:
    text = "" if value is None else str(value).strip()
    return text[:MAX_CELL_CHARS]


def _unique(names: list[str]) -> list[str]:
    """Column names as given, a repeated one numbered (`Price`, `Price 2`): each must name one column."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        key = name.lower()
        seen[key] = seen.get(key, 0) + 1
        out.append(name if seen[key] == 1 else f"{name} {seen[key]}")
    return out


def as_number(text: str) -> float | None:
    """A cell as a number (`1,234.50`, `-3`, `.5`), else None; a currency or unit makes it text."""
    text = text.strip()
    if not NUMBER_RE.match(text):
        return None
    return float(text.replace(",", ""))


def as_date(text: str) -> str | None:
    """A cell as an ISO date (`2026-03-01`, `01/03/2026` read day first), else None."""
    text = text.strip()
    for form in DATE_FORMATS:
        try:
            return dt.datetime.strptime(text, form).date().isoformat()
        except ValueError:
            continue
    return None


def column_types(rows: list[list[str]], width: int) -> list[str]:
    """Each column's type: number when every non-empty cell is one, date likewise, else text."""
    types = []
    for index in range(width):
        values = [row[index] for row in rows if index < len(row) and row[index]]
        if values and all(as_number(v) is not None for v in values):
            types.append("number")
        elif values and all(as_date(v) is not None for v in values):
            types.append("date")
        else:
            types.append("text")
    return types


def sheet_table(name: str, rows: list[list[str]], numbers: list[int]) -> Table | None:
    """A spreadsheet's sheet (its first non-empty row the header), or None when it has no data row."""
    kept = [(n, row) for n, row in zip(numbers, rows, strict=False) if any(c.strip() for c in row)]
    filled = [sum(1 for c in row if c.strip()) for _, row in kept]
    # The header is the first row about as wide as the table: a title line above it ("Order ledger, March") is not.
    start = next((i for i, count in enumerate(filled) if count >= 2 and count >= 0.6 * max(filled)), 0) if kept else 0
    kept = kept[start:]
    if len(kept) < 2:
        return None
    (_, header), body = kept[0], kept[1:]
    width = max(len(header), *(len(row) for _, row in body))
    header = header + [""] * (width - len(header))
    return Table(name, header, [row for _, row in body], [n for n, _ in body])


def delimited_table(text: str, name: str, delimiter: str) -> Table | None:
    """A CSV or TSV file's one table: its first row the header; row numbers are the file's lines."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    rows: list[list[str]] = []
    numbers: list[int] = []
    for row in reader:
        if len(rows) > MAX_TABLE_ROWS:
            break
        rows.append(row)
        numbers.append(reader.line_num)
    return sheet_table(name, rows, numbers)


def markdown_tables(text: str, name: str) -> list[Table]:
    """The pipe tables of Markdown text (as Markdown, Word, PowerPoint and OpenDocument files read), each named by
    the heading it sits under (else `name`); row numbers are the text's lines."""
    lines = text.split("\n")
    tables: list[Table] = []
    heading = name
    index = 0
    while index < len(lines) and len(tables) < MAX_TABLES:
        line = lines[index]
        found = HEADING_RE.match(line)
        if found:
            heading = found.group(2).strip()
        if line.lstrip().startswith("|") and index + 1 < len(lines) and SEPARATOR_RE.match(lines[index + 1]):
            header = _pipe_cells(line)
            rows, numbers = [], []
            index += 2
            while index < len(lines) and lines[index].lstrip().startswith("|"):
                rows.append(_pipe_cells(lines[index]))
                numbers.append(index + 1)
                index += 1
            if rows:
                tables.append(Table(heading, header, rows, numbers))
            continue
        index += 1
    return tables


def _pipe_cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return [cell.strip().replace("\\|", "|") for cell in cells]
