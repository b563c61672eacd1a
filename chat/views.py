"""Staff chat (HTMX page + a streamed answer). The tenant comes from the URL slug and the user's membership."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.http import HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from chat import services
from chat.models import Assistant, ChatSession
from chat.streaming import chain, sse_response, stream_events
from inference.llm import ModelUnavailable
from inference.runtime import model_status
from tenants.access import TenantRequest, tenant_member_required
from tenants.models import TenantQuerySet


def _own_sessions(request: TenantRequest) -> TenantQuerySet[ChatSession]:
    return ChatSession.objects.for_tenant(request.tenant).filter(user=request.user)


@tenant_member_required
@require_GET
def chat_page(request: TenantRequest) -> HttpResponse:
    session = None
    if request.GET.get("session"):
        session = _own_sessions(request).public_or_404(request.GET["session"])
    context = {
        "tenant": request.tenant,
        "sessions": _own_sessions(request)[:30],
        "session": session,
        "chat_messages": session.messages.all() if session else [],
        "assistants": Assistant.objects.for_tenant(request.tenant),
        "chat_model": model_status(),  # starting, ready, restarting (after a crash), failed: staff see which
    }
    return render(request, "chat/chat_page.html", context)


@tenant_member_required
@require_GET
def chat_sessions(request: TenantRequest) -> HttpResponse:
    context = {"tenant": request.tenant, "sessions": _own_sessions(request)[:30]}
    return render(request, "chat/partials/_sessions.html", context)


@tenant_member_required
@require_POST
def chat_ask(request: TenantRequest) -> HttpResponse | StreamingHttpResponse:
    """Answer one question as Server-Sent Events; a fresh retrieval round every time (no history replay)."""
    question = (request.POST.get("question") or "").strip()
    if not question:
        return HttpResponseBadRequest("Type a question first.")
    if len(question) > 2000:
        return HttpResponseBadRequest("Questions are limited to 2,000 characters.")
    assistant = services.assistant_get(tenant=request.tenant, name=request.POST.get("assistant") or None)
    session_id = request.POST.get("session") or ""
    session = _own_sessions(request).public_or_404(session_id) if session_id else None
    options = services.AnswerSettings.from_assistant(assistant or (session.assistant if session else None))
    try:
        stream = _started(services.stream_answer(tenant=request.tenant, question=question, options=options))
    except (services.AnswersBusy, ModelUnavailable) as busy:
        response = HttpResponse(str(busy), status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(busy.retry_after)
        return response
    tenant, user = request.tenant, request.user

    def on_done(result: services.Answer) -> dict[str, Any]:
        nonlocal session
        if session is None:  # created only once there is an answer to keep: a failed stream leaves nothing behind
            session = ChatSession.objects.create(tenant=tenant, user=user, assistant=assistant)
        message = services.session_record(tenant=tenant, session=session, question=question, result=result)
        return {"session": str(session.public_id), "message": str(message.public_id)}

    return sse_response(stream_events(stream, on_done))


def _started(stream: Iterator[Any]) -> Iterator[Any]:
    """Take the stream's first step now (admission, then retrieval), so a full answer queue is a 503 before the
    response starts; any other failure of that step is reported in the stream, as later ones are."""
    try:
        first = next(stream)
    except (services.AnswersBusy, ModelUnavailable):
        raise
    except StopIteration:
        return iter(())
    except Exception as exc:  # stream_events logs it and reports it in-band
        failure = exc

        def failed() -> Iterator[Any]:
            raise failure
            yield  # a generator

        return failed()
    return chain(first, stream)
