"""Every prompt an answer sends a chat model, with the constants it depends on: the grounded answer's
(`build_grounded_history(question, hits)`, the seam between retrieval and generation) and the computed answer's
(`table_messages`, one SQLite query over a table). (A document's enrichment prompt is the ingest stage's own:
knowledge/ingest/enrichment.py.)

A pure function: it knows nothing of embeddings or models. Excerpts are numbered [1]…[n] and
labelled with where they come from; the rules come first; exactly one user turn, the question last.
The system turn is the same for every question of an assistant, so the model's KV state for it is
computed once and reused (see inference/llm.py); everything that varies comes after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from core.tokens import estimate_tokens

NO_MATCH = "No matching chunks were found."
SYSTEM_RULES = (
    "Only use facts that appear in the excerpts. If the answer is not in them, say so plainly.\n"
    "You answer questions from numbered excerpts of a company's documents.\n"
    "Give the answer directly, with the names, values and steps the excerpts state.\n"
    "You may cite an excerpt by its number in brackets, like [1].\n"
    "Do not invent sources, numbers, names, settings or steps.\n"
    "Answer in the language of the question, in at most three short sentences."
)
# The rules' version, kept with every answer (its receipt): a change to the rules is a new version.
RULES_VERSION = hashlib.sha256(SYSTEM_RULES.encode()).hexdigest()[:12]


class Excerpt(Protocol):
    """What the prompt needs of a retrieved chunk (RetrievedChunk-like objects satisfy it)."""

    @property
    def text(self) -> str: ...

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class PromptExcerpt:
    text: str
    label: str  # e.g. "docs/install.md, lines 12-40" or "manual.pdf, page 7"


@dataclass
class GroundedPrompt:
    messages: list[dict[str, str]]
    excerpts: list[PromptExcerpt]  # the ones that made it into the prompt, in [n] order
    dropped: int  # excerpts left out to fit the context window


def build_grounded_history(
    question: str,
    hits: Sequence[PromptExcerpt],
    *,
    persona: str = "",
    max_prompt_tokens: int | None = None,
    count_tokens: Callable[[str], int] = estimate_tokens,
) -> GroundedPrompt:
    """Messages for a chat model: system rules (+ persona), then one user turn with excerpts and the question.

    When a context budget is given, the lowest-ranked excerpts are dropped whole — never cut.
    """
    system = SYSTEM_RULES + (f"\n\n{persona.strip()}" if persona.strip() else "")
    question = question.strip()

    def user_turn(kept: Sequence[PromptExcerpt]) -> str:
        if not kept:
            body = NO_MATCH
        else:
            body = "\n\n".join(f"[{n}] ({excerpt.label})\n{excerpt.text.strip()}" for n, excerpt in enumerate(kept, 1))
        return f"Excerpts:\n\n{body}\n\nQuestion: {question}"

    kept = list(hits)
    if max_prompt_tokens is not None:
        while kept and count_tokens(system) + count_tokens(user_turn(kept)) > max_prompt_tokens:
            kept.pop()  # the lowest-ranked excerpt goes first
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user_turn(kept)}]
    return GroundedPrompt(messages=messages, excerpts=kept, dropped=len(hits) - len(kept))


# --- a computed answer (chat/computing.py): the model writes one SQLite query over a table -------------------------
TABLE_SYSTEM = (
    "You answer a question about one table by writing one SQLite SELECT query over it; the table is named data. "
    "Use only the columns listed, and the values exactly as listed. Text comparisons ignore case. Dates are text "
    "'YYYY-MM-DD'. Name each computed column with AS. Then write one short sentence in the question's language "
    "that answers it, with {result} where the query's result goes. Reply in exactly this form:\n\n"
    "Table data:\nCREATE TABLE data (\n  title TEXT, -- \"Title\", e.g. 'Dune', 'Emma'\n  author TEXT, -- "
    "\"Author\", one of 'Austen', 'Herbert', 'Le Guin'\n  price REAL -- \"Price\", from 4 to 30\n);\n\n"
    "Question: How many books by Le Guin cost more than 10?\n\n"
    "```sql\nSELECT COUNT(*) AS books FROM data WHERE author = 'Le Guin' AND price > 10\n```\n"
    "Answer: {result} books by Le Guin cost more than 10."
)

TABLE_ASK_QUERY = "Now write the SQLite query, in a ```sql block."
TABLE_NOT_ASKED_AGAIN = (
    "That query does not answer the question: {why}. Write the SQLite query again so that it computes "
    "exactly what the question asks, in a ```sql block."
)
TABLE_ONE_VALUE_AGAIN = (
    "The question asks for one value, and the query returned {n} rows. Write the SQLite query again so "
    "that it returns a single value, in a ```sql block."
)


def table_messages(question: str, where: str, schema: str) -> list[dict[str, str]]:
    """The messages that ask for a query over one table: the rules with their worked example, then the table's
    schema (`where` says which table of which document) and the question."""
    return [
        {"role": "system", "content": TABLE_SYSTEM},
        {"role": "user", "content": f"Table data ({where}):\n{schema}\n\nQuestion: {question}"},
    ]
