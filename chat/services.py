"""answer = retrieve → focus excerpts → grounded prompt → chat model → verified citations. One function a step."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from chat import history
from chat.focus import FocusedExcerpt, focus_excerpts
from chat.models import Assistant, ChatMessage, ChatSession
from chat.prompting import GroundedPrompt, PromptExcerpt, build_grounded_history
from inference.embedders import get_embedder
from inference.llm import LLMGateway, ModelUnavailable, configured_paths, get_gateway, model_path_allowed
from knowledge.claims import (
    CLAIM_SPLIT_RE,
    NOT_FOUND_RE,
    NOTHING_RETRIEVED,
    PROBLEM_REASONS,
    REFUSALS,
    Claim,
    EvidenceText,
    Verifier,
    language_of,
    missing_identifiers,
    render,
    says_not_found,
    split_claims,
)
from knowledge.ingest.obsidian import embedded_source
from knowledge.models import Status
from knowledge.search.retrieval import RetrievedChunk, RetrieveFilters, page_of, retrieve
from knowledge.search.when import TimeRead, read_time
from knowledge.selectors import embedded_origin
from tenants.models import Tenant
from tenants.principals import Viewer

logger = logging.getLogger(__name__)

EXTRACTIVE_EXCERPT_CHARS = 400
MAX_REPAIR_SEARCHES = 2
REPAIR_TOP_K = 10  # hits of an identifier-only search that are checked for the identifier itself


@dataclass
class AnswerSettings:
    top_k: int = 6
    temperature: float = 0.0  # greedy unless an assistant says otherwise: grounded answers, reproducible
    top_p: float = 0.9
    max_tokens: int = 384
    persona: str = ""
    model_paths: list[str] | None = None
    filters: RetrieveFilters = field(default_factory=RetrieveFilters)

    @classmethod
    def from_assistant(cls, assistant: Assistant | None, *, top_k: int | None = None,
                       filters: RetrieveFilters | None = None) -> AnswerSettings:  # fmt: skip
        if assistant is None:
            return cls(top_k=top_k or 6, filters=filters or RetrieveFilters(), max_tokens=settings.RAG_LLM_MAX_TOKENS)
        scope = filters or RetrieveFilters(source_ids=_names(assistant.source_ids), tags=_names(assistant.tags))
        chosen = assistant.model.path if assistant.model is not None else assistant.model_path
        if not assistant.model_id and chosen and not model_path_allowed(chosen):  # checked where it is used
            logger.warning("Assistant %s names a model path outside the allowed ones; using the default", assistant)
            chosen = ""
        paths = [chosen, *configured_paths()] if chosen else None  # the default chain stays as fallback
        return cls(
            top_k=top_k or assistant.top_k, temperature=assistant.temperature, top_p=assistant.top_p,
            max_tokens=assistant.max_tokens, persona=assistant.persona, model_paths=paths, filters=scope,
        )  # fmt: skip


def _names(value: object) -> list[str] | None:
    """An assistant's scope list as stored (JSON): only its non-empty strings count."""
    names = [v.strip() for v in value if isinstance(v, str) and v.strip()] if isinstance(value, list) else []
    return names or None


@dataclass
class Sources:
    """What retrieval found and which excerpts go to the model: sent before the first token."""

    hits: list[RetrievedChunk]
    excerpts: list[RetrievedChunk]  # what the model reads, [n] = excerpts[n - 1]
    focused: list[FocusedExcerpt] = field(default_factory=list)  # the part of each excerpt it reads
    missing: list[str] = field(default_factory=list)  # identifiers the question names that no excerpt contains
    timings: dict[str, float] = field(default_factory=dict)
    when: TimeRead | None = None  # the question asks about a past time or about history (knowledge/search/when.py)

    @property
    def strength(self) -> float | None:
        """The cross-encoder's best logit for a sentence the model reads: how well the evidence answers at best."""
        read = [f.strength for f in self.focused if f.strength is not None]
        return max(read) if read else None


@dataclass(kw_only=True)
class Answer:
    answer: str
    generated: bool
    model: str
    status: str  # answered | partial | not_verified | not_found | no_evidence | extractive
    citations: list[dict[str, Any]]
    hits: list[RetrievedChunk]
    reason: str = ""
    ttft_ms: float | None = None
    total_ms: float = 0.0
    claims: list[dict[str, Any]] = field(default_factory=list)
    # not_verified: the source sentences most likely to hold the answer, verbatim ({"n", "text", "score"})
    evidence: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # where the time to first token went
    question: str = ""  # what was answered: the question, or a follow-up read with the turn before it
    prompt_tokens: int = 0  # the model's tokens: the whole prompt (system turn included) and what it wrote
    completion_tokens: int = 0


@dataclass(kw_only=True)
class Sentence:
    """A sentence of the model's answer, checked as soon as the model finished it: shown (with its verified markers
    and the excerpt sentences it stands on) or not, and then why."""

    claim: dict[str, Any]
    shown: bool
    text: str = ""  # as shown: the sentence with its verified markers
    reason: str = ""  # why it is not shown


def citation_of(n: int, hit: RetrievedChunk, cited_text: str = "") -> dict[str, Any]:
    """A citation; its page is the one the cited sentences' support sits on (a chunk may span pages). Text a vault
    note embeds from another note is cited to that note, with the note it was read in as `embedded_in`."""
    chunk = hit.chunk
    page = page_of(chunk, cited_text) if cited_text else hit.location_page
    citation = {"n": n, **chunk.location(page=page), "label": hit.label_at(page), "freshness": hit.freshness,
                **history.version_of(hit)}  # fmt: skip
    embedded = embedded_source(chunk.text, cited_text) if cited_text and "[Embedded from " in chunk.text else ""
    if embedded:
        document = chunk.document
        origin = embedded_origin(document=document, key=embedded)
        if origin is not None:
            citation["embedded_in"] = {"document_id": document.document_id, "document_key": document.display_key}
            citation.update(document_id=origin.document_id, document_key=origin.display_key, title=origin.title,
                            label=f"{origin.display_key} (embedded in {hit.label_at(page)})")  # fmt: skip
    return citation


STALE_NOTES = {
    "en": {"review_due": "Note: this rests on {docs}, due a review since {date}; it may be out of date.",
           "other": "Note: this rests on {docs}, which is {status} (not in force today)."},
    "es": {"review_due": "Nota: esto se basa en {docs}, pendiente de revisión desde {date}; puede estar "
                         "desactualizado.",
           "other": "Nota: esto se basa en {docs}, que está {status} (no vigente hoy)."},
}  # fmt: skip


def stale_note(citations: list[dict[str, Any]], claims: list[dict[str, Any]], language: str) -> str:
    """When cited evidence is not current (due a review; or expired, superseded, not yet valid, when the read asked
    for those too): each claim standing on it says which status, and the answer gets a sentence saying so."""
    status_of = {c["n"]: (c.get("freshness") or {}).get("status", "current") for c in citations}
    for claim in claims:
        stale = sorted({status_of[n] for n in claim.get("citations", []) if status_of.get(n, "current") != "current"})
        if stale:
            claim["evidence_status"] = stale
    stale_citations = [c for c in citations if status_of[c["n"]] != "current"]
    if not stale_citations:
        return ""
    notes = STALE_NOTES.get(language, STALE_NOTES["en"])
    docs = ", ".join(dict.fromkeys(c["document_key"] for c in stale_citations))
    statuses = {status_of[c["n"]] for c in stale_citations}
    if statuses == {"review_due"}:
        dates = sorted(str((c.get("freshness") or {}).get("review_by") or "") for c in stale_citations)
        return notes["review_due"].format(docs=docs, date=dates[0])
    return notes["other"].format(docs=docs, status=", ".join(sorted(s.replace("_", " ") for s in statuses)))


def extractive_answer(excerpts: list[RetrievedChunk]) -> tuple[str, list[dict[str, Any]]]:
    lines = ["No language model is available, so here are the most relevant excerpts:"]
    for n, hit in enumerate(excerpts[:3], 1):
        text = " ".join(hit.chunk.text.split())
        if len(text) > EXTRACTIVE_EXCERPT_CHARS:
            text = text[: EXTRACTIVE_EXCERPT_CHARS - 1].rsplit(" ", 1)[0] + "…"
        lines.append(f"[{n}] {text}")
    return "\n\n".join(lines), [citation_of(n, hit) for n, hit in enumerate(excerpts[:3], 1)]


def _embed(texts: list[str]):
    return get_embedder().embed(texts)


# Measured on the public set (1.5B): 1,600 characters of focused excerpts → 581 prompt tokens at the median,
# 800 → 365; so about 150 tokens of labels, question and template, plus one token per 3.7 characters.
PROMPT_OVERHEAD_TOKENS = 150
CHARS_PER_EXCERPT_TOKEN = 3.7
MIN_CONTEXT_CHARS = 400  # below this the model reads too little to answer anything
TTFT_HEADROOM = 0.8  # the share of the first-token target prefill may take (retrieval and focus take the rest)


def context_budget(prefill_rate: float | None) -> int:
    """Characters of focused excerpts for the next answer: RAG_ANSWER_CONTEXT_CHARS, or, with a first-token
    target set (RAG_ANSWER_TTFT_TARGET_S), fewer on a machine whose measured prefill rate would miss it."""
    budget = settings.RAG_ANSWER_CONTEXT_CHARS
    target = settings.RAG_ANSWER_TTFT_TARGET_S
    if not prefill_rate or target <= 0:
        return budget
    affordable = int((prefill_rate * target * TTFT_HEADROOM - PROMPT_OVERHEAD_TOKENS) * CHARS_PER_EXCERPT_TOKEN)
    return max(MIN_CONTEXT_CHARS, min(budget, affordable))


def _cross(question: str, passages: list[str]):
    from knowledge.search.rerank import get_reranker

    return get_reranker().score(question, passages)


CROSS_RETRY_S = 300  # a cross-encoder that failed to load is tried again after this long, not on every answer
_cross_failed_at: float | None = None


def cross_encoder():
    """The packaged cross-encoder's scorer, or None when it cannot be loaded (its package missing or its file
    failing the size/sha256 check): answers then go on with the checks that need no model, never fail. A failed
    load is not retried on every answer (it hashes 34 MB each time)."""
    global _cross_failed_at
    from inference.packaged import PackagedModelError
    from knowledge.search.rerank import get_reranker

    if _cross_failed_at is not None and time.monotonic() - _cross_failed_at < CROSS_RETRY_S:
        return None
    try:
        get_reranker()
    except (PackagedModelError, OSError, ImportError, RuntimeError) as exc:
        logger.warning("Answers run without the cross-encoder for %d s: %s", CROSS_RETRY_S, exc)
        _cross_failed_at = time.monotonic()
        return None
    _cross_failed_at = None
    return _cross


def prepare(
    *, viewer: Viewer, question: str, options: AnswerSettings, budget_chars: int | None = None,
    rerank: bool | None = None, cross_focus: bool | None = None,
) -> Sources:  # fmt: skip
    """Retrieve (the cross-encoder reranking the hybrid's first candidates); then, for an identifier the question
    names that no hit contains, search for it alone; then focus, the cross-encoder choosing sentences too.

    Weak hits stay in: whether they answer is for the model and the verifier to say, not a similarity
    threshold. A named identifier (a setting, option, qualified name) that no hit contains even after its
    own search is recorded in `missing`: the knowledge base does not document it."""
    rerank = settings.RAG_ANSWER_RERANK if rerank is None else rerank
    cross_focus = settings.RAG_ANSWER_CROSS_FOCUS if cross_focus is None else cross_focus
    started = time.perf_counter()
    asked = None
    if options.filters.as_of is None and not options.filters.include_expired:  # the caller chose no time itself
        asked = read_time(question, now=timezone.now())
    hits = _read(viewer, question, options, rerank, asked)
    timings = {"retrieve_ms": (time.perf_counter() - started) * 1000}
    candidates = hits[: settings.RAG_ANSWER_EXCERPTS]
    missing = missing_identifiers(question, [hit.chunk.text for hit in candidates])
    for name in missing[:MAX_REPAIR_SEARCHES]:
        known = {hit.chunk.chunk_id for hit in candidates}
        found = retrieve(viewer=viewer, query=name, top_k=REPAIR_TOP_K, filters=options.filters, specific=True)
        new = [hit for hit in found if hit.chunk.chunk_id not in known]
        candidates += [hit for hit in new if not missing_identifiers(name, [hit.chunk.text])]
    missing = missing_identifiers(question, [hit.chunk.text for hit in candidates])
    focus_started = time.perf_counter()
    focused = focus_excerpts(
        question, [(hit.chunk.text, hit.chunk.mode == "code") for hit in candidates],
        budget_chars=budget_chars or settings.RAG_ANSWER_CONTEXT_CHARS, embed=_embed,
        cross=cross_encoder(), choose_with_cross=cross_focus,
    )  # fmt: skip
    timings["focus_ms"] = (time.perf_counter() - focus_started) * 1000
    shown = {hit.chunk.chunk_id for hit in hits}
    hits = hits + [hit for hit in candidates if hit.chunk.chunk_id not in shown]  # what the repair search added
    return Sources(hits=hits, excerpts=[candidates[f.position] for f in focused], focused=focused, missing=missing,
                   timings=timings, when=asked)  # fmt: skip


def _read(viewer: Viewer, question: str, options: AnswerSettings, rerank: bool,
          asked: TimeRead | None) -> list[RetrievedChunk]:  # fmt: skip
    """The hits a question is answered from. A question about now reads what is in force now. One about a past
    instant reads the versions served then and the documents whose stated window covers it (a document found in
    the first read gives only its version of then); one about history reads every version and every document,
    superseded and expired ones included. The reads are merged rank by rank."""
    base = options.filters
    if asked is None:
        return retrieve(viewer=viewer, query=question, top_k=options.top_k, filters=base, rerank=rerank)
    reads: list[list[RetrievedChunk]] = []
    if asked.at is not None:
        served = retrieve(viewer=viewer, query=question, top_k=options.top_k, rerank=rerank,
                          filters=dataclasses.replace(base, as_of=asked.at))  # fmt: skip
        then = {hit.chunk.document_id for hit in served}  # a document's versions share chunk ids: points differ
        stated = retrieve(viewer=viewer, query=question, top_k=options.top_k, rerank=rerank,
                          filters=dataclasses.replace(base, in_force_at=asked.at))  # fmt: skip
        reads += [served, [hit for hit in stated if hit.chunk.document_id not in then]]
    if asked.history:
        every = dataclasses.replace(base, include_expired=True, statuses=[Status.ACTIVE, Status.SUPERSEDED])
        reads.append(retrieve(viewer=viewer, query=question, top_k=options.top_k, filters=every, rerank=rerank))
    merged: list[RetrievedChunk] = []
    seen: set[str] = set()
    for rank in range(max(len(read) for read in reads)):
        for read in reads:
            if rank < len(read) and read[rank].chunk.point_id not in seen:
                seen.add(read[rank].chunk.point_id)
                merged.append(read[rank])
    return merged[: options.top_k]


def focused_prompt(
    question: str, sources: Sources, options: AnswerSettings, count_tokens=None, max_prompt_tokens: int | None = None
) -> tuple[GroundedPrompt, list[EvidenceText]]:
    """The grounded prompt of the focused excerpts, and what each claim may be checked against."""
    pairs = list(zip(sources.focused, sources.excerpts, strict=True))
    if sources.when is None:
        excerpts = [PromptExcerpt(text=f.text, label=hit.label) for f, hit in pairs]
        evidence = [EvidenceText(hit.chunk.text, f.units, hit.chunk.document.document_id) for f, hit in pairs]
    else:  # a question about the past: each excerpt says when it was in force, and a commit says why it was made
        excerpts, evidence = [], []
        for f, hit in pairs:
            changed = history.changed_lines(hit)
            note, when = history.change_note(hit, question, changed), history.when_label(hit)
            label = f"{hit.label}; {when}" if when else hit.label
            excerpts.append(PromptExcerpt(text=f"{note}\n{f.text}" if note else f.text, label=label))
            # What the label says of the version (its window, its commit) is checked evidence too, like the note.
            about = " ".join(part for part in (f"This version: {when}." if when else "", note) if part)
            units = [*([about] if about else []), *(f.units or [f.text])]
            evidence.append(EvidenceText(
                f"{about}\n{hit.chunk.text}" if about else hit.chunk.text, units, hit.chunk.document.document_id,
                window=history.window_of(hit), current=history.is_current(hit), has_history=history.has_history(hit),
                step=max(hit.chunk.document.version - hit.chunk.document_version.version, 0),
                first=hit.chunk.document_version.version == 1, before="\n".join(changed[0]), note=about,
            ))  # fmt: skip
    kwargs = {"count_tokens": count_tokens} if count_tokens else {}
    prompt = build_grounded_history(question, excerpts, persona=options.persona,
                                    max_prompt_tokens=max_prompt_tokens, **kwargs)  # fmt: skip
    return prompt, evidence[: len(prompt.excerpts)]


def unknown_identifiers_refusal(question: str, names: list[str]) -> str:
    listed = ", ".join(f"`{name}`" for name in names)
    if language_of(question) == "es":
        return f"Los documentos disponibles no mencionan {listed}, así que no contienen la respuesta a esta pregunta."
    return f"The documents available to me do not mention {listed}, so they do not contain the answer to this question."


@dataclass(kw_only=True)
class Verdict:
    """What the checks made of a generated draft."""

    status: str  # answered | partial | not_verified | not_found
    text: str  # the answer shown: supported sentences with their evidence, or the refusal
    citations: list[dict[str, Any]]
    claims: list[dict[str, Any]]  # every sentence of the draft, checked
    reason: str = ""  # why it was refused
    evidence: list[dict[str, Any]] = field(default_factory=list)  # not_verified: where the answer may be


def answer_verifier(question: str, evidence: list[EvidenceText], when: TimeRead | None = None) -> Verifier:
    """The checker of a draft's sentences; `when`: the question asks about the past (each claim rests on evidence of
    its own time)."""
    cross = cross_encoder() if settings.RAG_ANSWER_CROSS_CHECK else None
    return Verifier(evidence, question=question, embed=_embed, cross=cross, when=when, now=timezone.now())


def verified(question: str, draft: str, sources: Sources, evidence: list[EvidenceText],
             verifier: Verifier | None = None, viewer: Viewer | None = None) -> Verdict:  # fmt: skip
    """The verdict on a generated draft (`verifier`: the one that checked its sentences as they streamed).

    The answer stands when a sentence of it answers the question (the cross-encoder reads it so; without it,
    its first claim or one sharing a content term with the question) and is supported by an excerpt, values
    and polarity included; for a question about now (`viewer` given), a value that came with its document's latest
    change is followed by what was there before, cited (`earlier_notes`). Otherwise it is a refusal: `not_verified`
    with the source sentences most likely to hold the answer when the model read some that bear on the question,
    `not_found` when it read none."""
    language = language_of(question)
    verifier = verifier or answer_verifier(question, evidence, sources.when)
    claims = verifier.check(draft)
    checked = [c for c in claims if c.supported is not None]
    if not any(c.supported and verifier.addresses_question(c, first=c is checked[0]) for c in checked):
        reason = (
            "The model said the excerpts do not contain the answer." if says_not_found(draft)
            else "The excerpts state what the draft says of another time than the question asks about (problem: "
            "time)." if any(c.problem == "time" for c in checked)
            else "No sentence of the model's draft that answers the question is supported by the excerpts."
        )  # fmt: skip
        return refusal(question, sources, reason, claims=[c.as_dict() for c in claims])
    used = sorted({n for c in claims for n in c.citations})
    cited = {n: " ".join(c.text for c in claims if n in c.citations) for n in used}
    citations = [citation_of(n, sources.excerpts[n - 1], cited[n]) for n in used]
    status = "partial" if any(c.supported is False or c.relevant is False for c in checked) else "answered"
    text = render(claims, evidence=settings.RAG_ANSWER_EVIDENCE_LINES)
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


MAX_EARLIER_NOTES = 2


def earlier_notes(viewer: Viewer, claims: Sequence[Claim], sources: Sources, cited: int,
                  language: str) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
    """For the supported claims of an answer about now: what their document said before the change that brought
    the value they state (chat/history.py), each a sentence with its own citation, numbered after the excerpts
    (`cited`: how many the model read), with the earlier text (no excerpt card holds it)."""
    out: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for claim in claims:
        for n in claim.citations if claim.supported else []:
            hit = sources.excerpts[n - 1]
            if hit.chunk.document.document_id in seen or len(out) == MAX_EARLIER_NOTES:
                continue
            state = history.earlier_state(viewer, hit, claim.text)
            if state is None:
                continue
            seen.add(hit.chunk.document.document_id)
            citation = citation_of(cited + len(out) + 1, state.hit, state.text)
            out.append((history.earlier_note(state, language), {**citation, "text": state.hit.chunk.text}))
    return out


# --- a refusal that shows where to look -------------------------------------------------------
# A source sentence the cross-encoder scores below this for the question is not shown under a refusal: it bears
# on something else. Chosen on the tuning half of the public set only (docs/evaluation.md).
WHERE_TO_LOOK_LOGIT = 0.0
WHERE_TO_LOOK_MAX = 3
WHERE_TO_LOOK = {
    "en": "I could not find a verifiable answer in the documents; these passages may hold it:",
    "es": "No se encuentra una respuesta verificable en los documentos; estos pasajes pueden contenerla:",
}


def where_to_look(question: str, sources: Sources) -> list[dict[str, Any]]:
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


def refusal(question: str, sources: Sources, reason: str, *, claims: list[dict[str, Any]] | None = None) -> Verdict:
    """No sentence could be verified: the passages that may hold the answer (not_verified), or a plain refusal
    when the model read nothing that bears on the question (not_found)."""
    language = language_of(question)
    passages = where_to_look(question, sources)
    if not passages:
        return Verdict(status="not_found", text=REFUSALS[language], citations=[], claims=claims or [], reason=reason)
    lines = [WHERE_TO_LOOK[language], *(f"> [{p['n']}] “{p['text']}”" for p in passages)]
    numbers = sorted({p["n"] for p in passages})
    citations = [
        citation_of(n, sources.excerpts[n - 1], " ".join(p["text"] for p in passages if p["n"] == n)) for n in numbers
    ]
    return Verdict(status="not_verified", text="\n".join(lines), citations=citations, claims=claims or [],
                   reason=reason, evidence=passages)  # fmt: skip


SENTENCE_LEFT_OUT = "A sentence of the model's was left out: {reason}."
HELD_BACK = "A supported sentence was held back: it does not seem to answer the question."


class SentenceChecker:
    """The model's tokens in, checked sentences out: a sentence is checked as soon as the next one begins (or the
    model stops), and shown only when an excerpt supports it and it answers the question. A sentence with nothing
    to check ("Here is how:") waits for a shown one to follow it; the model's "the excerpts do not say" is never
    shown (the verdict says it)."""

    def __init__(self, verifier: Verifier, clock: Callable[[], float]) -> None:
        self.verifier, self.clock = verifier, clock
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
        if claim.supported and self.verifier.addresses_question(claim, first=claim is self.first_checked):
            shown = [*self.waiting, claim]
            self.waiting = []
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


class AnswersBusy(Exception):
    """More answers are pending in this process than RAG_ANSWER_MAX_PENDING: come back after `retry_after` s."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"The answer model is busy; retry in {retry_after} s.")
        self.retry_after = retry_after


class AnswerAdmission:
    """At most RAG_ANSWER_MAX_PENDING answers at once per process: the one the model is writing and those
    waiting for it (the model writes one at a time). Past that an answer is refused at once, with an honest
    wait (the mean time of recent answers), instead of holding a web thread for minutes: retrieval and the
    pages keep the other threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.pending = 0
        self.mean_s = 10.0  # until answers have been timed here

    def enter(self) -> None:
        with self._lock:
            if self.pending >= settings.RAG_ANSWER_MAX_PENDING:
                raise AnswersBusy(max(1, math.ceil(self.mean_s)))
            self.pending += 1

    def leave(self, seconds: float) -> None:
        with self._lock:
            self.pending -= 1
            self.mean_s = 0.8 * self.mean_s + 0.2 * seconds


ADMISSION = AnswerAdmission()


def stream_answer(
    *, viewer: Viewer, question: str, options: AnswerSettings, earlier: Sequence[str] = ()
) -> Iterator[Sources | Sentence | Answer]:
    """Yield the Sources as soon as retrieval is done, then each sentence of the model's as soon as it is checked,
    then the final Answer. The model's unchecked draft is never yielded. `earlier`: the questions asked before in
    this conversation, oldest first (a follow-up may be read with the one before it: `in_context`).

    Raises AnswersBusy at the first step when this process already has its limit of pending answers."""
    ADMISSION.enter()
    entered = time.perf_counter()
    try:
        yield from _stream_answer(viewer=viewer, question=question, options=options, earlier=earlier)
    finally:
        ADMISSION.leave(time.perf_counter() - entered)


# A follow-up refers back: a short message (FOLLOW_UP_MAX_WORDS) with a word that points at what was said before, or
# one that opens with a connector. Measured against the public questions, which stand alone (bench/follow_ups.py):
# the cross-encoder's score of a message's own evidence could not tell them apart (a hard real question scores as
# low as "and which document says so?", and a joined reading borrows the earlier question's strength).
FOLLOW_UP_MAX_WORDS = 8
REFERRING = frozenset(
    "so that this these those it its them they there such same "  # English (articles are not pointers)
    "eso esto ello esa ese esas esos esta este estas estos aquello ahí allí mismo misma".split()  # Spanish
)
CONNECTORS = ("and ", "also ", "but ", "what about ", "how about ", "then ", "y ", "e ", "pero ", "también ",
              "entonces ", "¿y ", "¿qué hay de ", "¿y si ")  # fmt: skip


def follows_up(message: str) -> bool:
    words = re.findall(r"\w+", message.lower())
    if not words or len(words) > FOLLOW_UP_MAX_WORDS:
        return False
    opening = message.lower().lstrip(" ¡\t")
    return bool(REFERRING.intersection(words)) or opening.startswith(CONNECTORS)


def in_context(
    *, viewer: Viewer, question: str, earlier: Sequence[str], options: AnswerSettings, budget_chars: int | None
) -> tuple[str, Sources]:
    """The question as it is answered, and its sources. A message that refers back to the conversation ("and which
    document says so?", "what about Spain?") is read together with the question before it; any other is answered
    as asked (a new topic stays a new topic, and an out-of-scope question is refused, not answered from the
    earlier question's evidence)."""
    previous = next((text.strip() for text in reversed(earlier) if text.strip()), "")
    if previous and follows_up(question):
        together = f"{previous} {question}"
        joined = prepare(viewer=viewer, question=together, options=options, budget_chars=budget_chars)
        if joined.excerpts:
            return together, joined
    return question, prepare(viewer=viewer, question=question, options=options, budget_chars=budget_chars)


def _stream_answer(
    *, viewer: Viewer, question: str, options: AnswerSettings, earlier: Sequence[str]
) -> Iterator[Sources | Sentence | Answer]:
    started = time.perf_counter()
    elapsed = lambda: (time.perf_counter() - started) * 1000  # noqa: E731
    gateway: LLMGateway = get_gateway(options.model_paths)
    model = gateway.model()  # ModelUnavailable (restarting: 503 + Retry-After) before anything is sent
    budget = context_budget(model.prefill_rate if model is not None else None)
    question, sources = in_context(viewer=viewer, question=question, earlier=earlier, options=options,
                                   budget_chars=budget)  # fmt: skip
    timings = {**sources.timings, "sources_ms": elapsed(), "context_chars": budget}
    yield sources
    if not sources.excerpts:
        text = NOTHING_RETRIEVED[language_of(question)]
        yield _unanswered(text, "no_evidence", "Retrieval found nothing.", sources, elapsed(), question=question)
        return
    if sources.missing:
        text = unknown_identifiers_refusal(question, sources.missing)
        yield _unanswered(text, "not_found", f"No document mentions {', '.join(sources.missing)}.", sources,
                          elapsed(), question=question)  # fmt: skip
        return
    if weak_evidence(sources):
        text = REFUSALS[language_of(question)]
        reason = (f"The best excerpt sentence does not answer the question (cross-encoder logit "
                  f"{sources.strength:.1f} < {WEAK_EVIDENCE_LOGIT}).")  # fmt: skip
        yield _unanswered(text, "not_found", reason, sources, elapsed(), timings=timings, question=question)
        return
    if model is None:
        text, citations = extractive_answer(sources.excerpts)
        yield _unanswered(text, "extractive", gateway.unavailable_reason(), sources, elapsed(), citations=citations,
                          question=question)  # fmt: skip
        return
    budget = model.n_ctx - options.max_tokens - 64
    prompt, evidence = focused_prompt(question, sources, options, model.count_tokens, budget)
    timings["prompt_ms"] = elapsed()
    timings["prompt_tokens"] = model.count_tokens(prompt.messages[-1]["content"])  # after the cached system turn
    model.warm(prompt.messages[0]["content"])  # once per loaded model and system prefix
    timings["warm_ms"] = elapsed()
    checker = SentenceChecker(answer_verifier(question, evidence, sources.when), elapsed)
    ttft: float | None = None
    written = 0  # the model streams one token a delta
    tokens = model.stream(prompt.messages, max_tokens=options.max_tokens, temperature=options.temperature,
                          top_p=options.top_p)  # fmt: skip
    try:
        for delta in tokens:
            if ttft is None:
                ttft = elapsed()
                model.record_prefill(int(timings["prompt_tokens"]), (ttft - timings["warm_ms"]) / 1000)
                logger.info("answer: first token after %.0f ms (model %s, about %d prompt tokens)", ttft,
                            model.name, timings["prompt_tokens"])  # fmt: skip
            written += 1
            yield from checker.feed(delta)
        yield from checker.finish()
    finally:
        tokens.close()  # the client went away: stop generating now
    timings.update(checker.times)
    timings["generated_ms"] = checker.arrivals[-1][1] if checker.arrivals else elapsed()  # the model's last token
    checked_at = elapsed()
    verdict = verified(question, checker.buffer, sources, evidence, verifier=checker.verifier, viewer=viewer)
    timings["verify_ms"] = elapsed() - checked_at
    yield Answer(
        answer=verdict.text, generated=True, model=model.name, status=verdict.status, citations=verdict.citations,
        hits=sources.hits, reason=" ".join(part for part in (gateway.fallback_note(), verdict.reason) if part),
        ttft_ms=ttft, total_ms=elapsed(), claims=verdict.claims, evidence=verdict.evidence,
        timings={k: round(v, 1) for k, v in timings.items()}, question=question,
        prompt_tokens=sum(model.count_tokens(m["content"]) for m in prompt.messages), completion_tokens=written,
    )  # fmt: skip


def _unanswered(
    text: str, status: str, reason: str, sources: Sources, total_ms: float, *,
    citations: list[dict[str, Any]] | None = None, timings: dict[str, float] | None = None, question: str = "",
) -> Answer:  # fmt: skip
    """An answer the model did not write: a refusal, or the excerpts themselves when no model is available."""
    return Answer(answer=text, generated=False, model="", status=status, citations=citations or [],
                  hits=sources.hits, reason=reason, total_ms=total_ms, timings=timings or {},
                  question=question)  # fmt: skip


def preload_chat_model(wait_s: float | None = None) -> None:
    """Have the model server compute the KV state of the default system turn, once it is up (best effort)."""
    deadline = time.monotonic() + (settings.RAG_LLM_START_TIMEOUT_S if wait_s is None else wait_s)
    while True:
        try:
            model = get_gateway().model()
            if model is not None:
                model.warm(build_grounded_history("", []).messages[0]["content"])
            return
        except ModelUnavailable as exc:
            if time.monotonic() > deadline:
                logger.info("Chat model not warmed: %s", exc.reason)
                return
            time.sleep(1)
        except Exception:  # a failed warm-up only means the first question pays for the system prefix
            logger.exception("Warming the chat model failed")
            return


def answer_question(*, viewer: Viewer, question: str, options: AnswerSettings, earlier: Sequence[str] = ()) -> Answer:
    result = None
    for item in stream_answer(viewer=viewer, question=question, options=options, earlier=earlier):
        if isinstance(item, Answer):
            result = item
    assert result is not None
    return result


def assistant_get(*, tenant: Tenant, name: str | None) -> Assistant | None:
    if not name:
        return None
    return Assistant.objects.for_tenant(tenant).filter(name=name).first()


def session_record(*, tenant: Tenant, session: ChatSession, question: str, result: Answer,
                   record: Any = None) -> ChatMessage:  # fmt: skip
    """Save the user's original words and the answer (never the enriched prompt); `record` is the answer as
    given (chat.records), which verdicts name."""
    ChatMessage.objects.create(tenant=tenant, session=session, role=ChatMessage.Role.USER, text=question)
    if not session.title:
        session.title = question[:200]
    session.save()
    return ChatMessage.objects.create(
        tenant=tenant, session=session, role=ChatMessage.Role.ASSISTANT, text=result.answer, model=result.model,
        generated=result.generated, status=result.status, citations=result.citations, claims=result.claims,
        ttft_ms=result.ttft_ms, total_ms=result.total_ms, record=record,
    )  # fmt: skip
