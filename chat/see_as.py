"""See as: a tenant admin picks a member, a group or an API key and sees what it would get, exactly as its own
requests get it — the documents it may read (the REST `documents/` list), a search (the REST `retrieve/` door, with
that door's defaults) and an answer (the staff chat's recipe and default assistant). Read-only: nothing is recorded
as the person's (no answer record, no session), and every look is audited (the tenant's log and the audit stream).
Who `who` is resolves in tenants.principals.viewer_of, the same resolution every request uses."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agent_sessions.shapes import retrieve_asked
from chat import recipe, services
from core import transport
from core.audit import audit
from knowledge import selectors
from knowledge.shapes import RetrieveInput
from tenants.access import TenantRequest, tenant_member_required
from tenants.models import ApiKey, Group, Membership, MembershipEvent
from tenants.principals import UnknownPrincipal, Viewer, viewer_of

DOCUMENTS_SHOWN = 200


def choices(request: TenantRequest) -> dict[str, list[tuple[str, str]]]:
    tenant = request.tenant
    members = Membership.objects.for_tenant(tenant).select_related("user").order_by("user__username")
    return {
        "members": [(f"user:{m.user.get_username()}", f"{m.user.get_username()} ({m.role})") for m in members],
        "groups": [(f"group:{g.name}", g.name) for g in Group.objects.for_tenant(tenant)],
        "keys": [(f"key:{k.prefix}", f"{k.prefix}… {k.name} ({', '.join(k.acts_for or ['tenant'])})")
                 for k in ApiKey.objects.for_tenant(tenant).filter(revoked_at__isnull=True)],
    }  # fmt: skip


def seen(viewer: Viewer, question: str, *, answer: bool) -> dict[str, Any]:
    """What `viewer` gets: its documents, and for a question its hits (as `retrieve/` gives them) and its answer."""
    documents = selectors.document_list(viewer=viewer)
    out: dict[str, Any] = {"documents": list(documents[:DOCUMENTS_SHOWN]), "document_count": documents.count()}
    if question:
        incoming = RetrieveInput(data={"query": question})
        incoming.is_valid(raise_exception=True)
        out["hits"] = retrieve_asked(viewer, None, dict(incoming.validated_data)).hits
        if answer:
            assistant = services.assistant_get(tenant=viewer.tenant, name=None)  # the staff chat's default
            options = recipe.answer_settings(viewer=viewer, asked=recipe.Asked(question=question, assistant=assistant))
            out["answer"] = services.answer_question(viewer=viewer, question=question, options=options)
    return out


@tenant_member_required(admin=True)
@require_GET
def see_as(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    who = (request.GET.get("as") or "").strip()
    question = (request.GET.get("q") or "").strip()[: recipe.MAX_QUESTION_CHARS]
    context: dict[str, Any] = {"tenant": tenant, "who": who, "question": question, **choices(request)}
    if who:
        try:
            viewer = viewer_of(tenant, who)
        except UnknownPrincipal as exc:
            context["error"] = str(exc)
            return render(request, "chat/see_as.html", context, status=400)
        wants_answer = request.GET.get("answer") == "1"
        found, problem = transport.attempt(seen, viewer, question, answer=wants_answer)
        if problem is not None:  # the model busy or restarting, the index busy: said, as the chat says it
            context["error"] = problem.detail
            return render(request, "chat/see_as.html", context, status=problem.status)
        context.update(found or {}, sees_all=viewer.sees_all)
        MembershipEvent.objects.create(tenant=tenant, actor=request.user, username=who[:150],
                                       action=MembershipEvent.Action.SEE_AS,
                                       detail=f"question: {question[:200]}" if question else "documents")  # fmt: skip
        audit("see_as", tenant=tenant.slug, actor=request.user.get_username(), seen_as=who, question=question[:500],
              answer=wants_answer)  # fmt: skip
    return render(request, "chat/see_as.html", context)
