"""Every text an answer shows besides what the model wrote and the documents said: refusals, notes, labels, a
computed value's connectives. Each goes through gettext (locale/, like the pages) in the answer's language, which
core/languages.py decides once (`answer_language`); a language the product does not write is English."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import translation
from django.utils.translation import gettext, ngettext

from core.languages import DEFAULT, SPOKEN


def _in(language: str, say: Callable[[], str], **values: Any) -> str:
    with translation.override(language if language in SPOKEN else DEFAULT):
        return say() % values if values else say()


def refusal(language: str) -> str:
    """Retrieval found documents, and no answer in them could be verified (never "they do not contain it")."""
    return _in(
        language,
        lambda: gettext("I could not find an answer to this question that the documents available to me support."),
    )


def nothing_retrieved(language: str) -> str:
    return _in(language, lambda: gettext("The knowledge base does not contain anything that matches this question."))


def where_to_look(language: str) -> str:
    return _in(
        language, lambda: gettext("I could not find a verifiable answer in the documents; these passages may hold it:")
    )


def no_model(language: str) -> str:
    return _in(language, lambda: gettext("No language model is available, so here are the most relevant excerpts:"))


def documents_read(language: str, documents: str) -> str:
    return _in(language, lambda: gettext("The documents I read for it: %(documents)s."), documents=documents)


def unknown_identifiers(language: str, listed: str) -> str:
    return _in(
        language,
        lambda: gettext(
            "The documents available to me do not mention %(listed)s, so they do not "
            "contain the answer to this question."
        ),
        listed=listed,
    )


def earlier_note(language: str, *, day: str, document: str, text: str) -> str:
    return _in(
        language,
        lambda: gettext("Before %(day)s, %(document)s said: “%(text)s”"),
        day=day,
        document=document,
        text=text,
    )


def computed_fell_back(language: str, reason: str) -> str:
    return _in(
        language,
        lambda: gettext(
            "Note: this could not be computed over the table (%(reason)s); the answer above is from the excerpts."
        ),
        reason=reason,
    )


def stale_review_due(language: str, *, docs: str, date: str) -> str:
    return _in(
        language,
        lambda: gettext("Note: this rests on %(docs)s, due a review since %(date)s; it may be out of date."),
        docs=docs,
        date=date,
    )


def stale_other(language: str, *, docs: str, status: str) -> str:
    return _in(
        language,
        lambda: gettext("Note: this rests on %(docs)s, which is %(status)s (not in force today)."),
        docs=docs,
        status=status,
    )


def joined(language: str, items: list[str]) -> str:
    """ "a, b and c" in the answer's language."""
    if len(items) < 2:
        return "".join(items)
    return _in(language, lambda: gettext("%(items)s and %(last)s"), items=", ".join(items[:-1]), last=items[-1])


def and_more(language: str, listed: str, more: int) -> str:
    return _in(
        language,
        lambda: ngettext("%(listed)s (+%(more)d more)", "%(listed)s (+%(more)d more)", more),
        listed=listed,
        more=more,
    )
