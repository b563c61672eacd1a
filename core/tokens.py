"""How many tokens a text is, estimated one way for the whole product: the chat model's context budget
(inference/llm.py), the prompt builder (chat/prompting.py), and what an agent's session or pack says it delivered
(agent_sessions/).

A token for every three characters, and one more: on the high side for English and Spanish prose and for code
against the packaged Qwen2.5 tokenizer (a byte-level BPE like the common chat models'): 1.45× on the flask docs,
1.40× on click's code, 1.13× on the Spanish aptitude manual (the first 6,000 characters of 30, 16 and 10 files), so
that a budget never overflows a model's context. Asking the model's own tokenizer would queue behind the answer it is
writing."""

from __future__ import annotations

CHARS_PER_TOKEN = 3
DESCRIBED = "a token for every three characters, and one more (an estimate on the high side)"


def estimate_tokens(text: str) -> int:
    """An upper estimate of a text's tokens (see the module)."""
    return len(text) // CHARS_PER_TOKEN + 1
