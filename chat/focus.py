"""Focus the retrieved excerpts on the sentences that bear on the question, before they reach the model.

Prefill is what a support agent waits for (about 45 prompt tokens/s for a 1.5B model on a 2-core
AVX2 machine), so the model is sent whole sentences (prose) or whole lines (code) chosen from the
retrieved chunks, not 1,500 characters of each. Choosing sentences from *more* chunks within the
same budget also puts the answer in front of the model more often than whole top-ranked chunks do:
on the public evaluation's tuning half the expected phrase reached the prompt for more questions
(docs/evaluation.md has the figures).

A unit's first relevance is its lexical overlap with the question (question terms weighted by their
rarity among the candidate units) plus its embedding similarity to the question (a prior for the
chunk's retrieval rank was measured and did not help). Units are taken best first, each with the unit
after it for context, until the character budget is spent; chunks keep their retrieval order and "…" marks
text left out. A chunk none of whose units was chosen is left out of the prompt. The full chunk
stays the citation target: focusing only chooses what the model reads.

The cross-encoder reads the chosen units (each with the unit after it, as the model reads it): its best
logit is the evidence's strength, which decides weak-evidence refusals. With `choose_with_cross` it also
chooses: the best CROSS_CANDIDATES units by the cheap score are read by it and the two orders are fused by
Reciprocal Rank Fusion. Measured, that did not put the answer in front of the model more often
(docs/evaluation.md), so the product only measures with it by default (RAG_ANSWER_CROSS_FOCUS).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from knowledge.claims import RECORD_LINE_RE, TABLE_ROW_RE, TABLE_RULE_RE
from knowledge.terms import passage_terms, question_terms

SENTENCE_END_RE = re.compile(
    r"(?<=[.!?;:])\s+(?=[\"'(\[¿¡]?[A-ZÁÉÍÓÚÑ0-9`*])"  # a sentence end before a capital, digit or quote
    r"|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)"  # a blank line, or a line break before a list item
)
GAP = " … "
MAX_UNIT_CHARS = 360
CROSS_CANDIDATES = 48  # units the cross-encoder reads (≈8 ms each on 2 threads): the cheap score's best
RRF_K = 10  # small: the first few places of either order matter most


@dataclass(frozen=True)
class FocusUnit:
    text: str
    index: int  # position in its chunk
    header: int | None = None  # a table row: the position of its table's header row


@dataclass
class FocusedExcerpt:
    position: int  # index of the chunk in the list given
    text: str
    units: list[str]  # the units kept, in order (the verifier checks claims against them)
    strength: float | None = None  # the cross-encoder's best logit for a kept unit (None: not read by it)
    best: str = ""  # that unit, verbatim


CrossScore = Callable[[str, list[str]], np.ndarray]  # (question, passages) -> one logit per passage


def _prose_pieces(text: str) -> list[tuple[str, bool]]:
    """Sentences, except that a record line (a table row, a spreadsheet row, `a: 1; b: 2`) is one piece whole, never
    cut at its colons: its values stay beside their column names. (piece, is a record)"""
    pieces: list[tuple[str, bool]] = []
    prose: list[str] = []
    for line in text.split("\n"):
        if RECORD_LINE_RE.match(line):
            pieces += [(p, False) for p in SENTENCE_END_RE.split("\n".join(prose))] if prose else []
            prose = []
            pieces.append((line, True))
        else:
            prose.append(line)
    pieces += [(p, False) for p in SENTENCE_END_RE.split("\n".join(prose))] if prose else []
    return pieces


def split_units(text: str, *, code: bool) -> list[FocusUnit]:
    """Sentences (prose) or lines (code), each at most MAX_UNIT_CHARS (longer ones are cut at spaces; a record line
    at twice that). A Markdown table row names its table's header row (`header`): the model reads them together."""
    raw = [(line, False) for line in text.splitlines()] if code else _prose_pieces(text)
    units: list[str] = []
    headers: list[int | None] = []
    header: int | None = None
    for piece, record in raw:
        piece = piece.rstrip() if code else " ".join(piece.split())
        limit = MAX_UNIT_CHARS * (2 if record else 1)
        if record and TABLE_ROW_RE.match(piece):
            if header is None or TABLE_RULE_RE.match(piece):
                header = len(units) if header is None else header
                headers.append(None)
                units.append(piece)
                continue
        elif not code:
            header = None
        while len(piece) > limit:
            cut = piece.rfind(" ", 0, limit)
            cut = cut if cut > limit // 2 else limit
            units.append(piece[:cut])
            headers.append(header)
            piece = piece[cut:] if code else piece[cut:].lstrip()
        if piece.strip():
            units.append(piece)
            headers.append(header)
    return [FocusUnit(text=u, index=i, header=h) for i, (u, h) in enumerate(zip(units, headers, strict=True))]


def relevance(question: str, units: Sequence[str], embed: Callable[[list[str]], np.ndarray] | None) -> np.ndarray:
    """Lexical overlap (IDF over these units) plus embedding similarity of each unit to the question."""
    asked = question_terms(question)
    unit_terms = [passage_terms(u) for u in units]
    frequency = {t: sum(1 for terms in unit_terms if t in terms) for t in asked}
    idf = {t: math.log(1 + len(units) / (1 + frequency[t])) for t in asked}
    best_possible = sum(idf.values()) or 1.0
    lexical = np.array([sum(idf[t] for t in terms & asked) / best_possible for terms in unit_terms])
    if embed is None:
        return lexical
    vectors = embed([question, *units])
    return lexical + np.clip(vectors[1:] @ vectors[0], 0.0, 1.0)


def focus_excerpts(
    question: str,
    texts: Sequence[tuple[str, bool]],  # (chunk text, is code) in rank order
    *,
    budget_chars: int,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    cross: CrossScore | None = None,
    choose_with_cross: bool = True,
) -> list[FocusedExcerpt]:
    """The chunks that have a unit among the best for the question, each cut to its chosen units, in rank order.

    With `cross` and `choose_with_cross` off, the cross-encoder only measures the chosen units' strength."""
    per_chunk = [split_units(text, code=code) for text, code in texts]
    flat = [(c, u) for c, units in enumerate(per_chunk) for u in units]
    if not flat:
        return []
    scores = relevance(question, [u.text for _, u in flat], embed)
    logits: dict[int, float] = {}
    if cross is not None and choose_with_cross:
        scores, logits = _fused_with_cross(question, scores, flat, per_chunk, cross)
    keep: list[set[int]] = [set() for _ in texts]
    used = 0
    for position in np.argsort(-scores, kind="stable"):
        c, unit = flat[position]
        following = [unit.index + 1] if unit.index + 1 < len(per_chunk[c]) else []
        header = [] if unit.header is None else [unit.header]
        for index in [*header, unit.index, *following]:  # a table row's header, the unit, what follows it
            size = len(per_chunk[c][index].text) + 1
            if index in keep[c] or (used and used + size > budget_chars):
                continue
            keep[c].add(index)
            used += size
        if used >= budget_chars:
            break
    if cross is not None and not choose_with_cross:
        chosen = [p for p, (c, unit) in enumerate(flat) if unit.index in keep[c]]
        logits = dict(zip(chosen, map(float, cross(question, _windows(chosen, flat, per_chunk))), strict=True))
    focused = []
    for c, units in enumerate(per_chunk):
        if not keep[c]:
            continue
        kept = sorted(keep[c])
        joiner = "\n" if texts[c][1] else " "
        pieces = ["… "] if kept[0] > 0 else []
        for previous, index in zip([None, *kept], kept, strict=False):
            if previous is not None:
                lines = joiner == "\n" or any(RECORD_LINE_RE.match(units[i].text) for i in (previous, index))
                pieces.append(("\n" if lines else joiner) if index == previous + 1 else ("\n…\n" if lines else GAP))
            pieces.append(units[index].text)
        if kept[-1] < len(units) - 1:
            pieces.append(" …")
        read = [(logits[p], u.text) for p, (o, u) in enumerate(flat) if o == c and u.index in kept and p in logits]
        strength, best = max(read) if read else (None, "")
        focused.append(FocusedExcerpt(position=c, text="".join(pieces).strip(), units=[units[i].text for i in kept],
                                      strength=strength, best=best))  # fmt: skip
    return focused


def _fused_with_cross(
    question: str, scores: np.ndarray, flat: list[tuple[int, FocusUnit]], per_chunk: list[list[FocusUnit]],
    cross: CrossScore,
) -> tuple[np.ndarray, dict[int, float]]:  # fmt: skip
    """RRF of the cheap order and the cross-encoder's over the cheap score's best units; the rest keep their
    cheap order after them. Returns the fused scores and the logit of each unit the cross-encoder read."""
    candidates = [int(p) for p in np.argsort(-scores, kind="stable")[:CROSS_CANDIDATES]]
    read = cross(question, _windows(candidates, flat, per_chunk))
    logits = {p: float(v) for p, v in zip(candidates, read, strict=True)}
    by_cross = sorted(candidates, key=lambda p: -logits[p])
    fused = scores - float(np.max(scores)) - 1.0  # below every candidate, in their cheap order
    for rank, p in enumerate(candidates):
        fused[p] = 1.0 / (RRF_K + rank + 1)
    for rank, p in enumerate(by_cross):
        fused[p] += 1.0 / (RRF_K + rank + 1)
    return fused, logits


def _windows(positions: list[int], flat: list[tuple[int, FocusUnit]], per_chunk: list[list[FocusUnit]]) -> list[str]:
    """Each unit with the one after it, as the model reads it: what the cross-encoder scores."""
    windows = []
    for p in positions:
        c, unit = flat[p]
        following = per_chunk[c][unit.index + 1].text if unit.index + 1 < len(per_chunk[c]) else ""
        windows.append(f"{unit.text} {following}".strip())
    return windows
