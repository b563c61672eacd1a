"""Which language a text is in: each chunk's (stored, so the lexical leg stems it as its own language) and each
question's (the lexical leg's words, the weights of the dense legs, the answer's language).

Lingua (lingua-language-detector: compiled n-gram models in its wheel, no download) restricted to the languages
the product treats (LANGUAGES); it is built for short text, which is what questions are. A text it cannot tell (a
number, a path, code, two words that several languages share) is English, the language of identifiers.
"""

from __future__ import annotations

import functools
import re
from typing import Any

# ISO 639-1 code → the name Qdrant's Bm25 and Lingua use. English first: the language of code and the default.
LANGUAGES = {"en": "english", "es": "spanish", "pt": "portuguese", "fr": "french", "de": "german", "it": "italian"}
DEFAULT = "en"
SPOKEN = ("en", "es")  # the languages answers are written in: the pages' (settings.LANGUAGES), through gettext
SAMPLE_CHARS = 1200  # a chunk's language is read from its first characters: the rest rarely changes it
MIN_LETTERS = 12  # fewer letters than this (an identifier, a number): the default
# How sure Lingua must be (the distance between its two likeliest languages): "proxy installer" could be German or
# French, and is English here. A question taken for English keeps every leg; one taken for another language does not
# run the English embedder.
MIN_DISTANCE = 0.1
# A question's marks that only Spanish writes: "¿Qué hace app.run()?" has too few words for the models alone.
SPANISH_MARKS_RE = re.compile(r"[¿¡ñ]")
# Words only English writes (none is a word of the other five): a short text of plain ASCII letters with two of
# them is English without asking the models, which take a third of a millisecond, a twentieth of a retrieve.
ENGLISH_WORDS = frozenset(
    (
        "the what how does which when why where is are and of should would "
        "to for with from this that you your can it my"
    ).split()
)
WORD_RE = re.compile(r"[A-Za-z']+")


@functools.cache
def _detector() -> Any:
    from lingua import Language, LanguageDetectorBuilder

    languages = [getattr(Language, name.upper()) for name in LANGUAGES.values()]
    return (LanguageDetectorBuilder.from_languages(*languages).with_minimum_relative_distance(MIN_DISTANCE)
            .with_preloaded_language_models().build())  # fmt: skip


@functools.cache
def _codes() -> dict[Any, str]:
    from lingua import Language

    return {getattr(Language, name.upper()): code for code, name in LANGUAGES.items()}


def detect(text: str) -> str:
    """The ISO code of the text's language among LANGUAGES, or DEFAULT when it cannot be told."""
    sample = text[:SAMPLE_CHARS]
    if SPANISH_MARKS_RE.search(sample) and len(sample) < 300:  # "¿Horario?" is Spanish, however short
        return "es"
    if sum(char.isalpha() for char in sample) < MIN_LETTERS:
        return DEFAULT
    if len(sample) < 300 and sample.isascii() and len(ENGLISH_WORDS & set(WORD_RE.findall(sample.lower()))) >= 2:
        return DEFAULT
    found = _detector().detect_language_of(sample)
    return _codes().get(found, DEFAULT) if found is not None else DEFAULT


def answer_language(question: str) -> str:
    """The language an answer to `question` is written in — its refusals, notes and labels as well as its sentences:
    the question's own (`detect`, the same decision retrieval reads) when answers are written in it (SPOKEN, the
    pages' languages), else English. A Portuguese question is read as Portuguese and answered in English."""
    found = detect(question)
    return found if found in SPOKEN else DEFAULT


def detect_many(texts: list[str]) -> list[str]:
    return [detect(text) for text in texts]


def name(code: str) -> str:
    """The English name of a language code ("es" → "Spanish"), for prompts and pages."""
    return LANGUAGES.get(code, LANGUAGES[DEFAULT]).capitalize()
