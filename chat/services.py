"""answer = retrieve → build_grounded_history → chat model → citations. Each step is its own function."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from chat.llm import LLMGateway, configured_paths, get_gateway
from chat.models import Assistant, ChatMessage, ChatSession
from chat.prompting import GroundedPrompt, build_grounded_history
from knowledge.retrieval import RetrievedChunk, RetrieveFilters, retrieve
from tenants.models import Tenant

logger = logging.getLogger(__name__)

MARKER_RE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
EXTRACTIVE_EXCERPT_CHARS = 400


@dataclass
class AnswerSettings:
    top_k: int = 6
    temperature: float = 0.2
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
        scope = filters or RetrieveFilters(source_ids=assistant.source_ids or None, tags=assistant.tags or None)
        chosen = assistant.model.path if assistant.model_id else assistant.model_path
        paths = [chosen, *configured_paths()] if chosen else None  # the default chain stays as fallback
        return cls(
            top_k=top_k or assistant.top_k, temperature=assistant.temperature, top_p=assistant.top_p,
            max_tokens=assistant.max_tokens, persona=assistant.persona, model_paths=paths, filters=scope,
        )  # fmt: skip


@dataclass
class Answer:
    answer: str
    generated: bool
    model: str
    status: str  # answered | no_evidence | extractive
    citations: list[dict[str, Any]]
    hits: list[RetrievedChunk]
    reason: str = ""
    ttft_ms: float | None = None
    total_ms: float = 0.0


def evidence(hits: list[RetrievedChunk]) -> list[RetrievedChunk]:
    """Hits that can support an answer: semantically close, or matched literally near the top."""
    minimum = settings.RAG_ANSWER_MIN_SIMILARITY
    return [
        hit
        for hit in hits
        if (hit.similarity is not None and hit.similarity >= minimum)
        or (hit.lexical_rank is not None and hit.lexical_rank <= 3)
    ]


def cite(answer: str, excerpts: list[RetrievedChunk]) -> tuple[str, list[dict[str, Any]]]:
    """Keep the [n] markers that point at an excerpt (removing the others) and map them to chunks."""
    used: list[int] = []

    def replace(match: re.Match) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        valid = [n for n in numbers if 1 <= n <= len(excerpts)]
        for n in valid:
            if n not in used:
                used.append(n)
        return "".join(f"[{n}]" for n in valid)

    cleaned = re.sub(r"[ \t]+([.,;:])", r"\1", MARKER_RE.sub(replace, answer)).strip()
    citations = []
    for n in sorted(used):
        chunk = excerpts[n - 1].chunk
        citations.append(
            {
                "n": n,
                "chunk_id": chunk.chunk_id,
                "document_id": chunk.document.document_id,
                "document_key": chunk.document.display_key,
                "title": chunk.document.title,
                "line_start": chunk.line_start,
                "line_end": chunk.line_end,
                "page": chunk.page,
            }  # fmt: skip
        )
    return cleaned, citations


def extractive_answer(excerpts: list[RetrievedChunk], reason: str) -> tuple[str, list[dict[str, Any]]]:
    if not excerpts:
        return "The knowledge base has nothing on this question.", []
    lines = ["No language model is available, so here are the most relevant excerpts:"]
    for n, hit in enumerate(excerpts[:3], 1):
        text = " ".join(hit.chunk.text.split())
        if len(text) > EXTRACTIVE_EXCERPT_CHARS:
            text = text[: EXTRACTIVE_EXCERPT_CHARS - 1].rsplit(" ", 1)[0] + "…"
        lines.append(f"[{n}] {text}")
    return cite("\n\n".join(lines), excerpts)


def prepare(
    *, tenant: Tenant, question: str, options: AnswerSettings
) -> tuple[list[RetrievedChunk], list[RetrievedChunk]]:
    hits = retrieve(tenant=tenant, query=question, top_k=options.top_k, filters=options.filters)
    return hits, evidence(hits)


def stream_answer(*, tenant: Tenant, question: str, options: AnswerSettings) -> Iterator[str | Answer]:
    """Yield token deltas as they come, then the final Answer."""
    started = time.perf_counter()
    hits, excerpts = prepare(tenant=tenant, question=question, options=options)
    gateway: LLMGateway = get_gateway(options.model_paths)
    model = gateway.model()
    if model is None:
        reason = gateway.unavailable_reason()
        text, citations = extractive_answer(excerpts, reason)
        yield text
        yield Answer(text, False, "", "extractive" if excerpts else "no_evidence", citations, hits, reason,
                     None, (time.perf_counter() - started) * 1000)  # fmt: skip
        return
    budget = model.n_ctx - options.max_tokens - 64
    prompt: GroundedPrompt = build_grounded_history(
        question, excerpts, persona=options.persona, max_prompt_tokens=budget, count_tokens=model.count_tokens
    )
    pieces: list[str] = []
    ttft: float | None = None
    for delta in model.stream(prompt.messages, max_tokens=options.max_tokens, temperature=options.temperature,
                              top_p=options.top_p):  # fmt: skip
        if ttft is None:
            ttft = (time.perf_counter() - started) * 1000
            logger.info("answer: first token after %.0f ms (model %s)", ttft, model.name)
        pieces.append(delta)
        yield delta
    text, citations = cite("".join(pieces), prompt.excerpts)
    status = "answered" if prompt.excerpts else "no_evidence"
    if not prompt.excerpts:
        citations = []
    yield Answer(text, True, model.name, status, citations, hits, "", ttft, (time.perf_counter() - started) * 1000)


def answer_question(*, tenant: Tenant, question: str, options: AnswerSettings) -> Answer:
    result = None
    for item in stream_answer(tenant=tenant, question=question, options=options):
        if isinstance(item, Answer):
            result = item
    assert result is not None
    return result


def assistant_get(*, tenant: Tenant, name: str | None) -> Assistant | None:
    if not name:
        return None
    return Assistant.objects.for_tenant(tenant).filter(name=name).first()


def session_record(*, tenant: Tenant, session: ChatSession, question: str, result: Answer) -> ChatMessage:
    """Save the user's original words and the answer (never the enriched prompt)."""
    ChatMessage.objects.create(tenant=tenant, session=session, role=ChatMessage.Role.USER, text=question)
    if not session.title:
        session.title = question[:200]
    session.save()
    return ChatMessage.objects.create(
        tenant=tenant, session=session, role=ChatMessage.Role.ASSISTANT, text=result.answer, model=result.model,
        generated=result.generated, status=result.status, citations=result.citations, ttft_ms=result.ttft_ms,
        total_ms=result.total_ms,
    )  # fmt: skip
