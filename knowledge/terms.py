"""A text's terms as the lexical leg of retrieval reads them (stemmed, stop words out, hashed), published for those
who compare texts by their words outside retrieval (chat's focus, its history, its verdicts): they read this module,
never the index's internals."""

from __future__ import annotations

from core.languages import DEFAULT
from knowledge.index.lexical import document_vector, query_vector


def question_terms(text: str, language: str = DEFAULT) -> set[int]:
    """The terms of a question (or a claim) as a search reads them."""
    return set(query_vector(text, language)[0])


def passage_terms(text: str, language: str = DEFAULT) -> set[int]:
    """The terms of a passage as the index stores them."""
    return set(document_vector(text, language)[0])
