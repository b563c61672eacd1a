"""An OpenAI-compatible door: ragsite as a "model" for any chat client that speaks OpenAI's chat-completions API.

    GET  /v1/models                  one model per assistant of the key's tenant: `<tenant>`, `<tenant>/<assistant>`
    GET  /v1/models/<id>             one of them
    POST /v1/chat/completions        the grounded, verified answer (JSON, or `chat.completion.chunk` events)

Auth is the tenant's API key, as `Authorization: Bearer <key>` (what every OpenAI client sends) or `Api-Key <key>`;
the key's scope and the principals it acts for apply as on every other door, and the per-key rate limit too.
Errors come in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so the SDKs raise their usual
exceptions. docs/openai.md lists what is honoured and what is accepted and ignored.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_sessions import services as sessions
from agent_sessions.models import AgentSession
from chat import citations, excerpts, recipe, services, verdicts
from chat.models import AnswerRecord, Assistant
from chat.streaming import EventStreamRenderer, sse_response, stream_failure
from core import transport
from core.parsers import SafeJSONParser
from knowledge.shapes import plain_errors
from tenants.authentication import OpenAIKeyAuthentication
from tenants.models import ApiKey, Tenant
from tenants.principals import Viewer, viewer_for

MAX_QUESTION_CHARS = recipe.MAX_QUESTION_CHARS
SESSION_HEADER = "X-Ragsite-Session"
SESSION_USER_PREFIX = "session:"
# What each status is called in OpenAI's error shape (the SDKs read the status; clients show type and message).
ERROR_KINDS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "insufficient_permissions"),
    404: ("invalid_request_error", "model_not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    409: ("server_error", "index_needs_rebuild"),
    410: ("invalid_request_error", "session_expired"),
    415: ("invalid_request_error", "unsupported_media_type"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "model_unavailable"),
}


class ModelNotFound(exceptions.NotFound):
    def __init__(self, model: str) -> None:
        super().__init__(f"The model '{model}' does not exist or you do not have access to it.")


def model_ids(tenant: Tenant) -> list[str]:
    """The tenant's default assistant, then one model per named assistant."""
    names = Assistant.objects.for_tenant(tenant).order_by("name").values_list("name", flat=True)
    return [tenant.slug, *(f"{tenant.slug}/{name}" for name in names)]


def model_assistant(tenant: Tenant, model: str) -> Assistant | None:
    """The assistant a model id names (None: the tenant's default); another tenant's or an unknown id is a 404."""
    slug, _, name = model.strip().partition("/")
    if slug != tenant.slug:
        raise ModelNotFound(model)
    if not name:
        return None
    assistant = services.assistant_get(tenant=tenant, name=name)
    if assistant is None:
        raise ModelNotFound(model)
    return assistant


def model_object(model_id: str, tenant: Tenant) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": int(tenant.created_at.timestamp()), "owned_by": tenant.slug}


def message_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts (images and audio are not read)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"] for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        )  # fmt: skip
    return ""


class ChatCompletionInput(serializers.Serializer):
    class Message(serializers.Serializer):
        role = serializers.ChoiceField(choices=["system", "developer", "user", "assistant", "tool", "function"])
        content = serializers.JSONField(required=False, allow_null=True)

    model = serializers.CharField(max_length=200)
    messages = Message(many=True, allow_empty=False, max_length=200)  # type: ignore[call-arg]  # DRF >= 3.15
    stream = serializers.BooleanField(default=False)
    temperature = serializers.FloatField(min_value=0.0, max_value=2.0, required=False, allow_null=True)
    top_p = serializers.FloatField(min_value=0.0, max_value=1.0, required=False, allow_null=True)
    max_tokens = serializers.IntegerField(min_value=1, max_value=4096, required=False, allow_null=True)
    max_completion_tokens = serializers.IntegerField(min_value=1, max_value=4096, required=False, allow_null=True)
    n = serializers.IntegerField(min_value=1, max_value=1, required=False, allow_null=True)
    # OpenAI's end-user id; `session:<id>` names an agent session (docs/sessions.md), as the X-Ragsite-Session header
    user = serializers.CharField(max_length=256, required=False, allow_blank=True, allow_null=True)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        asked = [message_text(m.get("content")).strip() for m in data["messages"] if m["role"] == "user"]
        asked = [text for text in asked if text]
        if not asked:
            raise serializers.ValidationError({"messages": ["No user message with text: nothing to answer."]})
        if len(asked[-1]) > MAX_QUESTION_CHARS:
            raise serializers.ValidationError(
                {"messages": [f"The last user message is longer than {MAX_QUESTION_CHARS} characters."]}
            )
        # Earlier turns only condition a follow-up's retrieval: a long pasted one counts by its first characters.
        data["question"], data["earlier"] = asked[-1], [text[:MAX_QUESTION_CHARS] for text in asked[:-1]]
        # What the assistant answered before the last question (a follow-up's answer does not say it again).
        last_user = max(i for i, m in enumerate(data["messages"]) if m["role"] == "user")
        data["said"] = [message_text(m.get("content"))[:10 * MAX_QUESTION_CHARS] for m in data["messages"][:last_user]
                        if m["role"] == "assistant"][-1:]  # fmt: skip
        return data


class OpenAIApiView(APIView):
    """Keys only (Bearer or Api-Key); the request's tenant and viewer come from the key."""

    authentication_classes = [OpenAIKeyAuthentication]
    permission_classes: list[Any] = []
    parser_classes = [SafeJSONParser]
    renderer_classes = [JSONRenderer]
    door_role = "read key"  # any key of the tenant: answering reads (tests/test_openai.py proves the rest)
    key: ApiKey
    tenant: Tenant
    viewer: Viewer

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication, then the per-key rate limit
        if not isinstance(request.auth, ApiKey):
            raise exceptions.NotAuthenticated("Send the tenant's API key as 'Authorization: Bearer <key>'.")
        self.key, self.tenant = request.auth, request.auth.tenant
        self.viewer = viewer_for(tenant=self.tenant, api_key=self.key)

    def get_throttles(self) -> list[Any]:
        # The rate limit counts per key; an unauthenticated request is refused (401) before it is counted.
        return super().get_throttles() if isinstance(getattr(self.request, "auth", None), ApiKey) else []

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            exc = exceptions.AuthenticationFailed(
                "Incorrect API key provided." if isinstance(exc, exceptions.AuthenticationFailed) else str(exc.detail)
            )
        response = super().handle_exception(exc)  # 401 with WWW-Authenticate: Bearer; Retry-After on 429 and 503
        response.data = error_body(response.status_code, response.data)
        if isinstance(exc.__cause__, sessions.SessionNotFound):  # the session the conversation names, not the model
            response.data["error"].update(code="session_not_found", param="session")
        return response


def error_body(status_code: int, data: Any) -> dict[str, Any]:
    """DRF's error data in OpenAI's shape; a validation error names its first field as `param`."""
    kind, code = ERROR_KINDS.get(status_code, ("server_error" if status_code >= 500 else "invalid_request_error", None))
    detail = isinstance(data, dict) and "detail" in data
    param = next(iter(data)) if isinstance(data, dict) and data and not detail else None
    message = str(data["detail"]) if detail else plain_errors(data) or "Invalid request."
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class ModelsApi(OpenAIApiView):
    @extend_schema(operation_id="openai_models_list", responses={200: dict})
    def get(self, request: Request) -> Response:
        return Response({"object": "list", "data": [model_object(m, self.tenant) for m in model_ids(self.tenant)]})


class ModelApi(OpenAIApiView):
    @extend_schema(operation_id="openai_model_retrieve", responses={200: dict})
    def get(self, request: Request, model: str) -> Response:
        model_assistant(self.tenant, model)
        return Response(model_object(model.strip(), self.tenant))


class ChatCompletionsApi(OpenAIApiView):
    """The last user message is the question; the earlier ones may condition its retrieval (excerpts.in_context)."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(operation_id="openai_chat_completions", request=ChatCompletionInput, responses={200: dict})
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        incoming = ChatCompletionInput(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        model = data["model"].strip()

        def tune(options: excerpts.AnswerSettings) -> None:  # the sampling a client asks for
            if data.get("temperature") is not None:
                options.temperature = data["temperature"]
            if data.get("top_p") is not None:
                options.top_p = data["top_p"]
            limit = data.get("max_completion_tokens") or data.get("max_tokens")
            if limit:
                options.max_tokens = limit

        asked = recipe.Asked(question=data["question"], assistant=model_assistant(self.tenant, model),
                             earlier=data["earlier"], said=data["said"], tune=tune,
                             session=self._session(request, data.get("user") or ""))  # fmt: skip
        # The client gets the answer and its citations, not the excerpts' text (gives_text).
        self.answering = recipe.Answering(viewer=self.viewer, asked=asked, channel=AnswerRecord.Channel.OPENAI,
                                          api_key=self.key, gives_text=False)  # fmt: skip
        completion_id, created = f"chatcmpl-{int(time.time() * 1000):x}", int(time.time())
        if data["stream"]:
            stream = transport.guarded(self.answering.stream)  # a full queue, a restarting model: before streaming
            chunks = Chunks(completion_id, created, model)
            return sse_response(self._events(chunks, stream, data["question"]))
        result, record = transport.guarded(self.answering.json)
        return Response({
            "id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer}, "logprobs": None,
                         "finish_reason": "stop"}],
            "usage": usage(result),
            **extras(result, record),
            **self._session_extras(),
        })  # fmt: skip

    def _session_extras(self) -> dict[str, Any]:
        read = self.answering.read
        if read is None or read.session is None:
            return {}
        return {"session": str(read.session.public_id), "memory_changes": read.memory_changes}

    def _session(self, request: Request, user: str) -> AgentSession | None:
        """The agent session the conversation names: the X-Ragsite-Session header, else `user` as `session:<id>`."""
        named = request.headers.get(SESSION_HEADER, "").strip()
        if not named and user.startswith(SESSION_USER_PREFIX):
            named = user.removeprefix(SESSION_USER_PREFIX).strip()
        if not named:
            return None
        try:
            public_id = uuid.UUID(named)
        except ValueError:
            raise serializers.ValidationError({"session": [f"{named[:60]!r} is not a session id."]}) from None
        return transport.guarded(sessions.session_get, tenant=self.tenant, public_id=public_id, api_key=self.key)

    def _events(self, chunks: Chunks, stream: Iterator[Any], question: str) -> Iterator[str]:
        """The verified sentences as content deltas (a sentence that failed its check is never sent), then what
        the final answer adds (a refusal, the freshness note), then the final chunk with its extras and usage."""
        sent = ""
        try:
            for item in stream:
                if isinstance(item, excerpts.Sources):
                    read = [citations.citation_of(n, hit) for n, hit in enumerate(item.excerpts, 1)]
                    yield chunks.event({"role": "assistant", "content": ""}, citations=read)
                elif isinstance(item, verdicts.Sentence) and item.shown:
                    piece = f"{' ' if sent else ''}{item.text}"
                    sent += piece
                    yield chunks.event({"content": piece})
                elif isinstance(item, services.Answer):
                    rest = remainder(sent, item.answer)
                    if rest:
                        yield chunks.event({"content": rest})
                    record = self._record(question, item)
                    yield chunks.event({}, finish_reason="stop", usage=usage(item), **extras(item, record),
                                       **self._session_extras())  # fmt: skip
        except Exception as exc:  # the stream has started: say so in-band, as OpenAI's servers do
            failure = stream_failure(exc)
            error = {"message": failure.pop("detail"), "type": "server_error", "param": None, "code": None, **failure}
            yield f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n"
        finally:
            getattr(stream, "close", lambda: None)()
        yield "data: [DONE]\n\n"

    def _record(self, question: str, result: services.Answer) -> AnswerRecord:
        return self.answering.record(result)


class Chunks:
    """`chat.completion.chunk` events of one completion."""

    def __init__(self, completion_id: str, created: int, model: str) -> None:
        self.head = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model}

    def event(self, delta: dict[str, Any], *, finish_reason: str | None = None, **extra: Any) -> str:
        body = {**self.head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                          "finish_reason": finish_reason}], **extra}  # fmt: skip
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def remainder(sent: str, answer: str) -> str:
    """What the final answer text adds to what was streamed: all of it when nothing was (a refusal, the passages
    that may hold the answer); the verbatim evidence lines and the freshness note otherwise."""
    if not sent:
        return answer
    added = [line for line in answer.split("\n") if line.strip() and line.strip() not in sent]
    return "\n\n" + "\n".join(added) if added else ""


def usage(result: services.Answer) -> dict[str, int]:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens}  # fmt: skip


def extras(result: services.Answer, record: AnswerRecord) -> dict[str, Any]:
    """ragsite's own fields beside OpenAI's: a client that knows them renders sources and can send a verdict."""
    return {"citations": result.citations, "status": result.status, "claims": result.claims,
            "evidence": result.evidence, "answer_id": str(record.public_id)}  # fmt: skip
