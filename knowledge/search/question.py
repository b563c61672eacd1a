"""The question as the legs of a search read it: its language (core/languages.py), the languages its words are
looked up in, its English gloss across languages (inference/translation.py), how much each leg counts, and its
embeddings (a small LRU cache)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from core import languages
from inference import translation
from inference.embedders import EmbedderIdentity, get_embedder
from knowledge.index.lexical import query_vector, search_vector
from knowledge.index.vectorstore import Fusion, Weights
from knowledge.models import Chunk
from tenants.models import Tenant

# How much each leg counts (weighted RRF), by whether a chunk is in the question's language. The same language: the
# English embedder (for English; for another language it places words poorly), the lexical leg and the multilingual
# leg. Across languages the English embedder and the lexical leg (identifiers aside) say nothing, and the
# multilingual leg leads. Chosen on the tune half of bench/data/crosslingual (bench/crosslingual_tune.py).
SAME_ENGLISH = Weights(dense=1.0, multilingual=1.0, lexical=1.0)
SAME_OTHER = Weights(dense=0.0, multilingual=1.0, lexical=1.0)
CROSS = Weights(dense=0.0, multilingual=2.0, lexical=0.5)
# A question glossed into English (inference/translation.py): for an English chunk, the English embedder reads the
# gloss, and the lexical leg holds the gloss's English words beside the question's own.
GLOSSED_CROSS = Weights(dense=1.0, multilingual=1.0, lexical=0.5)
PREVIOUS_INDEX = Weights(dense=1.0, multilingual=0.0, lexical=1.0)  # no multilingual leg: as before issue 52
TENANT_LANGUAGES_TTL_S = 60.0
_tenant_languages: dict[Any, tuple[float, list[str]]] = {}


def found_languages(tenant: Tenant) -> list[str]:
    """The languages of the tenant's chunks (core/languages.py); kept a minute."""
    cached = _tenant_languages.get(tenant.public_id)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    found = set(Chunk.objects.filter(tenant=tenant).exclude(language="").values_list("language", flat=True)
                .distinct().order_by())  # fmt: skip
    codes = [code for code in languages.LANGUAGES if code in found]
    _tenant_languages[tenant.public_id] = (time.monotonic() + TENANT_LANGUAGES_TTL_S, codes)
    return codes


def tenant_languages(tenant: Tenant) -> list[str]:
    """The languages a question's words are looked up in besides its own: English, and the tenant's."""
    return list(dict.fromkeys([languages.DEFAULT, *found_languages(tenant)]))


@dataclass(frozen=True)
class Question:
    """A question as the legs read it: its text, its language, the languages its words are looked up in, the index
    searched, and for a question not in English over a tenant with English text, its English gloss when there is
    one (inference/translation.py)."""

    text: str
    language: str
    lookup: tuple[str, ...]
    index: EmbedderIdentity
    gloss: str | None = None

    @classmethod
    def of(cls, tenant: Tenant, text: str, index: EmbedderIdentity) -> Question:
        language = languages.detect(text)
        lookup = tuple(dict.fromkeys([language, *tenant_languages(tenant)]))
        gloss = None
        if index.multilingual_dims and language != languages.DEFAULT and languages.DEFAULT in found_languages(tenant):
            gloss = translation.gloss(text, language, scope=str(tenant.public_id))
        return cls(text, language, lookup, index, gloss)

    def sub(self, text: str) -> Question:
        return replace(self, text=text, gloss=self.gloss if text == self.text else None)

    @property
    def fusion(self) -> Fusion:
        if not self.index.multilingual_dims:
            return Fusion(same=PREVIOUS_INDEX)
        same = SAME_ENGLISH if self.language == languages.DEFAULT else SAME_OTHER
        return Fusion(language=self.language, same=same, cross=GLOSSED_CROSS if self.gloss else CROSS)

    def sparse(self) -> tuple[list[int], list[float]]:
        """The question's terms in each language it is looked up in, and its gloss's as English stems them (a term
        in both weighs once)."""
        indices, values = search_vector(self.text, list(self.lookup))
        if not self.gloss:
            return indices, values
        terms = dict(zip(indices, values, strict=True))
        for index, value in zip(*query_vector(self.gloss, languages.DEFAULT), strict=True):
            terms[index] = max(terms.get(index, 0.0), value)
        return list(terms), list(terms.values())

    @property
    def english(self) -> str:
        """What the English embedder reads: the gloss when there is one."""
        return self.gloss or self.text


QUERY_CACHE_SIZE = 1024  # query texts whose embedding is kept (an agent, a chat client and a bench repeat them)
_query_cache: OrderedDict[tuple[int, Any, str], list[float]] = OrderedDict()
_query_cache_lock = threading.Lock()


def query_embedding(query: str, *, multilingual: bool = False) -> list[float]:
    """The configured embedder's vector of a query (or its multilingual leg's), from a small LRU cache when the same
    text was asked lately (the same embedder object: a swapped or reconfigured embedder never reads another's
    vectors)."""
    embedder = get_embedder()
    key = (id(embedder), embedder.identity, f"multilingual:{query}" if multilingual else query)
    with _query_cache_lock:
        cached = _query_cache.get(key)
        if cached is not None:
            _query_cache.move_to_end(key)
            return cached
    embed = embedder.embed_multilingual if multilingual else embedder.embed  # type: ignore[attr-defined]
    vector = embed([query])[0].tolist()
    with _query_cache_lock:
        _query_cache[key] = vector
        while len(_query_cache) > QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector
