"""Sparse lexical (BM25-style) vectors, from Qdrant Edge's offline Bm25, per language.

The Code tokenizer keeps identifiers whole *and* splits them (`X-Api-Key`, `snake_case`,
`camelCase` all match their parts); ASCII folding lets `configuracion` find `configuración` and
`istanbul` find `İstanbul`. A chunk is stemmed (Snowball, inside Qdrant's Bm25) as its own language
(core/languages.py), with that language's stop words and English's dropped. An English chunk's
vector is what it always was (English stemming, English and Spanish stop words). IDF is applied by Qdrant
at query time (the sparse vector is configured with the IDF modifier), per tenant.

A question is looked up in every language its tenant's chunks are in, and its own: its words stemmed as each
(`search_vector`), so "configuraciones" meets a Spanish chunk's "configuración" and an identifier still meets
itself in an English chunk. `query_vector` and `document_vector` without a language are English: what the answer
checks compare (terms of a claim against terms of its evidence) is unchanged.
"""

from __future__ import annotations

import functools

from qdrant_edge import Bm25, Bm25Config, Language, StopwordsSet, TokenizerType

from core.languages import DEFAULT, LANGUAGES

LEXICAL_MODEL = "qdrant-edge-bm25-code-ascii-per-language-v2"


@functools.cache
def _bm25(code: str = DEFAULT) -> Bm25:
    name = LANGUAGES.get(code, LANGUAGES[DEFAULT])
    stopwords = {Language.English, getattr(Language, name.capitalize())}
    if code == DEFAULT:
        stopwords.add(Language.Spanish)  # as English chunks were always indexed
    return Bm25(
        Bm25Config(
            tokenizer=TokenizerType.Code,
            language=name,
            ascii_folding=True,
            stopwords=StopwordsSet(languages=stopwords),
        )
    )


def document_vector(text: str, language: str = DEFAULT) -> tuple[list[int], list[float]]:
    vector = _bm25(language).embed_document(text)
    return list(vector.indices), list(vector.values)


def query_vector(text: str, language: str = DEFAULT) -> tuple[list[int], list[float]]:
    vector = _bm25(language).embed_query(text)
    return list(vector.indices), list(vector.values)


def search_vector(text: str, languages: list[str]) -> tuple[list[int], list[float]]:
    """The question's terms as each of these languages stems them, once each (a query term weighs 1 in Bm25)."""
    terms: dict[int, float] = {}
    for code in dict.fromkeys([DEFAULT, *languages]):
        indices, values = query_vector(text, code)
        for index, value in zip(indices, values, strict=True):
            terms[index] = max(terms.get(index, 0.0), value)
    return list(terms), list(terms.values())
