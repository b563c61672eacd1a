"""Answers that compute: a count, a sum, an average, a minimum or maximum, a ranking, distinct values or a filtered
list over one of the company's tables, written by the chat model as one SQL SELECT and run by the engine
(knowledge/compute.py), never by the model's arithmetic.

When a question asks for one of those (`asks_to_compute`: its words, or a list of what a column holds) and one of
the tables the retrieved excerpts come from holds the columns it names (`choose_table`: the very version retrieval
found, so access, validity and as-of are decided where they are for chunks), the model is shown that table's schema
(column names, types, every value of a column with few, a few samples of the others, ranges) and writes the query
and one sentence with `{result}` where the result goes. The sentence states what the engine computed, put in by
this module, so the stated number is the computed one; a sentence that states any other number is replaced by a
plain one. The answer cites the table and the rows the result stands on (knowledge.compute.rows_used).

A query that the engine refuses, that fails or that finds nothing returns a `Fallback`: the normal answer is given,
and says why computing did not answer. Lookups ("what is the price of SKU-024?") never come here."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chat import wording
from chat.citations import citation_of
from chat.constraints import COMPUTE_WORDS, COVERAGE, coverage, terms, unkept, values_meant
from chat.excerpts import embed_multilingual
from chat.prompting import (
    TABLE_ASK_QUERY,
    TABLE_NOT_ASKED_AGAIN,
    TABLE_ONE_VALUE_AGAIN,
    TABLE_SYSTEM,
    table_messages,
)
from core.languages import answer_language
from inference import translation
from knowledge.claims import fold
from knowledge.compute import (
    Computed,
    QueryRefused,
    Used,
    engine,
    grounded,
    range_columns,
    rows_used,
    run,
    schema,
    stated_numbers,
)
from knowledge.models import DocumentTable
from knowledge.search.retrieval import RetrievedChunk
from knowledge.selectors import tables_of_versions
from tenants.principals import Viewer

logger = logging.getLogger(__name__)

SQL_MAX_TOKENS = 200
LISTED = 20  # values said in the sentence; more are "and N more"
NUMBER_TOLERANCE = 0.005

# A question that asks for one quantity ("how much …", "what is the total …"), unless it asks for one per group.
ONE_VALUE = re.compile(
    r"^[\s¿¡]*(by how much|how (many|much)|what (is|was) the (total|sum|average|mean|number|count|largest|smallest|"
    r"highest|lowest|maximum|minimum|biggest|greatest)|cu[aá]nt[oa]s?|cu[aá]l (es|fue) el (total|promedio))\b",
    re.IGNORECASE,
)
PER_GROUP = re.compile(r"\b(each|per|every|broken down|grouped|por cada)\b", re.IGNORECASE)
LIST_WORDS = re.compile(r"^[\s¿¡\"'(]*(which|what|list|show|name|give|who|qu[eé]|cu[aá]les|lista|muestra)\b",
                        re.IGNORECASE)  # fmt: skip


@dataclass
class Choice:
    """The table a question is computed over, the hit of its document it was found by, and how well it fits."""

    table: DocumentTable
    hit: RetrievedChunk
    score: float
    # a Spanish question in the table's words: its English gloss and what it names by meaning
    # (chat/constraints.values_meant: Apertium glosses "entregados" as "handed", the table says Delivered)
    across: str = ""


@dataclass
class Computation:
    """A computed answer: its sentence (the result put in), its citation, its claim, and what was run."""

    text: str
    citation: dict[str, Any]
    claim: dict[str, Any]
    sql: str
    result: Computed
    timings: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Fallback:
    """Computing was tried and did not answer (why), so the normal answer is given and says so."""

    reason: str
    sql: str = ""
    table: str = ""


def plural_of(word: str, name: str) -> bool:
    """Whether `word` is the plural of a column's one-word name (offices of Office, SKUs of SKU, cities of City)."""
    return word in (f"{name}s", f"{name}es") or (name.endswith("y") and word == f"{name[:-1]}ies")


def may_compute(question: str) -> bool:
    """Whether the question's words could ask for a computation (its words, or a list's), before any table is read."""
    return bool(COMPUTE_WORDS.search(question) or LIST_WORDS.search(question))


def asks_to_compute(question: str, tables: Sequence[DocumentTable]) -> bool:
    """Whether the question asks for a computation: its words say so, it states a number and a table it may be
    computed over holds ranges (a position in them), or it asks which values a column holds ("which offices …",
    "list the SKUs …") of such a table."""
    if COMPUTE_WORDS.search(question):
        return True
    if any(
        getattr(table, "rows", None) and range_columns(table) and stated_numbers(question, table) for table in tables
    ):
        return True  # a position in a table of ranges: "what discount does an order of 600 units get?"
    if not LIST_WORDS.search(question):
        return False
    words = re.findall(r"\w+", fold(question))
    return any(plural_of(w, fold(c["name"])) for table in tables for c in table.columns for w in words)


def fit(question: str, table: DocumentTable) -> float:
    """How well a table fits a question: 2 for each column it names, 1 for each of its values it names (a
    region, a customer), 0.1 for each of its name's words (a tie-breaker: a name alone never fits)."""
    asked = terms(question)
    folded = " " + " ".join(re.findall(r"\w+", fold(question))) + " "
    score = 0.0
    for i, column in enumerate(table.columns):
        if terms(column["name"]) & asked:
            score += 2
        if column.get("type") == "text":
            cells = (row[i] for row in table.rows[:5000] if i < len(row) and row[i])
            values = {" ".join(re.findall(r"\w+", fold(cell))) for cell in cells}
            if len(values) <= 200:
                score += sum(1 for v in values if len(v) > 2 and f" {v} " in folded)
    return score + 0.1 * min(len(terms(table.name) & asked), 9)


def english_of(question: str, viewer: Viewer) -> str:
    """The question's English gloss when it is asked in Spanish (a table's columns and values are read in it too),
    else ""."""
    if answer_language(question) != "es":
        return ""
    return translation.gloss(question, "es", scope=str(viewer.tenant.pk)) or ""


def choose_table(question: str, hits: Sequence[RetrievedChunk], viewer: Viewer) -> tuple[Choice | None, list]:
    """The table of a retrieved version that names most of what the question asks (at least one of its columns or
    values, and at least COVERAGE of its content words: chat/constraints.py), with the best hit of its document;
    and the tables considered."""
    versions = {hit.chunk.document_version_id: hit for hit in reversed(list(hits))}  # each version's best hit
    tables = list(tables_of_versions(viewer=viewer, version_ids=list(versions)))
    best: Choice | None = None
    gloss = english_of(question, viewer)
    for table in tables:
        meant = values_meant(question, table, embed_multilingual, scope=str(viewer.tenant.pk)) if gloss else {}
        across = " ".join([gloss, *meant.values()]) if gloss else ""
        score = max(fit(question, table), fit(across, table) if across else 0.0)
        if max(coverage(question, table, meant), coverage(gloss, table) if gloss else 0.0) < COVERAGE:
            continue  # the question is about something else that shares a word with the table ("days")
        if score >= 1 and (best is None or score > best.score):
            best = Choice(table, versions[table.version_id], score, across)
    return best, tables


def prompt(question: str, table: DocumentTable) -> list[dict[str, str]]:
    where = f"“{table.name}” of {table.document.display_key}, {table.row_count} rows"
    return table_messages(question, where, schema(table))


def parsed(reply: str) -> tuple[str, str]:
    """(the query, the sentence) of the model's reply; the query runs to its end or its first `;`."""
    fenced = re.search(r"```(?:sql|sqlite)?\s*(.*?)```", reply, re.DOTALL | re.IGNORECASE)
    body = fenced.group(1) if fenced else reply
    start = re.search(r"\bSELECT\b", body, re.IGNORECASE)
    sql = body[start.start() :] if start else ""
    if not fenced:
        sql = re.split(r"\n\s*answer\s*:", sql, flags=re.IGNORECASE)[0]
    sql = sql.split(";")[0].strip()
    said = re.search(r"answer\s*:\s*(.+)", reply[fenced.end() :] if fenced else reply, re.IGNORECASE)
    return sql, (said.group(1).strip().splitlines()[0] if said else "")


def shown_value(value: Any) -> str:
    if isinstance(value, float):
        if value.is_integer():
            return f"{int(value):,}"
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def result_text(result: Computed, language: str) -> str:
    """The result as said in a sentence: one value; one row's values; a list of values or of rows."""
    rows = [[shown_value(v) for v in row] for row in result.rows]
    said = [row[0] if len(row) == 1 else f"{row[0]} ({', '.join(row[1:])})" for row in rows[:LISTED]]
    more = len(rows) - len(said) + (1 if result.truncated else 0)
    if more > 0:
        return wording.and_more(language, ", ".join(said), more)
    return wording.joined(language, said)


def sensible(result: Computed) -> str:
    """Why a result cannot answer (empty, or only NULL), or "" when it can."""
    if not result.rows:
        return "the query found no rows"
    if all(v is None for row in result.rows for v in row):
        return "the query's result is empty (NULL)"
    return ""


def numbers_in(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in re.findall(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?", text)]


def label(column: str) -> str:
    """A result column as a reader would name it: `TotalAmount` → "Total amount", `COUNT(*)` → "Count",
    `SUM(units)` → "Total of units"."""
    call = re.fullmatch(r"\s*(\w+)\s*\((.*)\)\s*", column)
    if call:
        word = {"count": "Count", "sum": "Total", "total": "Total", "avg": "Average", "min": "Minimum",
                "max": "Maximum"}.get(call.group(1).lower(), call.group(1))  # fmt: skip
        inner = label(call.group(2)).lower() if call.group(2).strip() not in ("*", "") else ""
        return f"{word} of {inner}" if inner else word
    words = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", column).replace("_", " ").replace('"', "").split()
    return " ".join(words).capitalize() if words else "Result"


def stated(sentence: str, value_text: str, question: str, result: Computed) -> str:
    """The sentence with the result put in; a plain one ("Total amount: 23,221.71.") when the model's template
    is missing or states a number that is neither the result nor the question's (the stated number must be the
    computed one)."""
    if sentence.count("{result}") == 1:
        template = sentence.replace("{result}", "\0")
        allowed = numbers_in(question)
        if all(any(abs(n - a) < NUMBER_TOLERANCE for a in allowed) for n in numbers_in(template.replace("\0", " "))):
            text = template.replace("\0", value_text)
            return text if text[-1:] in ".!?" else f"{text}."
    return f"{label(result.columns[0]) if result.columns else 'Result'}: {value_text}."


def holds(text: str, result: Computed, question: str) -> bool:
    """Every number the sentence states is one the engine computed (or one the question gave)."""
    computed = [float(v) for row in result.rows for v in row if isinstance(v, (int, float))]
    computed += [n for row in result.rows for v in row if isinstance(v, str) for n in numbers_in(v)]
    allowed = computed + numbers_in(question)
    return all(any(abs(n - a) <= max(NUMBER_TOLERANCE, abs(a) * 1e-9) for a in allowed) for n in numbers_in(text))


def computed_answer(*, question: str, choice: Choice, model: Any, clock: Any) -> Computation | Fallback:
    """Have the model write the query for the chosen table, run it, and say the result; a Fallback (why) when the
    query cannot run or finds nothing."""
    table = choice.table
    label = f"“{table.name}” ({table.document.display_key})"
    gloss = choice.across  # read once, when the table was chosen
    messages = prompt(question, table)
    model.warm(TABLE_SYSTEM)
    started = clock()
    pieces: list[str] = []
    for delta in model.stream(messages, max_tokens=SQL_MAX_TOKENS, temperature=0.0, top_p=1.0, stop=[]):
        pieces.append(delta)
    reply = "".join(pieces)
    sql, sentence = parsed(reply)
    if not sql:  # a small model may write the sentence alone: asked once more, for the query only
        again = [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": TABLE_ASK_QUERY}]
        more = list(model.stream(again, max_tokens=SQL_MAX_TOKENS, temperature=0.0, top_p=1.0, stop=[]))
        pieces += more
        sql = parsed("".join(more))[0]
        reply = f"{reply}\n{''.join(more)}"
    written = clock()
    if not sql:
        logger.info("computing: no query in the model's reply %r", reply[:300])
        return Fallback(f"the model wrote no query for the table {label}", table=label)
    sql, changes = grounded(sql, table, f"{question} {gloss}")
    why = unkept(question, gloss, table, sql, changes)  # a constraint dropped, a direction reversed
    if why:  # the model is told what its query missed, once; the query it writes then is checked the same way
        again = [*messages, {"role": "assistant", "content": reply},
                 {"role": "user", "content": TABLE_NOT_ASKED_AGAIN.format(why=why)}]  # fmt: skip
        told = "".join(model.stream(again, max_tokens=SQL_MAX_TOKENS, temperature=0.0, top_p=1.0, stop=[]))
        rewritten = parsed(told)[0]
        if rewritten:
            sql, changes = grounded(rewritten, table, f"{question} {gloss}")
            why = unkept(question, gloss, table, sql, changes)
            reply = f"{reply}\n{told}"
        if why:
            return Fallback(f"{why}, over the table {label}", sql=sql, table=label)
    with engine(table) as connection:  # the table loaded once for every query of this answer
        try:
            result = run(connection, sql)
        except QueryRefused as exc:
            return Fallback(f"the query over the table {label} could not run: {exc}", sql=sql, table=label)
        problem = sensible(result)
        if problem:
            return Fallback(f"{problem} in the table {label}", sql=sql, table=label)
        if asks_for_one(question) and len(result.rows) > 1:  # several values for one asked: asked again, then refused
            sql, result = one_value(question, table, connection, model, messages, reply, (sql, result), gloss)
            if len(result.rows) > 1:
                return Fallback(f"the question asks for one value and the query over the table {label} returned "
                                f"{len(result.rows)}", sql=sql, table=label)  # fmt: skip
        used = rows_used(connection, sql, result)
    language = answer_language(question)
    value_text = result_text(result, language)
    text = stated(sentence, value_text, question, result)
    if not holds(text, result, question):
        text = stated("", value_text, question, result)
    citation = table_citation(choice, sql, result, used)
    citation["table"]["corrected"] = changes
    claim = {"text": text, "citations": [1], "supported": True, "relevant": True, "problem": "",
             "quotes": [{"n": 1, "text": citation["table"]["evidence"]}]}  # fmt: skip
    timings = {"sql_ms": round(written - started, 1), "compute_ms": round(result.seconds * 1000, 1)}
    return Computation(text=f"{text[:-1]} [1]{text[-1]}", citation=citation, claim=claim, sql=sql, result=result,
                       timings=timings, prompt_tokens=sum(model.count_tokens(m["content"]) for m in messages),
                       completion_tokens=len(pieces))  # fmt: skip


def asks_for_one(question: str) -> bool:
    """Whether the question asks for one quantity ("by how much …", "what is the total …"), not one per group."""
    return bool(ONE_VALUE.search(question)) and not PER_GROUP.search(question)


def one_value(question: str, table: DocumentTable, connection: Any, model: Any, messages: list[dict[str, str]],
              reply: str, first: tuple[str, Computed], gloss: str = "") -> tuple[str, Computed]:  # fmt: skip
    """The model's query written again to return one value, when the first returned several for a question that
    asks for one; the first query and result when the second does not run or returns several too."""
    again = [*messages, {"role": "assistant", "content": reply},
             {"role": "user", "content": TABLE_ONE_VALUE_AGAIN.format(n=len(first[1].rows))}]  # fmt: skip
    written = parsed("".join(model.stream(again, max_tokens=SQL_MAX_TOKENS, temperature=0.0, top_p=1.0, stop=[])))[0]
    if not written:
        return first
    written, changes = grounded(written, table, f"{question} {gloss}")
    if unkept(question, gloss, table, written, changes):
        return first
    try:
        second = run(connection, written)
    except QueryRefused:
        return first
    return (written, second) if len(second.rows) == 1 and not sensible(second) else first


def table_citation(choice: Choice, sql: str, result: Computed, used: Used | None) -> dict[str, Any]:
    """The citation of a computed answer: its document's location (the hit's), and the table, the query, the
    result and the rows it stands on (up to five, with how many in all)."""
    table = choice.table
    rows: list[int] = used.rows if used is not None else []
    count: int | None = used.count if used is not None else None
    evidence = f"Computed over the table “{table.name}” ({table.row_count} rows)."
    if used is not None:
        listed = ", ".join(str(n) for n in used.rows)
        more = f" and {used.count - len(used.rows)} more" if used.count > len(used.rows) else ""
        evidence = f"Computed over {used.count} of the {table.row_count} rows of “{table.name}”" + (
            f": rows {listed}{more}." if used.rows else "."
        )
    return {**citation_of(1, choice.hit), "table": {
        "name": table.name, "columns": [c["name"] for c in table.columns], "row_count": table.row_count,
        "sql": sql, "result_columns": result.columns, "result": result.rows[:LISTED], "truncated": result.truncated,
        "rows_used": rows, "rows_used_count": count, "evidence": evidence,
    }}  # fmt: skip
