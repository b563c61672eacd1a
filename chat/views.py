"""Staff chat (HTMX page + a streamed answer). The tenant comes from the URL slug and the user's membership."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.http import HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chat import recall, recipe, records, services
from chat.models import AnswerRecord, Assistant, ChatMessage, ChatSession, Verdict
from chat.streaming import sse_response, stream_events
from core import transport
from core.problems import DomainError
from inference.runtime import model_status
from knowledge import selectors
from tenants.access import TenantRequest, tenant_member_required
from tenants.models import TenantQuerySet


def _own_sessions(request: TenantRequest) -> TenantQuerySet[ChatSession]:
    return ChatSession.objects.for_tenant(request.tenant).filter(user=request.user)


def _own_answers(request: TenantRequest) -> TenantQuerySet[AnswerRecord]:
    """Staff judge the answers they were given; the tenant's admins may judge any of its answers."""
    answers = AnswerRecord.objects.for_tenant(request.tenant)
    return answers if request.membership.is_admin else answers.filter(user=request.user)


@tenant_member_required
@require_GET
def chat_page(request: TenantRequest) -> HttpResponse:
    session = None
    if request.GET.get("session"):
        session = _own_sessions(request).public_or_404(request.GET["session"])
    chat_messages = list(session.messages.select_related("record")) if session else []
    for message in chat_messages:  # a document hidden since the answer was given is "not available to you"
        message.text, message.citations, message.claims = records.masked_for(
            request.viewer, text=message.text, citations=message.citations, claims=message.claims
        )
        if message.role == ChatMessage.Role.ASSISTANT:
            message.payload = reopened_payload(request, message)  # type: ignore[attr-defined]  # for the page
            message.dom_id = f"answer-{message.public_id}"  # type: ignore[attr-defined]
    context = {
        "tenant": request.tenant,
        "sessions": _own_sessions(request)[:30],
        "session": session,
        "chat_messages": chat_messages,
        "assistants": Assistant.objects.for_tenant(request.tenant),
        "chat_model": model_status(),  # starting, ready, restarting (after a crash), failed: staff see which
        "recalled": recall.unseen_count(tenant=request.tenant, user=request.user),
        "ask_again": (request.GET.get("ask") or "")[: recipe.MAX_QUESTION_CHARS],  # "ask again": asked on load
    }
    return render(request, "chat/chat_page.html", context)


def reopened_payload(request: TenantRequest, message: ChatMessage) -> dict[str, Any]:
    """A kept answer as the page's script draws a live one (static/js/chat.js renderAnswer): its text, sentences,
    passages, status, the time to its first verified sentence, and each citation with the text it cited (that
    version's, as the viewer may read it now: a citation hidden since has none)."""
    cited = [(str(c.get("chunk_id") or ""), c.get("version")) for c in message.citations if not c.get("hidden")]
    texts = selectors.cited_texts(viewer=request.viewer, cited=cited)
    citations = [{**c, "text": c.get("text") or texts.get((str(c.get("chunk_id") or ""), c.get("version")), "")}
                 for c in message.citations]  # fmt: skip
    timings = {"first_verified_ms": message.first_verified_ms} if message.first_verified_ms else {}
    admin = request.membership.is_admin
    return {"answer": message.text, "status": message.status or "answered", "claims": message.claims,
            "citations": citations, "evidence": message.evidence, "hits": [], "timings": timings,
            "model": message.model if admin else "", "generated": message.generated}  # fmt: skip


@tenant_member_required
@require_GET
def chat_sessions(request: TenantRequest) -> HttpResponse:
    context = {"tenant": request.tenant, "sessions": _own_sessions(request)[:30]}
    return render(request, "chat/partials/_sessions.html", context)


@tenant_member_required
@require_POST
def chat_ask(request: TenantRequest) -> HttpResponse | StreamingHttpResponse:
    """Answer one question as Server-Sent Events; in a conversation (`session`), a message that refers back to it is
    read with the question before it, as the OpenAI door reads one (recipe.conversation)."""
    question = (request.POST.get("question") or "").strip()
    if not question:
        return HttpResponseBadRequest("Type a question first.")
    if len(question) > recipe.MAX_QUESTION_CHARS:
        return HttpResponseBadRequest(f"Questions are limited to {recipe.MAX_QUESTION_CHARS:,} characters.")
    assistant = services.assistant_get(tenant=request.tenant, name=request.POST.get("assistant") or None)
    session_id = request.POST.get("session") or ""
    session = _own_sessions(request).public_or_404(session_id) if session_id else None
    earlier, said = recipe.conversation(session)  # a follow-up is read in the conversation's context
    asked = recipe.Asked(question=question, assistant=assistant or (session.assistant if session else None),
                         earlier=earlier, said=said)  # fmt: skip
    answering = recipe.Answering(viewer=request.viewer, asked=asked, channel="chat", user=request.user)
    stream, problem = transport.attempt(_started, answering.stream)
    if problem is not None or stream is None:
        return transport.plain_response(problem)  # type: ignore[arg-type]
    tenant, user = request.tenant, request.user

    def on_done(result: services.Answer) -> dict[str, Any]:
        nonlocal session
        if session is None:  # created only once there is an answer to keep: a failed stream leaves nothing behind
            session = ChatSession.objects.create(tenant=tenant, user=user, assistant=assistant)
        record = answering.record(result)
        message = services.session_record(tenant=tenant, session=session, question=question, result=result,
                                          record=record)  # fmt: skip
        return {
            "session": str(session.public_id),
            "message": str(message.public_id),
            "answer_id": str(record.public_id),
        }

    return sse_response(stream_events(stream, on_done))


def _started(start: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """Take the stream's first step now (admission, then retrieval: `start`), so a full answer queue is a 503 before
    the response starts; any other failure of that step is reported in the stream, as later ones are."""
    try:
        return start()
    except StopIteration:
        return iter(())
    except Exception as exc:  # stream_events logs it and reports it in-band
        if isinstance(exc, DomainError) and exc.retry_after is not None:
            raise  # a full answer queue, a restarting model: the door answers it (503) before the stream starts
        failure = exc

        def failed() -> Iterator[Any]:
            raise failure
            yield  # a generator

        return failed()


@tenant_member_required
@require_http_methods(["GET", "POST"])
def answer_verdict(request: TenantRequest, answer_id: str) -> HttpResponse:
    """👍 / 👎 on one answer (or some of its claims), with a reason, the right answer or the document that holds
    it. A thumbs-down goes to the tenant admins' curation queue. GET: the form (or what this user already said)."""
    record = _own_answers(request).public_or_404(answer_id)
    record.answer, record.citations, record.claims = records.masked_for(
        request.viewer, text=record.answer, citations=record.citations, claims=record.claims
    )
    context: dict[str, Any] = {"tenant": request.tenant, "record": record, "reasons": Verdict.Reason.choices}
    status = 200
    if request.method == "POST" and not record.verdicts.filter(user=request.user).exists():  # once a person
        claims = [int(n) for n in request.POST.getlist("claims") if n.isdigit()]
        given = records.VerdictGiven(
            helpful=request.POST.get("helpful") == "1", reason=request.POST.get("reason", ""), claims=claims,
            correct_answer=request.POST.get("correct_answer", ""), document_id=request.POST.get("document_id", ""),
        )  # fmt: skip
        try:
            records.verdict_record(viewer=request.viewer, record=record, given=given, channel="chat", user=request.user)
        except records.VerdictInvalid as invalid:
            context["errors"], context["given"], status = invalid.errors, given, 400
    context["mine"] = record.verdicts.filter(user=request.user).first()
    if context["mine"] is None:
        context["documents"] = records.verdict_documents(record, request.viewer)
    return render(request, "chat/partials/_verdict.html", context, status=status)
