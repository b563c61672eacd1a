"""The tables a read's excerpts show, attached so an answer can compute over them (chat/computing.py)."""

from __future__ import annotations

import re
from typing import Any

from knowledge.models import Chunk
from knowledge.search.hits import RetrievedChunk
from knowledge.selectors import tables_of_versions
from tenants.principals import Viewer


def with_tables(viewer: Viewer, results: list[RetrievedChunk]) -> None:
    """Say of each hit that shows a kept table (knowledge.models.DocumentTable of its version: the sheet or the
    heading the chunk is under, or the version's one table) which it is: its name, columns and rows, so an agent
    knows it can ask for a computation over it."""
    shows = [r for r in results if r.chunk.document_version_id and _may_show_table(r.chunk)]
    versions = {r.chunk.document_version_id for r in shows}
    if not versions:  # no hit can show a table: no query (most hits are prose)
        return
    kept: dict[int, list[Any]] = {}
    for table in tables_of_versions(viewer=viewer, version_ids=list(versions)).defer("rows", "row_numbers"):
        kept.setdefault(table.version_id, []).append(table)
    for result in shows:
        tables = kept.get(result.chunk.document_version_id or 0, [])
        named = [t for t in tables if t.name == result.chunk.heading] or (tables if len(tables) == 1 else [])
        if named:
            table = named[0]
            columns = [{"name": c["name"], "type": c.get("type", "text")} for c in table.columns]
            result.table = {"name": table.name, "columns": columns, "rows": table.row_count}


TABLE_TEXT_RE = re.compile(r"^\s*\|.*\|\s*$|\bRow \d", re.MULTILINE)  # a Markdown table row, a sheet's `Row n:`


def _may_show_table(chunk: Chunk) -> bool:
    """Whether a chunk's text is a table's: a CSV or TSV file's, Markdown table rows, or a sheet's `Row n` lines."""
    whole = chunk.document.display_key.lower().endswith((".csv", ".tsv"))  # the file is its table
    return whole or bool(TABLE_TEXT_RE.search(chunk.text))
