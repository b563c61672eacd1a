"""What an answer looks like to every door (REST, SSE, MCP, the chat page): one payload for the sources, one
for the answer, and the answer request the REST API and MCP both validate."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from agent_sessions.shapes import held_payload
from chat import citations, excerpts, services, verdicts
from chat.models import Verdict
from chat.recipe import MAX_QUESTION_CHARS
from knowledge.shapes import HitSerializer, ScopeSerializer, WhenInput, token_budget


@extend_schema_serializer(component_name="AnswerInput")
class AnswerInput(WhenInput):
    question = serializers.CharField(max_length=MAX_QUESTION_CHARS)
    top_k = serializers.IntegerField(min_value=1, max_value=50, required=False)
    scope = ScopeSerializer(required=False)
    assistant = serializers.CharField(max_length=60, required=False, allow_blank=True)
    stream = serializers.BooleanField(default=False)
    session = serializers.UUIDField(required=False, help_text="An agent session (sessions/): only new hits come back.")
    max_tokens = token_budget("A budget for the hits given back (not the answer): those that fit, in rank "
                              "order; the rest in left_out.")  # fmt: skip


@extend_schema_serializer(component_name="VerdictInput")
class VerdictInput(serializers.Serializer):
    helpful = serializers.BooleanField()
    reason = serializers.ChoiceField(choices=Verdict.Reason.choices, required=False, allow_blank=True)
    claims = serializers.ListField(child=serializers.IntegerField(min_value=0), required=False, max_length=200)
    correct_answer = serializers.CharField(max_length=2000, required=False, allow_blank=True)
    document_id = serializers.CharField(
        max_length=2000, required=False, allow_blank=True,
        help_text="The document that holds the right answer (a document_id).",
    )  # fmt: skip


def sources_payload(sources: excerpts.Sources) -> dict[str, Any]:
    return {
        "hits": HitSerializer(sources.hits, many=True).data,
        "excerpts": [citations.citation_of(n, hit) for n, hit in enumerate(sources.excerpts, 1)],
    }


def sentence_payload(sentence: verdicts.Sentence) -> dict[str, Any]:
    """A checked sentence: shown (its text with verified markers, its claim with quotes) or left out, and why."""
    return {"shown": sentence.shown, "text": sentence.text if sentence.shown else "", "claim": sentence.claim,
            "reason": sentence.reason}  # fmt: skip


def session_fields(read: Any) -> dict[str, Any]:
    """An answer in a session or with a budget (agent_sessions.reads.Read): only the hits it gives back, and the ones
    the session held or the budget left out."""
    if read is None:
        return {}
    fields: dict[str, Any] = {"hits": HitSerializer(read.hits, many=True).data, "tokens": read.tokens}
    if read.session is not None:
        fields.update(session=str(read.session.public_id), already_delivered=held_payload(read),
                      memory_changes=read.memory_changes)  # fmt: skip
    if read.left_out:
        fields["left_out"] = read.left_out
    return fields


def answer_payload(result: services.Answer, *, answer_id: Any = None, read: Any = None) -> dict[str, Any]:
    """`answer_id` names the recorded answer (chat.records), for a verdict on it; `read`: what a session was given."""
    return {
        "answer_id": str(answer_id) if answer_id else None,
        "answer": result.answer,
        "generated": result.generated,
        "model": result.model,
        "status": result.status,
        "reason": result.reason,
        "citations": result.citations,
        "claims": result.claims,
        "evidence": result.evidence,
        # A computed answer: the table, the query run, its result and the rows it stands on ({"status": "computed",
        # …}); {"status": "fell_back", "reason", "sql"} when computing was tried and the answer is from the excerpts.
        "computed": result.computed,
        "hits": HitSerializer(result.hits, many=True).data,
        "ttft_ms": None if result.ttft_ms is None else round(result.ttft_ms, 1),
        "total_ms": round(result.total_ms, 1),
        "timings": result.timings,
        **session_fields(read),
    }


def verdict_payload(verdict: Verdict) -> dict[str, Any]:
    return {
        "verdict_id": str(verdict.public_id),
        "answer_id": str(verdict.answer.public_id),
        "helpful": verdict.helpful,
        "reason": verdict.reason,
        "claims": verdict.claims,
        "correct_answer": verdict.correct_answer,
        "document_id": verdict.document.document_id if verdict.document is not None else None,
        "queued_for_curation": not verdict.helpful,
        "created_at": verdict.created_at.isoformat(),
    }
