"""The seam between retrieval and generation: `build_grounded_history(question, hits)`.

A pure function: it knows nothing of embeddings or models. Excerpts are numbered [1]…[n] and
labelled with where they come from; the rules come first; exactly one user turn, the question last.
The system turn is the same for every question of an assistant, so the model's KV state for it is
computed once and reused (see inference/llm.py); everything that varies comes after it.
"""

from __future__ import annotations

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
