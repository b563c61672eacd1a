"""One read-only SQL `SELECT` over one kept table (knowledge.models.DocumentTable), in an engine that holds only that
table's rows: an in-memory SQLite database of its own, never the application's.

What may run is decided by the engine, not by reading the query's text: SQLite's authorizer allows reading the
table (`data`) and calling a list of pure functions, and refuses everything else (another table, `sqlite_master`,
`ATTACH`, `PRAGMA`, any write, a temporary table or view); a column of ranges ("3 to 5 years") is read with
`in_range(column, 4)` (knowledge/ranges.py); a progress handler stops a query past its time limit;
at most `max_rows` rows come back; one statement at a time (the driver refuses two). The standard library's sqlite3
is the engine: it is what Python ships, holds nothing but what is loaded into it, and its authorizer is the
well-kept way to confine a query (DuckDB, the other candidate, is a 40 MB wheel and has no per-statement authorizer).

The table is `data`; its columns keep their names (quoted as SQL identifiers, whatever they hold), numbers are
REAL, dates ISO text, the rest text as found; `_row` is each row's number in its source (what a citation names)."""

from __future__ import annotations

import functools
import re
import sqlite3
import time
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from knowledge.ingest.tables import MAX_TABLE_ROWS, as_date, as_number
from knowledge.ranges import in_range, is_range_column, numbers_stated, numbers_written

TABLE = "data"
ROW_COLUMN = "_row"
MAX_ROWS = 200
TIME_LIMIT_S = 2.0
MAX_VALUE_BYTES = 1_000_000  # the longest string or blob a query may make (memory: SQLITE_LIMIT_LENGTH)
MAX_FORMAT_WIDTH = 1000  # printf's widest width or precision
FUNCTIONS = frozenset({
    "count", "sum", "total", "avg", "min", "max", "group_concat", "abs", "round", "lower", "upper", "length", "trim",
    "ltrim", "rtrim", "substr", "substring", "replace", "instr", "coalesce", "ifnull", "nullif", "iif", "cast",
    "date", "strftime", "julianday", "like", "glob", "printf", "format", "cume_dist", "dense_rank", "rank",
    "row_number", "percent_rank", "ntile", "lag", "lead", "first_value", "last_value", "in_range",
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


KEYWORDS = frozenset(
    "abort action add after all alter and as asc before begin between by case cast check collate column commit "
    "constraint create cross current default delete desc distinct drop each else end escape except exists filter "
    "from full glob group having if in index inner insert intersect into is isnull join key left like limit match "
    "natural not notnull null of offset on or order outer over partition primary range references regexp replace "
    "right row rows select set table then to union unique update using values view when where window with".split()
)  # fmt: skip


def identifiers(columns: Sequence[dict[str, str]]) -> list[str]:
    """Each column's name in the engine: its words in lower case joined by `_` ("Unit price" → unit_price), an
    SQL keyword followed by `_` (order_), never empty, each once. Whatever a column's name holds (quotes, SQL),
    its identifier is only letters, digits and `_`; the names as found stay what answers and citations show."""
    out: list[str] = []
    for column in columns:
        folded = unicodedata.normalize("NFKD", column["name"]).encode("ascii", "ignore").decode().lower()
        name = re.sub(r"[^a-z0-9]+", "_", folded).strip("_")[:60] or "column"
        if name[0].isdigit():
            name = f"c_{name}"
        if name in KEYWORDS or name == ROW_COLUMN.strip("_"):
            name = f"{name}_"
        base, n = name, 1
        while name in out:
            n += 1
            name = f"{base}_{n}"
        out.append(name)
    return out


def load(
    columns: Sequence[dict[str, str]], rows: Sequence[Sequence[str]], row_numbers: Sequence[int]
) -> sqlite3.Connection:
    """An in-memory database holding the one table, typed; nothing else."""
    connection = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    kinds = {"number": "REAL", "date": "TEXT", "text": "TEXT COLLATE NOCASE"}  # 'west' finds "West"
    names = identifiers(columns)
    typed = [f"{quoted(n)} {kinds.get(c.get('type', 'text'), 'TEXT')}" for n, c in zip(names, columns, strict=True)]
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
    # Limits the progress handler cannot give: one function call runs to its end between its checks. No value a
    # query makes may exceed MAX_VALUE_BYTES (memory), and printf's width and precision are bounded (its
    # `%.*c` with a precision of a billion loops a billion times, whatever the length limit, before it gives up).
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    formatter = sqlite3.connect(":memory:", check_same_thread=False)
    formatter.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    for name in ("printf", "format"):
        connection.create_function(name, -1, functools.partial(_bounded_printf, formatter), deterministic=True)
    connection.create_function("in_range", 2, in_range, deterministic=True)  # "3 to 5 years" holds 4: 1
    return connection


_FORMAT_RE = re.compile(r"%[-+ 0#,!]*(\*|\d+)?(?:\.(\*|\d+))?")


def _bounded_printf(formatter: sqlite3.Connection, text: Any, *values: Any) -> Any:
    """SQLite's printf, refused when a width or precision (written, or given by `*`) is over MAX_FORMAT_WIDTH."""
    if text is None:
        return None
    starred = False
    for match in _FORMAT_RE.finditer(str(text)):
        for part in match.groups():
            if part == "*":
                starred = True
            elif part and int(part) > MAX_FORMAT_WIDTH:
                raise ValueError(f"printf: a width or precision over {MAX_FORMAT_WIDTH}")
    if starred and any(isinstance(v, int | float) and abs(v) > MAX_FORMAT_WIDTH for v in values):
        raise ValueError(f"printf: a width or precision over {MAX_FORMAT_WIDTH}")
    marks = ", ".join("?" * (len(values) + 1))
    return formatter.execute(f"SELECT printf({marks})", (text, *values)).fetchone()[0]


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


def run(connection: sqlite3.Connection, sql: str, *, params: Sequence[Any] = (), max_rows: int = MAX_ROWS,
        time_limit_s: float = TIME_LIMIT_S) -> Computed:  # fmt: skip
    """Run one SELECT over `data` (with `params` for its `?`); QueryRefused when it may not or cannot run."""
    started = time.monotonic()
    deadline = started + time_limit_s
    connection.set_authorizer(_authorizer)
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
    try:
        cursor = connection.execute(sql, params)
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


@contextmanager
def engine(table: Any) -> Iterator[sqlite3.Connection]:
    """The engine holding one kept table (a DocumentTable, or anything with its columns, rows and row_numbers),
    loaded once for every query of one answer, closed after."""
    connection = load(table.columns, table.rows, table.row_numbers)
    try:
        yield connection
    finally:
        connection.close()


def compute(table: Any, sql: str, **limits: Any) -> Computed:
    """One SELECT over one kept table, in an engine of its own."""
    with engine(table) as connection:
        return run(connection, sql, **limits)


@dataclass
class Used:
    """The rows a result was computed from (their numbers in the source, up to `limit`) and how many there are."""

    rows: list[int]
    count: int


def rows_used(connection: sqlite3.Connection, sql: str, result: Computed, *, limit: int = 5) -> Used | None:
    """Which of the table's rows (in `connection`, an `engine`) a query's result stands on: for a query that
    aggregates, the rows its WHERE keeps (within the groups the result shows); otherwise the rows it returned. None
    when the query cannot be read so (sqlglot parses it) or its rows cannot be listed within the engine's limits
    (what may run is still decided by the engine alone)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return None
    if not isinstance(tree, exp.Select) or tree.args.get("with") or tree.find(exp.Subquery, exp.Union):
        return None
    grouped = tree.args.get("group")
    aggregates = bool(grouped) or any(e.find(exp.AggFunc) for e in tree.expressions)
    if aggregates:
        query = exp.select(exp.column(ROW_COLUMN, quoted=True)).from_(TABLE)
        if tree.args.get("where"):
            query = query.where(tree.args["where"].this.copy())
        params: list[Any] = []
        if grouped and len(grouped.expressions) == 1 and result.rows:
            key = grouped.expressions[0]
            shown = [e.unalias() if isinstance(e, exp.Alias) else e for e in tree.expressions]
            at = next((i for i, e in enumerate(shown) if e == key), None)
            if at is None:
                return None
            values = [row[at] for row in result.rows]
            params = values
            marks = ", ".join("?" * len(values))
            query = query.where(f"({key.sql('sqlite')}) IN ({marks})")
        sql_rows = query.order_by(exp.column(ROW_COLUMN, quoted=True)).sql("sqlite")
    else:
        query = tree.copy()
        query.set("expressions", [exp.column(ROW_COLUMN, quoted=True)])
        query.set("distinct", None)
        sql_rows, params = query.sql("sqlite"), []
    try:
        listed = run(connection, sql_rows, params=params, max_rows=MAX_TABLE_ROWS)
        numbers = [int(r[0]) for r in listed.rows if r[0] is not None]
    except (QueryRefused, ValueError):
        return None
    return Used(numbers[:limit], len(numbers))


def grounded(sql: str, table: Any, question: str) -> tuple[str, list[str]]:
    """The query with its text filters checked against what the table holds (a small model puts a value in the
    wrong column, or adds a filter the question never asked for): `region = 'Globex'` where Globex is a customer
    becomes `customer = 'Globex'`; a value its column does not hold takes the one value of that column the question
    names (`status = 'Entregado'` → `status = 'delivered'`, asked "… delivered"); a filter on a value the question
    never names is dropped, unless its column holds only two values (a yes/no the question's words imply: "remote
    employees"), and computing then falls back (chat/constraints.py). Returns the query and what was
    changed, in words (shown with the answer). A query sqlglot cannot read is returned as it is (the engine decides
    whether it runs)."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except sqlglot.errors.SqlglotError:
        return sql, []
    names = identifiers(table.columns)
    held: dict[str, set[str]] = {}
    for i, (name, column) in enumerate(zip(names, table.columns, strict=True)):
        if column.get("type", "text") == "text":
            cells = {row[i].casefold() for row in table.rows if i < len(row) and row[i]}
            if len(cells) <= 200:
                held[name] = cells
    asked = question.casefold()
    changes: list[str] = _positioned(tree, table, question)  # a range's row, before any filter is judged
    for node in list(tree.find_all(exp.EQ, exp.In)):
        column, literals = (node.this, node.expressions) if isinstance(node, exp.In) else (node.this, [node.expression])
        if isinstance(node, exp.EQ) and isinstance(node.expression, exp.Column):
            column, literals = node.expression, [node.this]
        if not isinstance(column, exp.Column) or column.name.lower() not in held or not literals:
            continue
        if not all(isinstance(v, exp.Literal) and v.is_string for v in literals):
            continue
        wanted = [str(v.this).casefold() for v in literals]
        named = all(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", asked) for w in wanted)
        cells = held[column.name.lower()]
        if all(w in cells for w in wanted) and (named or len(cells) <= 2):
            continue  # what the question asks (or the yes/no its words imply)
        meant = [v for v in cells if len(v) > 2 and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", asked)]
        if len(literals) == 1 and wanted[0] not in cells and len(meant) == 1:  # 'Entregado' for the 'Delivered' named
            changes.append(f"{column.name} = '{meant[0]}' (the value of {column.name} the question names, not "
                           f"'{wanted[0]}')")  # fmt: skip
            literals[0].replace(exp.Literal.string(meant[0]))
            continue
        other = next((n for n, values in held.items() if all(w in values for w in wanted)), None)
        if named and other is not None and other != column.name.lower():
            changes.append(f"{column.name} → {other} (where {', '.join(wanted)} is found)")
            column.set("this", exp.to_identifier(other))
        elif not named:
            changes.append(f"dropped {node.sql('sqlite')} (the question does not ask for it)")
            node.replace(exp.true())
    return (tree.sql("sqlite") if changes else sql), changes


def range_columns(table: Any) -> dict[str, list[str]]:
    """{identifier: its distinct cells} for each column of the table whose every value names a range ("3 to 5
    years"; knowledge/ranges.py), read from its first 5,000 rows; a column of more than 200 values is no table of
    ranges."""
    out: dict[str, list[str]] = {}
    for name, (i, column) in zip(identifiers(table.columns), enumerate(table.columns), strict=True):
        if column.get("type", "text") == "text":
            cells = list({row[i] for row in table.rows[:5000] if i < len(row) and row[i]})
            if len(cells) <= 200 and is_range_column(cells):
                out[name] = cells
    return out


def stated_numbers(question: str, table: Any) -> set[float]:
    """The numbers a question states (knowledge.ranges.numbers_stated: digits, thousands, number words), but not
    those of the table's name or columns ("the 2026 budget" of “Budget 2026”)."""
    own = " ".join([getattr(table, "name", ""), *(c["name"] for c in table.columns)])
    return numbers_stated(question) - set(numbers_written(own))


def _positioned(tree: Any, table: Any, question: str) -> list[str]:
    """A table of ranges read at the position the question states: when it states one number that one range of a
    column holds ("an order of 600 units", "500 to 999 units"), a comparison of that column with a text
    (`order_size = '100 to 499 units'`, the row the model guessed) becomes `in_range(order_size, 600) = 1`, and a
    query that reads the table without the number gets that filter. What was done, in words."""
    from sqlglot import exp

    ranges = range_columns(table)
    if len(ranges) != 1:
        return []
    ((name, cells),) = ranges.items()
    held = {n for n in stated_numbers(question, table) if sum(in_range(c, n) or 0 for c in cells) == 1}
    if len(held) != 1:
        return []
    number = held.pop()
    position = exp.EQ(this=exp.Anonymous(this="in_range", expressions=[exp.column(name), exp.Literal.number(
        f"{number:g}")]), expression=exp.Literal.number(1))  # fmt: skip
    said = f"in_range({name}, {number:g}) = 1 (the row whose range holds the question's {number:g})"
    for node in list(tree.find_all(exp.EQ)):
        column, value = node.this, node.expression
        if isinstance(value, exp.Column):
            column, value = value, column
        if isinstance(column, exp.Column) and column.name.lower() == name and isinstance(value, exp.Literal):
            if not (value.is_string and in_range(str(value.this), number)):
                said = f"{said}, not {node.sql('sqlite')}"
            node.replace(position.copy())
            return [said]
    for node in tree.find_all(exp.Anonymous):
        if node.name.lower() == "in_range":
            return []  # the model read the position itself
    literals = [n for lit in tree.find_all(exp.Literal) for n in numbers_written(str(lit.this))]
    if isinstance(tree, exp.Select) and number not in literals:
        where = tree.args.get("where")
        if where is not None and isinstance(where.this, exp.Boolean) and where.this.this:
            where.set("this", position.copy())  # WHERE TRUE: the model compared nothing
        else:
            tree.where(position.copy(), copy=False)
        return [said]
    return []


def schema(table: Any, *, samples: int = 3, listed: int = 12) -> str:
    """The table as the model is shown it: each column's identifier, its type, its name as found and what it
    holds (every value when there are at most `listed` distinct ones, else a few samples; a number's or a date's
    range)."""
    lines = []
    names = identifiers(table.columns)
    for i, (name, column) in enumerate(zip(names, table.columns, strict=True)):
        kind = column.get("type", "text")
        values = [row[i] for row in table.rows if i < len(row) and row[i]]
        found = f'"{column["name"][:80]}"'
        if kind == "number":
            numbers = [n for n in (as_number(v) for v in values) if n is not None]
            held = f"from {_plain(min(numbers))} to {_plain(max(numbers))}" if numbers else "empty"
            lines.append((f"{name} REAL", f"{found}, {held}"))
        elif kind == "date":
            dates = sorted(d for d in (as_date(v) for v in values) if d)
            held = f"from '{dates[0]}' to '{dates[-1]}'" if dates else "empty"
            lines.append((f"{name} TEXT", f"{found}, a date 'YYYY-MM-DD' {held}; a month: strftime('%Y-%m', {name})"))
        else:
            distinct = list(dict.fromkeys(values))
            shown = distinct if len(distinct) <= listed else distinct[:samples]
            held = ", ".join("'" + v[:60].replace("'", "''") + "'" for v in shown)
            word = "one of" if len(distinct) <= listed else "e.g."
            if is_range_column(distinct):  # a table of ranges: a position is read with in_range, never by its text
                word = f"ranges (the row for a number n: in_range({name}, n) = 1), one of"
            lines.append((f"{name} TEXT", f"{found}, {word} {held}" if held else found))
    body = "\n".join(f"  {column}{',' if n < len(lines) - 1 else ''} -- {comment}"
                       for n, (column, comment) in enumerate(lines))  # fmt: skip
    return f"CREATE TABLE {TABLE} (\n{body}\n);"


def _plain(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"
