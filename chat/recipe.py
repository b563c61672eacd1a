"""One answer, as every door makes it (REST `answer` and its SSE, the OpenAI door, the staff chat, MCP `answer`):
the assistant named (or the door's own), its settings with the caller's scope, size and time, then the answer as one
JSON result or as a stream whose first step (admission, retrieval) is taken before a byte is sent, and its record.
A door only reads its input and writes its shape; the domain errors it may meet are mapped by core/transport.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent_sessions import reads
from agent_sessions.models import AgentSession
from chat import excerpts, prompting, records, services
from chat.models import AnswerRecord, Assistant, ChatMessage, ChatSession
from knowledge.search.retrieval import RetrieveFilters
from knowledge.shapes import MAX_QUERY_CHARS, with_when
from tenants.principals import AccessEnded, Viewer, still_admitted

MAX_QUESTION_CHARS = MAX_QUERY_CHARS  # every door's limit on a question or a query (one constant, knowledge.shapes)


class UnknownAssistant(ValueError):
    """The caller named an assistant this tenant does not have."""


def conversation(session: ChatSession | None, *, turns: int = 6) -> tuple[list[str], list[str]]:
    """A staff chat's earlier questions (its last `turns`) and its last answer, read as the OpenAI door reads a
    request's earlier messages: a follow-up ("what is it now?") is read in their context, and its answer does not
    repeat what was said (excerpts.in_context, services.answer_stream)."""
    if session is None:
        return [], []
    messages = list(session.messages.order_by("-created_at", "-pk")[: 2 * turns])[::-1]
    earlier = [m.text[:MAX_QUESTION_CHARS] for m in messages if m.role == ChatMessage.Role.USER and m.text.strip()]
    said = [m.text[: 10 * MAX_QUESTION_CHARS] for m in messages if m.role == ChatMessage.Role.ASSISTANT][-1:]
    return earlier, said


@dataclass
class Asked:
    """What a caller asked, whatever the door: the question, the assistant by name (None: `assistant` or the
    tenant's default), how many excerpts, which documents (`filters`), when (`as_of`, `include_expired`), and the
    conversation's earlier questions (a follow-up is read in their context)."""

    question: str
    assistant_name: str | None = None
    assistant: Assistant | None = None
    top_k: int | None = None
    filters: RetrieveFilters | None = None
    when: dict[str, Any] = field(default_factory=dict)
    earlier: Sequence[str] = ()
    said: Sequence[str] = ()  # what was answered before in the conversation (a follow-up's answer does not repeat it)
    tune: Callable[[excerpts.AnswerSettings], None] | None = None  # a door's own settings (the OpenAI door's)
    session: AgentSession | None = None  # an agent's session (agent_sessions/): hits it holds are not given again
    max_tokens: int | None = None  # a budget for the hits given back (not for the answer the model writes)


def answer_settings(*, viewer: Viewer, asked: Asked) -> excerpts.AnswerSettings:
    """The settings of this answer: the named assistant's (UnknownAssistant when there is none of that name), else
    the one given, with the caller's size, scope and time."""
    assistant = asked.assistant
    if asked.assistant_name:
        assistant = services.assistant_get(tenant=viewer.tenant, name=asked.assistant_name)
        if assistant is None:
            raise UnknownAssistant(f"No assistant named {asked.assistant_name!r} in this tenant.")
    options = excerpts.AnswerSettings.from_assistant(assistant, top_k=asked.top_k, filters=asked.filters)
    with_when(options.filters, asked.when)
    if asked.tune is not None:
        asked.tune(options)
    return options


@dataclass
class Answering:
    """One answer of one caller through one door (`channel`), recorded once it is given."""

    viewer: Viewer
    asked: Asked
    channel: str
    user: Any = None
    api_key: Any = None
    read: reads.Read | None = None  # in a session: what this answer gave and what the session already held
    # False for a door that gives the answer and its citations but no excerpt text (the OpenAI door): in a session,
    # the cited chunks are recorded (their changes are reported) without being held back from later reads.
    gives_text: bool = True

    def __post_init__(self) -> None:
        self.options = answer_settings(viewer=self.viewer, asked=self.asked)

    def json(self) -> tuple[services.Answer, AnswerRecord]:
        """The whole answer, and its record."""
        result = services.answer_question(viewer=self.viewer, question=self.asked.question, options=self.options,
                                          earlier=self.asked.earlier, said=self.asked.said)  # fmt: skip
        if self.asked.session is not None or self.asked.max_tokens:
            self._deliver(result.hits if self.gives_text else _cited_hits(result))
        return result, self.record(result)

    def stream(self) -> Iterator[Any]:
        """Sources → sentences → the Answer; its first step is taken now (a full queue, a restarting model, a
        retrieval problem raise here, before the response starts); the door records the Answer when it comes.
        In a session, the Sources it yields hold only the hits the session did not hold."""
        stream = services.stream_answer(viewer=self.viewer, question=self.asked.question, options=self.options,
                                        earlier=self.asked.earlier, said=self.asked.said)  # fmt: skip
        first = next(stream)
        if self.asked.session is None and not self.asked.max_tokens:
            return self._while_admitted(_chain(first, stream))
        if self.gives_text and isinstance(first, excerpts.Sources):
            first = replace(first, hits=self._deliver(first.hits))
        return self._while_admitted(self._in_session(_chain(first, stream)))

    def _while_admitted(self, items: Iterator[Any]) -> Iterator[Any]:
        """The stream, for as long as its requester may still read the tenant: someone deprovisioned (or a key
        revoked) while their answer is being written gets no further sentence, the model stops, and the door says
        so in-band (AccessEnded); nothing is recorded. Checked before each sentence (one indexed query; a sentence
        takes the model far longer)."""
        try:
            for n, item in enumerate(items):
                if n and not still_admitted(tenant=self.viewer.tenant, user=self.user, api_key=self.api_key):
                    raise AccessEnded("Your access to this workspace ended while this answer was being written.")
                yield item
        finally:
            getattr(items, "close", lambda: None)()

    def _in_session(self, items: Iterator[Any]) -> Iterator[Any]:
        """A door that gives no excerpt text records, when the answer comes, the hits its citations rest on."""
        try:
            for item in items:
                if isinstance(item, services.Answer) and not self.gives_text:
                    self._deliver(_cited_hits(item))
                yield item
        finally:
            getattr(items, "close", lambda: None)()

    def _deliver(self, hits: list[Any]) -> list[Any]:
        """Record in the session the hits this answer gives; the ones the session did not hold (that fit the
        budget)."""
        self.read = reads.answer_delivered(viewer=self.viewer, session=self.asked.session, hits=hits,
                                            whole=self.gives_text, max_tokens=self.asked.max_tokens)  # fmt: skip
        return self.read.hits

    def record(self, result: services.Answer) -> AnswerRecord:
        """The answer kept as it was given (question as read in its conversation, claims, hits, versions)."""
        return records.answer_record(viewer=self.viewer, question=result.question or self.asked.question,
                                     result=result, channel=self.channel, user=self.user, api_key=self.api_key,
                                     asked=self.settings_kept(), agent_session=self.asked.session)  # fmt: skip

    def settings_kept(self) -> dict[str, Any]:
        """How it was asked, as the receipt shows it: the assistant, its sampling, the scope and time asked about,
        and the version of the prompt's rules."""
        options, filters = self.options, self.options.filters
        assistant = self.asked.assistant_name or (self.asked.assistant.name if self.asked.assistant else "")
        when = {k: v.isoformat() for k, v in (("as_of", filters.as_of), ("in_force_at", filters.in_force_at)) if v}
        return {
            "assistant": assistant or None,
            "top_k": options.top_k,
            "temperature": options.temperature,
            "top_p": options.top_p,
            "max_tokens": options.max_tokens,
            "source_ids": filters.source_ids,
            "tags": filters.tags,
            "include_expired": filters.include_expired,
            **when,
            "prompt_version": prompting.RULES_VERSION,
            "follow_up_of": list(self.asked.earlier)[-1:],
        }


def _cited_hits(result: services.Answer) -> list[Any]:
    cited = {citation.get("chunk_id") for citation in result.citations}
    return [hit for hit in result.hits if hit.chunk.chunk_id in cited]


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    try:
        yield first
        yield from rest
    finally:
        getattr(rest, "close", lambda: None)()  # the client went away: stop generating now
