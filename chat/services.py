"""answer = retrieve → focus excerpts → grounded prompt → chat model → verified citations, streamed: each step a
module of its own (chat/excerpts.py, chat/prompting.py, chat/verdicts.py, chat/citations.py), put together here,
with the admission that keeps a process to its limit of pending answers and the record of an answer given."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from chat import computing, wording
from chat.citations import extractive_answer
from chat.excerpts import AnswerSettings, Sources, across_languages, context_budget, focused_prompt, in_context
from chat.models import Assistant, ChatMessage, ChatSession
from chat.prompting import build_grounded_history
from chat.rendering import rendering_for
from chat.verdicts import (
    WEAK_EVIDENCE_LOGIT,
    Sentence,
    SentenceChecker,
    answer_verifier,
    not_verified_text,
    unknown_identifiers_refusal,
    verified,
    weak_evidence,
)
from core.languages import answer_language
from core.problems import DomainError
from inference.llm import LLMGateway, ModelUnavailable, get_gateway
from knowledge.search.retrieval import RetrievedChunk
from tenants.models import Tenant
from tenants.principals import Viewer

logger = logging.getLogger(__name__)


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
    # A computed answer (chat/computing.py): the table, the query, its result; or, when computing was tried and
    # did not answer, {"status": "fell_back", "reason", "sql"}. None: the question was not computed.
    computed: dict[str, Any] | None = None


class AnswersBusy(DomainError):
    """More answers are pending in this process than RAG_ANSWER_MAX_PENDING: come back after `retry_after` s."""

    status, code = 503, "answers_busy"

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"The answer model is busy; retry in {retry_after} s.", retry_after=retry_after)


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
    *, viewer: Viewer, question: str, options: AnswerSettings, earlier: Sequence[str] = (), said: Sequence[str] = ()
) -> Iterator[Sources | Sentence | Answer]:
    """Yield the Sources as soon as retrieval is done, then each sentence of the model's as soon as it is checked,
    then the final Answer. The model's unchecked draft is never yielded. `earlier`: the questions asked before in
    this conversation, oldest first (a follow-up may be read with the one before it: `in_context`).

    Raises AnswersBusy at the first step when this process already has its limit of pending answers."""
    ADMISSION.enter()
    entered = time.perf_counter()
    try:
        yield from _stream_answer(viewer=viewer, question=question, options=options, earlier=earlier, said=said)
    finally:
        ADMISSION.leave(time.perf_counter() - entered)


def _stream_answer(
    *, viewer: Viewer, question: str, options: AnswerSettings, earlier: Sequence[str], said: Sequence[str]
) -> Iterator[Sources | Sentence | Answer]:
    started = time.perf_counter()
    elapsed = lambda: (time.perf_counter() - started) * 1000  # noqa: E731
    gateway: LLMGateway = get_gateway(options.model_paths)
    model = gateway.model()  # ModelUnavailable (restarting: 503 + Retry-After) before anything is sent
    budget = context_budget(model.prefill_rate if model is not None else None, waiting=ADMISSION.pending - 1)
    message = question
    question, sources = in_context(viewer=viewer, question=question, earlier=earlier, options=options,
                                   budget_chars=budget)  # fmt: skip
    follow_up = question != message  # read with the question before it: the model answers only the new one
    said = said if follow_up else ()
    asked = follow_up_prompt(message, question) if follow_up else question
    timings = {**sources.timings, "sources_ms": elapsed(), "context_chars": budget}
    yield sources
    if not sources.excerpts:
        text = wording.nothing_retrieved(answer_language(question))
        yield _unanswered(text, "no_evidence", "Retrieval found nothing.", sources, elapsed(), question=question)
        return
    fell_back: computing.Fallback | None = None
    if model is not None and not follow_up:
        outcome = yield from _computed(viewer, question, sources, model, elapsed, timings)
        if outcome is True:
            return
        fell_back = outcome if isinstance(outcome, computing.Fallback) else None
    if sources.missing:
        text = unknown_identifiers_refusal(question, sources.missing)
        yield _unanswered(text, "not_found", f"No document mentions {', '.join(sources.missing)}.", sources,
                          elapsed(), question=question)  # fmt: skip
        return
    if weak_evidence(sources):
        text = not_verified_text(answer_language(question), sources)
        reason = (f"The best excerpt sentence does not answer the question (cross-encoder logit "
                  f"{sources.strength:.1f} < {WEAK_EVIDENCE_LOGIT}).")  # fmt: skip
        yield _unanswered(text, "not_found", reason, sources, elapsed(), timings=timings, question=question)
        return
    if model is None:
        text, citations = extractive_answer(sources.excerpts, answer_language(question))
        yield _unanswered(text, "extractive", gateway.unavailable_reason(), sources, elapsed(), citations=citations,
                          question=question)  # fmt: skip
        return
    # Across languages, the model reads and writes in the evidence's language, where each sentence is checked; a
    # verified sentence is rendered in the asker's (chat/rendering.py).
    rendering = rendering_for(question, sources.excerpts, scope=str(viewer.tenant.pk))
    checked_question = rendering.question
    if rendering.across:  # a follow-up: the question read with the one before it, translated as one
        asked = checked_question
    multilingual = across_languages(checked_question, sources.excerpts) if rendering.across else sources.multilingual
    budget = model.n_ctx - options.max_tokens - 64
    prompt, evidence = focused_prompt(asked, sources, options, model.count_tokens, budget)
    timings["prompt_ms"] = elapsed()
    timings["prompt_tokens"] = model.count_tokens(prompt.messages[-1]["content"])  # after the cached system turn
    model.warm(prompt.messages[0]["content"])  # once per loaded model and system prefix
    timings["warm_ms"] = elapsed()
    checker = SentenceChecker(answer_verifier(checked_question, evidence, sources.when, multilingual), elapsed, said,
                              rendering)  # fmt: skip
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
    verdict = verified(question, checker.buffer, sources, evidence, verifier=checker.verifier, viewer=viewer,
                       said=said, rendering=rendering)  # fmt: skip
    timings["verify_ms"] = elapsed() - checked_at
    text, computed = verdict.text, None
    if fell_back is not None:
        note = fell_back_note(fell_back, answer_language(question))
        text, computed = f"{text}\n\n{note}", {"status": "fell_back", "reason": fell_back.reason, "sql": fell_back.sql}
    yield Answer(
        answer=text, generated=True, model=model.name, status=verdict.status, citations=verdict.citations,
        computed=computed,
        hits=sources.hits, reason=" ".join(part for part in (gateway.fallback_note(), verdict.reason) if part),
        ttft_ms=ttft, total_ms=elapsed(), claims=verdict.claims, evidence=verdict.evidence,
        timings={k: round(v, 1) for k, v in timings.items()}, question=question,
        prompt_tokens=sum(model.count_tokens(m["content"]) for m in prompt.messages), completion_tokens=written,
    )  # fmt: skip


def _computed(
    viewer: Viewer, question: str, sources: Sources, model: Any, elapsed: Any, timings: dict[str, float]
) -> Generator[Sentence | Answer, None, computing.Fallback | bool]:
    """The computed answer (its one sentence, then the Answer), when the question asks for a computation over a
    table of the retrieved versions: returns True once given, False when the question is not computed, a Fallback
    when computing did not answer."""
    if not computing.may_compute(question):  # most questions: no table is read at all
        return False
    choice, tables = computing.choose_table(question, sources.hits, viewer)
    if choice is None or not computing.asks_to_compute(question, tables):
        return False
    outcome = computing.computed_answer(question=question, choice=choice, model=model, clock=elapsed)
    if isinstance(outcome, computing.Fallback):
        logger.info("answer: computing did not answer (%s); answering from the excerpts", outcome.reason)
        return outcome
    logger.info("answer: computed over the table %r of %s by %s", choice.table.name,
                choice.table.document.display_key, outcome.sql)  # fmt: skip
    timings.update(outcome.timings)
    timings["first_verified_ms"] = elapsed()
    yield Sentence(claim=outcome.claim, shown=True, text=outcome.text)
    table = outcome.citation["table"]
    yield Answer(
        answer=outcome.text, generated=True, model=model.name, status="answered", citations=[outcome.citation],
        hits=sources.hits, reason=f"Computed by the query shown, over the table “{table['name']}”.",
        ttft_ms=timings.get("sql_ms"), total_ms=elapsed(), claims=[outcome.claim],
        timings={k: round(v, 1) for k, v in timings.items()}, question=question,
        prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
        computed={"status": "computed", **{k: table[k] for k in ("name", "sql", "result_columns", "result",
                                                                  "truncated", "rows_used", "rows_used_count")}},
    )  # fmt: skip
    return True


def fell_back_note(fell_back: computing.Fallback, language: str) -> str:
    return wording.computed_fell_back(language, fell_back.reason)


def follow_up_prompt(message: str, together: str) -> str:
    """The question the model is given for a follow-up: the new message, with the earlier question as its context
    only (answering both made the answer repeat the previous one)."""
    earlier = together[: len(together) - len(message)].strip()
    return f"{message} (This follows the earlier question “{earlier}”: answer only what the new question asks.)"


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


def answer_question(*, viewer: Viewer, question: str, options: AnswerSettings, earlier: Sequence[str] = (),
                    said: Sequence[str] = ()) -> Answer:  # fmt: skip
    result = None
    for item in stream_answer(viewer=viewer, question=question, options=options, earlier=earlier, said=said):
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
        ttft_ms=result.ttft_ms, total_ms=result.total_ms, record=record, evidence=result.evidence,
        first_verified_ms=result.timings.get("first_verified_ms"),
    )  # fmt: skip
