"""What an answer looks like to every door (REST, SSE, MCP, the chat page): one payload for the sources, one
for the answer, and the answer request the REST API and MCP both validate."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from chat import services
from knowledge.shapes import HitSerializer, ScopeSerializer


@extend_schema_serializer(component_name="AnswerInput")
class AnswerInput(serializers.Serializer):
    question = serializers.CharField(max_length=2000)
    top_k = serializers.IntegerField(min_value=1, max_value=50, required=False)
    scope = ScopeSerializer(required=False)
    assistant = serializers.CharField(max_length=60, required=False, allow_blank=True)
    stream = serializers.BooleanField(default=False)


def sources_payload(sources: services.Sources) -> dict[str, Any]:
    return {
        "hits": HitSerializer(sources.hits, many=True).data,
        "excerpts": [services.citation_of(n, hit) for n, hit in enumerate(sources.excerpts, 1)],
    }


def answer_payload(result: services.Answer) -> dict[str, Any]:
    return {
        "answer": result.answer,
        "generated": result.generated,
        "model": result.model,
        "status": result.status,
        "reason": result.reason,
        "citations": result.citations,
        "claims": result.claims,
        "hits": HitSerializer(result.hits, many=True).data,
        "ttft_ms": None if result.ttft_ms is None else round(result.ttft_ms, 1),
        "total_ms": round(result.total_ms, 1),
        "timings": result.timings,
    }
