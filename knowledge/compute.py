"""One read-only SQL `SELECT` over one kept table (knowledge.models.DocumentTable), in an engine that holds only that
table's rows: an in-memory SQLite database of its own, never the application's.

What may run is decided by the engine, not by reading the query's text: SQLite's authorizer allows reading the
table (`data`) and calling a list of pure functions, and refuses everything else (another table, `sqlite_master`,
`ATTACH`, `PRAGMA`, any write, a temporary table or view); a progress handler stops a query past its time limit;
at most `max_rows` rows come back; one statement at a time (the driver refuses two). The standard library's sqlite3
is the engine: it is what Python ships, holds nothing but what is loaded into it, and its authorizer is the
well-kept way to confine a query (DuckDB, the other candidate, is a 40 MB wheel and has no per-statement authorizer).

The table is `data`; its columns keep their names (quoted as SQL identifiers, whatever they hold), numbers are
REAL, dates ISO text, the rest text as found; `_row` is each row's number in its source (what a citation names)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.ingest.tables import as_date, as_number

TABLE = "data"
ROW_COLUMN = "_row"
MAX_ROWS = 200
TIME_LIMIT_S = 2.0
FUNCTIONS = frozenset({
    "count", "sum", "total", "avg", "min", "max", "group_concat", "abs", "round", "lower", "upper", "length", "trim",
    "ltrim", "rtrim", "substr", "substring", "replace", "instr", "coalesce", "ifnull", "nullif", "iif", "cast",
    "date", "strftime", "julianday", "like", "glob", "printf", "format", "cume_dist", "dense_rank", "rank",
    "row_number", "percent_rank", "ntile", "lag", "lead", "first_value", "last_value",
})  # fmt: skip


class QueryRefused(ValueError):
    """The query cannot run here (it reads or writes what it may not, it is not one SELECT, it ran too long, or it
    is not valid SQL); the message says which, in plain words."""


@dataclass
class Computed:
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool  # more rows than max_rows matched
    seconds: float


def quoted(name: str) -> str:
    """A column's name as an SQL identifier, whatever characters it holds."""
    return '"' + name.replace('"', '""') + '"'


def load(
    columns: Sequence[dict[str, str]], rows: Sequence[Sequence[str]], row_numbers: Sequence[int]
) -> sqlite3.Connection:
    """An in-memory database holding the one table, typed; nothing else."""
    connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    kinds = {"number": "REAL", "date": "TEXT", "text": "TEXT"}
    typed = [f"{quoted(c['name'])} {kinds.get(c.get('type', 'text'), 'TEXT')}" for c in columns]
    definition = ", ".join([f"{quoted(ROW_COLUMN)} INTEGER", *typed])
    connection.execute(f"CREATE TABLE {TABLE} ({definition})")
    converted = []
    for number, row in zip(row_numbers, rows, strict=False):
        values: list[Any] = [number]
        for column, cell in zip(columns, row, strict=False):
            kind = column.get("type", "text")
            if not cell:
                values.append(None)
            elif kind == "number":
                values.append(as_number(cell))
            elif kind == "date":
                values.append(as_date(cell) or cell)
            else:
                values.append(cell)
        converted.append(values + [None] * (len(columns) + 1 - len(values)))
    marks = ", ".join("?" * (len(columns) + 1))
    connection.executemany(f"INSERT INTO {TABLE} VALUES ({marks})", converted)
    return connection


def _authorizer(action: int, first: str | None, second: str | None, database: str | None, source: str | None) -> int:
    if action == sqlite3.SQLITE_SELECT:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_READ:
        return sqlite3.SQLITE_OK if first == TABLE and database in ("main", None) else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if (second or "").lower() in FUNCTIONS else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_RECURSIVE:  # a WITH RECURSIVE: bounded by the time limit like any query
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def run(connection: sqlite3.Connection, sql: str, *, max_rows: int = MAX_ROWS,
        time_limit_s: float = TIME_LIMIT_S) -> Computed:  # fmt: skip
    """Run one SELECT over `data`; QueryRefused when it may not or cannot run."""
    started = time.monotonic()
    deadline = started + time_limit_s
    connection.set_authorizer(_authorizer)
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    try:
        cursor = connection.execute(sql)
        fetched = cursor.fetchmany(max_rows + 1)
    except sqlite3.DatabaseError as exc:
        message = str(exc)
        if "interrupted" in message:
            raise QueryRefused(f"the query ran past its time limit ({time_limit_s:g} s)") from exc
        if "not authorized" in message or "prohibited" in message:
            raise QueryRefused("the query reads or does what a query over this one table may not") from exc
        raise QueryRefused(f"the query is not valid here: {message}") from exc
    except sqlite3.ProgrammingError as exc:  # two statements, or none
        raise QueryRefused(f"one SELECT statement at a time: {exc}") from exc
    finally:
        connection.set_progress_handler(None, 0)
        connection.set_authorizer(None)
    if cursor.description is None:
        raise QueryRefused("the query returns no rows (only a SELECT may run)")
    columns = [d[0] for d in cursor.description]
    return Computed(columns, [list(r) for r in fetched[:max_rows]], len(fetched) > max_rows,
                    time.monotonic() - started)  # fmt: skip


def compute(table: Any, sql: str, **limits: Any) -> Computed:
    """One SELECT over one kept table (a DocumentTable, or anything with its columns, rows and row_numbers)."""
    connection = load(table.columns, table.rows, table.row_numbers)
    try:
        return run(connection, sql, **limits)
    finally:
        connection.close()
