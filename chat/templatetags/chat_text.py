"""How answers read in the chat page: inline code as code (never raw backticks), statuses in words."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from knowledge.claims import PROBLEM_REASONS

register = template.Library()

CODE_SPAN_RE = re.compile(r"`([^`\n]+)`")


@register.filter
def code_spans(text: str) -> SafeString:
    """`code` → <code>code</code>, everything else escaped (the answer is the model's text: no HTML passes)."""
    return mark_safe(CODE_SPAN_RE.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text or "")))  # noqa: S308


@register.filter
def status_words(status: str) -> str:
    return (status or "answered").replace("_", " ")


@register.filter
def left_out_reason(problem: str) -> str:
    """Why a sentence of the model's is not shown (the chat page says it where the sentence would be)."""
    return PROBLEM_REASONS.get(problem or "", PROBLEM_REASONS[""])


@register.filter
def seconds(milliseconds: float | None) -> str:
    """Milliseconds as seconds with one decimal, as the live page writes them."""
    return f"{(milliseconds or 0) / 1000:.1f}"
