"""What the model reads: the answer's settings, retrieval read at the question's time (with a repair search for an
identifier no hit contains), the excerpts focused to the context budget, a follow-up read with the question before
it, and the grounded prompt with the evidence each claim is checked against."""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from chat import history
from chat.focus import FocusedExcerpt, focus_excerpts
from chat.models import Assistant
from chat.prompting import GroundedPrompt, PromptExcerpt, build_grounded_history
from core import languages
from inference.embedders import get_embedder
from inference.llm import configured_paths, model_path_allowed
from knowledge.claims import (
    EvidenceText,
    missing_identifiers,
)
from knowledge.models import Status
from knowledge.search.retrieval import RetrievedChunk, RetrieveFilters, retrieve
from knowledge.search.when import TimeRead, read_time
from tenants.principals import Viewer

MAX_REPAIR_SEARCHES = 2
REPAIR_TOP_K = 10  # hits of an identifier-only search that are checked for the identifier itself

logger = logging.getLogger(__name__)


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
    multilingual: bool = False  # read across languages (across_languages): the multilingual encoder judges closeness
    viewer: Viewer | None = None  # who asked: an excerpt's earlier version is read through their access

    @property
    def strength(self) -> float | None:
        """The cross-encoder's best logit for a sentence the model reads: how well the evidence answers at best."""
        read = [f.strength for f in self.focused if f.strength is not None]
        return max(read) if read else None


def embed(texts: list[str]):
    return get_embedder().embed(texts)


def embed_multilingual(texts: list[str]):
    """The multilingual leg's vectors (one space for every language), or the embedder's when there is none."""
    embedder = get_embedder()
    multilingual = getattr(embedder, "embed_multilingual", None)
    return multilingual(texts) if multilingual is not None else embedder.embed(texts)


def across_languages(question: str, hits: Sequence[RetrievedChunk]) -> bool:
    """Whether an answer reads across languages (or in a language other than English): a question not in English,
    or an excerpt in another language than the question's. Then the English models (the embedder's similarities,
    the cross-encoder) cannot judge what is close to what, and the multilingual encoder does."""
    if getattr(get_embedder(), "embed_multilingual", None) is None:
        return False
    asked = languages.detect(question)
    return asked != languages.DEFAULT or any((hit.chunk.language or languages.DEFAULT) != asked for hit in hits)


# Measured on the public set (1.5B): 1,600 characters of focused excerpts → 581 prompt tokens at the median,
# 800 → 365; so about 150 tokens of labels, question and template, plus one token per 3.7 characters.
PROMPT_OVERHEAD_TOKENS = 150
CHARS_PER_EXCERPT_TOKEN = 3.7
MIN_CONTEXT_CHARS = 400  # below this the model reads too little to answer anything
TTFT_HEADROOM = 0.8  # the share of the first-token target prefill may take (retrieval and focus take the rest)


SHARED_MIN_CHARS = 800  # under load an answer reads no fewer excerpt characters than this


def context_budget(prefill_rate: float | None, waiting: int = 0) -> int:
    """Characters of focused excerpts for the next answer: RAG_ANSWER_CONTEXT_CHARS, or, with a first-token
    target set (RAG_ANSWER_TTFT_TARGET_S), fewer on a machine whose measured prefill rate would miss it. With
    `waiting` other answers pending for the same model (RAG_ANSWER_SHARE_UNDER_LOAD), each reads its share, never
    under SHARED_MIN_CHARS: the model writes one answer at a time and reading the excerpts (prefill) is most of each
    answer's time on a CPU (bench/company.py: 8.1 of 9.9 s to the first verified sentence), so the last in the
    queue waits for less."""
    budget = settings.RAG_ANSWER_CONTEXT_CHARS
    if waiting > 0 and settings.RAG_ANSWER_SHARE_UNDER_LOAD:
        budget = max(min(budget, SHARED_MIN_CHARS), budget // (waiting + 1))
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
    rerank = rerank and languages.detect(question) == languages.DEFAULT  # the cross-encoder reads English only
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
    multilingual = across_languages(question, candidates)
    focused = focus_excerpts(
        question, [(hit.chunk.text, hit.chunk.mode == "code") for hit in candidates],
        budget_chars=budget_chars or settings.RAG_ANSWER_CONTEXT_CHARS,
        embed=embed_multilingual if multilingual else embed,
        cross=None if multilingual else cross_encoder(), choose_with_cross=cross_focus,
    )  # fmt: skip
    timings["focus_ms"] = (time.perf_counter() - focus_started) * 1000
    shown = {hit.chunk.chunk_id for hit in hits}
    hits = hits + [hit for hit in candidates if hit.chunk.chunk_id not in shown]  # what the repair search added
    return Sources(hits=hits, excerpts=[candidates[f.position] for f in focused], focused=focused, missing=missing,
                   timings=timings, when=asked, multilingual=multilingual, viewer=viewer)  # fmt: skip


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
            changed = history.changed_lines(hit, sources.viewer)
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
