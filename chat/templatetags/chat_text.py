"""How answers read in the chat page: inline code as code (never raw backticks), statuses in words."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _

from knowledge.claims import PROBLEM_REASONS

# The page's words for an answer's status and a left-out sentence's reason (the API keeps the English codes and texts).
STATUS_WORDS = {
    "answered": _("answered"),
    "partial": _("partial"),
    "not_verified": _("not verified"),
    "not_found": _("not found"),
    "refused": _("refused"),
    "no_model": _("no model"),
    "error": _("error"),
}
MODEL_STATE_WORDS = {  # inference/runtime.py's states of the chat model
    "starting": _("starting"),
    "ready": _("ready"),
    "restarting": _("restarting"),
    "failed": _("failed"),
    "stopped": _("stopped"),
}
REASON_WORDS = {
    "value": _("a number or name it states is not in the source text"),
    "field": _("its value belongs to another column or row of a table"),
    "polarity": _("the source text says the opposite"),
    "time": _("the source text says it of another time (a superseded value, or today's offered as an earlier one)"),
    "": _("nothing in the source text says it"),
}

register = template.Library()

CODE_SPAN_RE = re.compile(r"`([^`\n]+)`")


@register.filter
def code_spans(text: str) -> SafeString:
    """`code` → <code>code</code>, everything else escaped (the answer is the model's text: no HTML passes)."""
    return mark_safe(CODE_SPAN_RE.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text or "")))  # noqa: S308


@register.filter
def status_words(status: str) -> str:
    status = status or "answered"
    return str(STATUS_WORDS.get(status, status.replace("_", " ")))


@register.filter
def left_out_reason(problem: str) -> str:
    """Why a sentence of the model's is not shown (the chat page says it where the sentence would be)."""
    if (problem or "") in REASON_WORDS:
        return str(REASON_WORDS[problem or ""])
    return PROBLEM_REASONS.get(problem or "", PROBLEM_REASONS[""])


@register.filter
def model_state_words(state: str) -> str:
    return str(MODEL_STATE_WORDS.get(state or "", state or ""))


@register.filter
def seconds(milliseconds: float | None) -> str:
    """Milliseconds as seconds with one decimal, as the live page writes them."""
    return f"{(milliseconds or 0) / 1000:.1f}"
