"""Sparse lexical (BM25-style) vectors, from Qdrant Edge's offline Bm25.

The Code tokenizer keeps identifiers whole *and* splits them (`X-Api-Key`, `snake_case`,
`camelCase` all match their parts); ASCII folding lets `configuracion` find `configuración` and
`istanbul` find `İstanbul`; English and Spanish stopwords are dropped. IDF is applied by Qdrant
at query time (the sparse vector is configured with the IDF modifier), per tenant.
"""

from __future__ import annotations

import functools

from qdrant_edge import Bm25, Bm25Config, Language, StopwordsSet, TokenizerType

LEXICAL_MODEL = "qdrant-edge-bm25-code-ascii-en-es-v1"


@functools.cache
def _bm25() -> Bm25:
    return Bm25(
        Bm25Config(
            tokenizer=TokenizerType.Code,
            language="english",
            ascii_folding=True,
            stopwords=StopwordsSet(languages={Language.English, Language.Spanish}),
        )
    )


def document_vector(text: str) -> tuple[list[int], list[float]]:
    vector = _bm25().embed_document(text)
    return list(vector.indices), list(vector.values)


def query_vector(text: str) -> tuple[list[int], list[float]]:
    vector = _bm25().embed_query(text)
    return list(vector.indices), list(vector.values)
