"""A model's draft checked: each sentence as it streams (SentenceChecker), the whole draft's verdict (answered,
partial, or a refusal that shows where to look), and the refusals that need no model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from chat import wording
from chat.citations import citation_of, earlier_notes, stale_note
from chat.excerpts import Sources, cross_encoder, embed, embed_multilingual
from chat.rendering import Rendering, in_asker_language
from core.languages import answer_language
from knowledge.claims import (
    CLAIM_SPLIT_RE,
    NOT_FOUND_RE,
    PROBLEM_REASONS,
    Claim,
    EvidenceText,
    Verifier,
    render,
    says_not_found,
    split_claims,
)
from knowledge.search.when import TimeRead
from knowledge.terms import question_terms
from tenants.principals import Viewer


@dataclass(kw_only=True)
class Sentence:
    """A sentence of the model's answer, checked as soon as the model finished it: shown (with its verified markers
    and the excerpt sentences it stands on) or not, and then why."""

    claim: dict[str, Any]
    shown: bool
    text: str = ""  # as shown: the sentence with its verified markers
    reason: str = ""  # why it is not shown


def unknown_identifiers_refusal(question: str, names: list[str]) -> str:
    listed = ", ".join(f"`{name}`" for name in names)
    return wording.unknown_identifiers(answer_language(question), listed)


@dataclass(kw_only=True)
class Verdict:
    """What the checks made of a generated draft."""

    status: str  # answered | partial | not_verified | not_found
    text: str  # the answer shown: supported sentences with their evidence, or the refusal
    citations: list[dict[str, Any]]
    claims: list[dict[str, Any]]  # every sentence of the draft, checked
    reason: str = ""  # why it was refused
    evidence: list[dict[str, Any]] = field(default_factory=list)  # not_verified: where the answer may be


# A sentence in one language stands on an excerpt sentence in another when the multilingual encoder puts them this
# close (its cosine runs higher than the English embedder's: the same question in Spanish and English is at 0.80 at
# the median, at 0.66 for the lowest 5 %; two unrelated questions on one corpus at 0.26, 0.59 for the highest 1 %).
MULTILINGUAL_SUPPORT = 0.6


def answer_verifier(question: str, evidence: list[EvidenceText], when: TimeRead | None = None,
                    multilingual: bool = False) -> Verifier:  # fmt: skip
    """The checker of a draft's sentences; `when`: the question asks about the past (each claim rests on evidence of
    its own time). `multilingual`: the answer reads across languages (excerpts.across_languages): closeness is the
    multilingual encoder's, and the English-only cross-encoder does not judge relevance (a claim then answers when
    it is the first, or shares a term with the question). Numbers, names, identifiers and polarity are checked as
    always: they are the same in every language."""
    if multilingual:
        return Verifier(evidence, question=question, embed=embed_multilingual, cross=None, when=when,
                        now=timezone.now(), dense_support=MULTILINGUAL_SUPPORT)  # fmt: skip
    cross = cross_encoder() if settings.RAG_ANSWER_CROSS_CHECK else None
    return Verifier(evidence, question=question, embed=embed, cross=cross, when=when, now=timezone.now())


def verified(
    question: str, draft: str, sources: Sources, evidence: list[EvidenceText], verifier: Verifier | None = None,
    viewer: Viewer | None = None, said: Sequence[str] = (), rendering: Rendering | None = None,
) -> Verdict:  # fmt: skip
    """The verdict on a generated draft (`verifier`: the one that checked its sentences as they streamed).

    The answer stands when a sentence of it answers the question (the cross-encoder reads it so; without it,
    its first claim or one sharing a content term with the question) and is supported by an excerpt, values
    and polarity included; for a question about now (`viewer` given), a value that came with its document's latest
    change is followed by what was there before, cited (`earlier_notes`). Otherwise it is a refusal: `not_verified`
    with the source sentences most likely to hold the answer when the model read some that bear on the question,
    `not_found` when it read none. `said`: the previous answer, when the question is a follow-up; a sentence that
    says it again is left out of the text (problem "repeat"), unless nothing else answers. `rendering`: the draft
    was written and checked in the evidence's language, and its shown sentences are rendered in the asker's."""
    language = answer_language(question)
    verifier = verifier or answer_verifier(question, evidence, sources.when, sources.multilingual)
    claims = verifier.check(draft)
    checked = [c for c in claims if c.supported is not None]
    again = [c for c in checked if c.supported and repeats(c, said)]
    if any(c.supported and c not in again and verifier.addresses_question(c, first=c is checked[0]) for c in checked):
        for claim in again:
            claim.problem = "repeat"
        claims = [c for c in claims if c not in again] + again  # kept in `claims`, out of the text
    if not any(c.supported and verifier.addresses_question(c, first=c is checked[0]) for c in checked):
        reason = (
            "The model said the excerpts do not contain the answer." if says_not_found(draft)
            else "The excerpts state what the draft says of another time than the question asks about (problem: "
            "time)." if any(c.problem == "time" for c in checked)
            else "No sentence of the model's draft that answers the question is supported by the excerpts."
        )  # fmt: skip
        return refusal(question, sources, reason, claims=[c.as_dict() for c in claims], rendering=rendering)
    told = [c for c in claims if c.problem != "repeat"]
    in_asker_language(told, rendering)
    used = sorted({n for c in told for n in c.citations})
    cited = {n: " ".join(c.text for c in told if n in c.citations) for n in used}
    citations = [citation_of(n, sources.excerpts[n - 1], cited[n]) for n in used]
    status = "partial" if any(c.supported is False or c.relevant is False for c in checked) else "answered"
    text = render(told, evidence=settings.RAG_ANSWER_EVIDENCE_LINES)
    shown_claims = [c.as_dict() for c in claims]
    note = stale_note(citations, shown_claims, language)
    if note:  # said in the text, and as a last sentence of the claims (not a claim of the model's: `note`)
        text = f"{text}\n\n{note}"
        shown_claims.append({"text": note, "citations": [], "supported": None, "quotes": [], "relevant": None,
                             "problem": "", "note": "freshness"})  # fmt: skip
    if viewer is not None and sources.when is None:  # what the document said before, cited after the answer's
        for earlier, citation in earlier_notes(viewer, claims, sources, len(sources.excerpts), language):
            text = f"{text}\n\n{earlier} [{citation['n']}]"
            citations.append(citation)
            shown_claims.append({"text": earlier, "citations": [citation["n"]], "supported": None, "quotes": [],
                                 "relevant": None, "problem": "", "note": "earlier"})  # fmt: skip
    return Verdict(status=status, text=text, citations=citations, claims=shown_claims)


# on something else. Chosen on the tuning half of the public set only (docs/evaluation.md).
WHERE_TO_LOOK_LOGIT = 0.0
WHERE_TO_LOOK_MAX = 3


def where_to_look(question: str, sources: Sources) -> list[dict[str, Any]]:  # question: in the evidence's language
    """The 1-3 sentences the model read that the packaged cross-encoder ranks best for the question, each read and
    shown with the sentence before it (as the model read them: "Default: 500_000" needs its setting), verbatim, with
    the number of its excerpt; none that scores below WHERE_TO_LOOK_LOGIT, none without the cross-encoder.
    (Measured on the tuning half: scoring a sentence with the one before it put the expected phrase in the passages
    for 8 of 28 answerable questions, the sentence alone for 3; docs/evaluation.md.)"""
    cross = cross_encoder()
    read = [(n, f.units[i - 1] if i else "", unit) for n, f in enumerate(sources.focused, 1)
            for i, unit in enumerate(f.units) if unit.strip()]  # fmt: skip
    if cross is None or not read:
        return []
    logits = cross(question, [f"{before} {unit}".strip() for _, before, unit in read])
    ranked = sorted(zip(read, map(float, logits), strict=True), key=lambda item: -item[1])
    chosen: list[dict[str, Any]] = []
    shown: set[str] = set()
    for (n, before, unit), logit in ranked:
        if logit < WHERE_TO_LOOK_LOGIT or len(chosen) == WHERE_TO_LOOK_MAX:
            break
        if unit in shown:
            continue
        parts = [unit] if not before or before in shown else [before, unit]
        shown.update(parts)
        chosen.append({"n": n, "text": " ".join(" ".join(parts).split()), "score": round(logit, 2)})
    return chosen


def refusal(question: str, sources: Sources, reason: str, *, claims: list[dict[str, Any]] | None = None,
            rendering: Rendering | None = None) -> Verdict:  # fmt: skip
    """No sentence could be verified: the passages that may hold the answer (not_verified), or, when the model read
    nothing that bears on the question (not_found), a refusal that says no answer could be verified (never that the
    documents lack it: retrieval found them) and names the documents it read."""
    language = answer_language(question)
    passages = where_to_look(rendering.question if rendering is not None else question, sources)
    if not passages:
        return Verdict(status="not_found", text=not_verified_text(language, sources), citations=[],
                       claims=claims or [], reason=reason)  # fmt: skip
    lines = [wording.where_to_look(language), *(f"> [{p['n']}] “{p['text']}”" for p in passages)]
    numbers = sorted({p["n"] for p in passages})
    citations = [
        citation_of(n, sources.excerpts[n - 1], " ".join(p["text"] for p in passages if p["n"] == n)) for n in numbers
    ]
    return Verdict(status="not_verified", text="\n".join(lines), citations=citations, claims=claims or [],
                   reason=reason, evidence=passages)  # fmt: skip


READ_LISTED = 3


def not_verified_text(language: str, sources: Sources) -> str:
    """The refusal when no passage bears on the question: no answer could be verified, and which documents were read
    (where to look), never a claim that the documents lack it."""
    documents = list(dict.fromkeys(hit.chunk.document.display_key for hit in sources.excerpts))[:READ_LISTED]
    text = wording.refusal(language)
    if documents:
        text += " " + wording.documents_read(language, ", ".join(documents))
    return text


SENTENCE_LEFT_OUT = "A sentence of the model's was left out: {reason}."
HELD_BACK = "A supported sentence was held back: it does not seem to answer the question."


REPEATS = "A sentence was held back: it repeats what the previous answer said."
REPEAT_SHARE = 0.8  # of a sentence's content terms found in one sentence the previous answer said


def repeats(claim: Claim, said: Sequence[str]) -> bool:
    """Whether a sentence of a follow-up's answer says again what a sentence of the previous answer said: nearly all
    its content terms, its numbers included, are that sentence's (chat clients show the previous answer already)."""
    terms = question_terms(claim.text)
    if not said or len(terms) < 2:
        return False
    for answer in said:
        for sentence in CLAIM_SPLIT_RE.split(answer):
            before = question_terms(sentence)
            if before and len(terms & before) >= REPEAT_SHARE * len(terms):
                return True
    return False


class SentenceChecker:
    """The model's tokens in, checked sentences out: a sentence is checked as soon as the next one begins (or the
    model stops), and shown only when an excerpt supports it and it answers the question. A sentence with nothing
    to check ("Here is how:") waits for a shown one to follow it; the model's "the excerpts do not say" is never
    shown (the verdict says it)."""

    def __init__(self, verifier: Verifier, clock: Callable[[], float], said: Sequence[str] = (),
                 rendering: Rendering | None = None) -> None:  # fmt: skip
        self.verifier, self.clock, self.said = verifier, clock, said  # said: the previous answer, for a follow-up
        self.rendering = rendering  # a sentence checked in the evidence's language is shown in the asker's
        self.buffer = ""
        self.complete = 0  # pieces of the buffer already checked
        self.arrivals: list[tuple[int, float]] = []  # (buffer length after a delta, when it came)
        self.waiting: list[Claim] = []
        self.first_checked: Claim | None = None
        self.times: dict[str, float] = {}

    def feed(self, delta: str) -> list[Sentence]:
        self.buffer += delta
        self.arrivals.append((len(self.buffer), self.clock()))
        pieces = CLAIM_SPLIT_RE.split(self.buffer)
        return self._check(pieces[self.complete : len(pieces) - 1], final=False)

    def finish(self) -> list[Sentence]:
        return self._check(CLAIM_SPLIT_RE.split(self.buffer)[self.complete :], final=True)

    def _check(self, pieces: list[str], *, final: bool) -> list[Sentence]:
        out: list[Sentence] = []
        for piece in pieces:
            self.complete += 1
            if not piece or not piece.strip():
                continue
            self.times.setdefault("model_first_sentence_ms", self._finished_at(piece))
            for text, numbers in split_claims(piece):
                out += self._one(self.verifier.check_claim(text, numbers))
        if final:
            self.waiting = []
        return out

    def _finished_at(self, piece: str) -> float:
        """When the model wrote the end of this piece: the arrival of the delta that carried its last character."""
        end = self.buffer.find(piece) + len(piece.rstrip())
        return next((at for length, at in self.arrivals if length >= end), self.clock())

    def _one(self, claim: Claim) -> list[Sentence]:
        if claim.supported is None:
            if not NOT_FOUND_RE.search(claim.text):
                self.waiting.append(claim)
            return []
        self.verifier.judge([claim])
        self.first_checked = self.first_checked or claim
        if claim.supported and repeats(claim, self.said):
            return [Sentence(claim={**claim.as_dict(), "problem": "repeat"}, shown=False, reason=REPEATS)]
        if claim.supported and self.verifier.addresses_question(claim, first=claim is self.first_checked):
            shown = [*self.waiting, claim]
            self.waiting = []
            in_asker_language(shown, self.rendering)
            self.times.setdefault("first_verified_ms", self.clock())
            return [Sentence(claim=c.as_dict(), shown=True, text=render([c])) for c in shown]
        if claim.supported:
            return [Sentence(claim=claim.as_dict(), shown=False, reason=HELD_BACK)]
        why = PROBLEM_REASONS.get(claim.problem, PROBLEM_REASONS[""])
        return [Sentence(claim=claim.as_dict(), shown=False, reason=SENTENCE_LEFT_OUT.format(reason=why))]


# Below this cross-encoder logit the best sentence the model would read is unrelated to the question (an
# unrelated passage scores about -11, a near miss about -1): the question is refused without asking the model.
# Set below the weakest evidence that a right answer of the tuning half stood on (-7.3; docs/evaluation.md).
WEAK_EVIDENCE_LOGIT = -8.0


def weak_evidence(sources: Sources) -> bool:
    return sources.strength is not None and sources.strength < WEAK_EVIDENCE_LOGIT
