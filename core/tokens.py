"""How many tokens a text is, estimated one way for the whole product: the chat model's context budget
(inference/llm.py), the prompt builder (chat/prompting.py), and what an agent's session or pack says it delivered
(agent_sessions/).

A word or a punctuation mark is at least one token, and a text is never counted at less than a third of its
characters: on the high side for English and Spanish prose and for code, so that a budget never overflows a model's
context. Asking the model's own tokenizer would queue behind the answer it is writing."""

from __future__ import annotations

import re

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
CHARS_PER_TOKEN = 3
DESCRIBED = "a word or a punctuation mark is a token, never under a third of the characters"


def estimate_tokens(text: str) -> int:
    """An upper estimate of a text's tokens (see the module)."""
    return max(len(TOKEN_RE.findall(text)), len(text) // CHARS_PER_TOKEN + 1)
