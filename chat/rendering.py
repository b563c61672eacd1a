"""An answer across languages: drafted and verified in the language of its evidence, shown in the asker's.

A small model reading English excerpts for a Spanish question writes a right Spanish sentence that the checks can
only compare across languages (its values are the same, its words are not), and the closeness of a Spanish sentence
to an English one is the weakest signal the checks have. So when the asker's language is not the evidence's and
Apertium has the pair both ways (inference/translation.py: English ↔ Spanish), the question is put to the model in
the evidence's language, each sentence is checked there like any other, and only a verified sentence is rendered
into the asker's language, by a deterministic translator: what it states that a translator could change — numbers,
times, amounts, codes, identifiers, names, citation markers — is held out of the translation and put back as it
was; a rendering that loses one of them is not shown (the original sentence is). The sentence as verified stays
with the claim (`original`), one click away on the chat page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from core.languages import answer_language
from inference import translation
from knowledge.claims import MARKER_RE, NUMBER_RE, SPECIFIC_RE

# What a translation must not touch, besides SPECIFIC_RE and NUMBER_RE: a code with a dash ("TIL-", "ORD-1042"),
# a word with a digit, an acronym ("EUR", "CET"), a name in the middle of a sentence ("Acme Retail", "Madrid"),
# an e-mail address or a web address.
KEPT_RE = re.compile(
    r"\S+@\S+\.\w+|https?://\S+"
    r"|\b[A-Z][A-Z0-9]+-[A-Z0-9-]*"
    r"|\b\w*\d\w*\b"
    r"|\b[A-ZÁÉÍÓÚÑ]{2,}\b"
    r"|(?<=[\w,;:] )[A-ZÁÉÍÓÚÑ][\w-]*(?: [A-ZÁÉÍÓÚÑ][\w-]*)*"
    r"|^[A-ZÁÉÍÓÚÑ][\w-]*(?: [A-ZÁÉÍÓÚÑ][\w-]*)+"  # a name of two words or more opening the sentence
)
# Words English capitalises that are not names: a translator's to translate.
NOT_NAMES = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december i".split()
)
PLACEHOLDER = "Qx{}q"  # a word no dictionary knows: Apertium passes it through, where the sentence puts it
PLACEHOLDER_RE = re.compile(r"\*?Qx(\d+)q")


def evidence_language(hits: Sequence, asked: str) -> str:
    """The language of the evidence an answer most likely rests on: the first excerpt's (the retriever's best; its
    chunk language, `en` when unknown) that is prose, not a sheet's rows (a sheet's language is read from names and
    codes); the first excerpt's when all are sheets; the asker's when there is none. (The first excerpt's: chosen on
    the tuning half of bench/company.py, where the language most excerpts were in sent an English question over a
    Spanish procedure, ranked first among English handbook excerpts, to the model in English, and it was refused.
    Prose: the second company's F05, "Until what time are deliveries made in Valencia?", whose first excerpt is the
    invoices sheet, for the city.)"""
    if not hits:
        return asked
    prose = next((hit for hit in hits if not _sheet(hit)), hits[0])
    return (prose.chunk.language or "en")[:2]


def _sheet(hit: object) -> bool:
    """Whether an excerpt is a workbook's or a CSV's rows (a table that is the whole document, not one in prose)."""
    chunk = getattr(hit, "chunk", None)
    key = getattr(getattr(chunk, "document", None), "document_key", "") or ""
    return bool(getattr(hit, "table", None)) and key.lower().endswith((".xlsx", ".xls", ".ods", ".csv", ".tsv"))


@dataclass
class Rendering:
    """How an answer is written and shown: `asked` is the asker's language, `drafted` the one the model writes and
    the checks read (the evidence's), `question` the question in that language (the asker's own when the two are the
    same)."""

    asked: str
    drafted: str
    question: str
    scope: str = ""

    @property
    def across(self) -> bool:
        return self.asked != self.drafted

    def shown(self, text: str) -> str | None:
        """A verified sentence in the asker's language, its kept spans as they were; None when it cannot be (no
        translator, or the translation lost or changed what it must keep)."""
        if not self.across:
            return text
        return render_in(text, self.drafted, self.asked, scope=self.scope)


def rendering_for(question: str, hits: Sequence, *, scope: str = "") -> Rendering:
    """How an answer to `question` from `hits` is written: across languages when the asker's language (en/es) is not
    the excerpts' and the question can be translated into theirs; otherwise in the asker's."""
    asked = answer_language(question)
    drafted = evidence_language(hits, asked)
    same = Rendering(asked, asked, question, scope)
    if drafted == asked or (drafted, asked) not in translation.MODES or (asked, drafted) not in translation.MODES:
        return same
    put = render_in(question, asked, drafted, scope=scope)
    if not put:
        return same
    return Rendering(asked, drafted, put, scope)


def render_in(text: str, source: str, target: str, *, scope: str = "") -> str | None:
    """`text` translated, with the spans it must keep held out of the translation and put back as they were."""
    markers = " ".join(m.group(0).strip() for m in MARKER_RE.finditer(text))
    body = MARKER_RE.sub("", text).strip()
    kept: list[str] = []

    def hold(match: re.Match[str]) -> str:
        if match.group(0).casefold() in NOT_NAMES:
            return match.group(0)
        kept.append(match.group(0))
        return PLACEHOLDER.format(len(kept) - 1)

    held = _spans_held(body, hold)
    made = translation.translate(held, source, target, scope=scope)
    if not made:
        return None
    if held.startswith("Qx"):  # the sentence opens with a kept span: the translator capitalised the word after it
        made = re.sub(r"^(\*?Qx\d+q\s+)([A-ZÁÉÍÓÚÑ])(?=[a-záéíóúñ])", lambda m: m.group(1) + m.group(2).lower(), made)
    found = [int(n) for n in PLACEHOLDER_RE.findall(made)]
    if sorted(found) != list(range(len(kept))):
        return None  # a value was lost or doubled in translation: the sentence is shown as verified
    out = PLACEHOLDER_RE.sub(lambda m: kept[int(m.group(1))], made)
    out = out.replace("*", "").strip()
    out = out[:1].upper() + out[1:]
    end = body[-1:] if body[-1:] in ".!?:" else ""
    if end and not out.endswith(end):
        out += end
    if source == "en" and target == "es" and text.rstrip().endswith("?") and not out.startswith("¿"):
        out = "¿" + out
    if markers:
        out = f"{out[: len(out) - len(end)]} {markers}{end}"
    return out


def _spans_held(text: str, hold) -> str:
    """The text with every span a translation must keep replaced by a placeholder (numbers and identifiers first)."""
    combined = re.compile(f"{SPECIFIC_RE.pattern}|{KEPT_RE.pattern}|{NUMBER_RE.pattern}")
    return combined.sub(hold, text)


def in_asker_language(claims: Sequence, rendering: Rendering | None) -> None:
    """Each claim that is shown (not one no excerpt supports), rendered in the asker's language; the sentence as it
    was checked kept as its `original`."""
    if rendering is None or not rendering.across:
        return
    for claim in claims:
        if claim.supported is False or claim.original:
            continue
        shown = rendering.shown(claim.text)
        if shown and shown != claim.text:
            claim.original, claim.text = claim.text, shown
