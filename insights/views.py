"""The insights pages (docs/insights.md): a tenant admin's picture of what is asked and how the knowledge answers, the
content gaps and who closes each; a gap's owner writes the missing text; the operator sees figures across tenants,
never a question."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from insights import charts, gaps, owners, usage
from insights.models import Gap
from knowledge.models import Document, Source, Status
from tenants.access import TenantRequest, operator_required, tenant_member_required
from tenants.models import Group, Membership

MAX_LISTED = 1000  # documents offered on the owners page (a larger tenant names the rest through their sources)


def _span(request: HttpRequest) -> tuple[usage.Range | None, str]:
    try:
        return usage.date_range(request.GET.get("start", ""), request.GET.get("end", "")), ""
    except usage.BadRange as bad:
        return None, str(bad)


@tenant_member_required(admin=True)
@require_GET
def insights_page(request: TenantRequest) -> HttpResponse:
    tenant = request.tenant
    groups = list(Group.objects.filter(tenant=tenant).order_by("name").values_list("name", flat=True))
    group = request.GET.get("group", "")
    span, problem = _span(request)
    if group and group not in groups:
        problem, group = _("There is no group of that name."), ""
    by = request.GET.get("by", "door")
    if by not in usage.SPLITS:
        problem, by = _("Split the questions by door, assistant or group."), "door"
    context: dict[str, Any] = {
        "tenant": tenant,
        "groups": groups,
        "group": group,
        "by": by,
        "problem": problem,
        "start": request.GET.get("start", ""),
        "end": request.GET.get("end", ""),
    }
    status = 400 if problem else 200
    span = span or usage.date_range()
    shown = usage.figures(tenant, span, group)
    if by == "door":
        per_day = charts.per_day(span.days, shown.by_day)
    else:
        split = usage.per_day_by(shown, by)
        order = [name for name, _n in (shown.by_assistant if by == "assistant" else shown.by_group)]
        per_day = charts.per_day(span.days, split, charts.series_of(split, [*order, usage.OTHER]))
    context.update(
        {
            "span": span,
            "figures": shown,
            "per_day": per_day,
            "outcomes": charts.split(shown.outcomes),
            "gaps": gaps.open_gaps(tenant).exclude(state=Gap.State.CLOSED)[:10],
            "gap_days": gaps.opened_and_closed(tenant, span.days),
        }
    )
    gap_days = {day: {"opened": opened, "closed": closed} for day, (opened, closed) in context["gap_days"].items()}
    context["gap_chart"] = charts.per_day(span.days, gap_days, charts.GAP_SERIES)
    context["gap_totals"] = [sum(d["opened"] for d in gap_days.values()), sum(d["closed"] for d in gap_days.values())]
    return render(request, "insights/insights.html", context, status=status)


@tenant_member_required
@require_GET
def gaps_page(request: TenantRequest) -> HttpResponse:
    """Every gap for an admin; the gaps a member owns for them."""
    admin = request.membership.is_admin
    found = gaps.open_gaps(request.tenant, user=request.user, admin=admin)
    state = request.GET.get("state", "open")
    if state in Gap.State.values:
        found = found.filter(state=state)
    context = {
        "tenant": request.tenant,
        "gaps": found[:200],
        "state": state,
        "states": Gap.State.choices,
        "admin": admin,
    }
    return render(request, "insights/gaps.html", context)


@tenant_member_required
@require_http_methods(["GET", "POST"])
def gap_detail(request: TenantRequest, gap_id: str) -> HttpResponse:
    """A gap, for its owner or an admin: the question, who asked (groups, doors), what the retriever saw nearest,
    the draft; the owner writes the missing text. Only an admin reads the questions one by one."""
    gap = Gap.objects.for_tenant(request.tenant).select_related("owner").public_or_404(gap_id)
    if not owners.may_close(gap, request.user):
        raise Http404("No such page.")
    admin = request.membership.is_admin
    context: dict[str, Any] = {"tenant": request.tenant, "gap": gap, "admin": admin}
    status = 200
    if request.method == "POST" and request.POST.get("owner") is not None and admin:
        chosen = Membership.objects.filter(tenant=request.tenant, user__username=request.POST["owner"]).first()
        gap.owner = chosen.user if chosen else None
        gap.save(update_fields=["owner"])
        messages.success(request, _("Saved."))
        return redirect("insights:gap", request.tenant.slug, gap.public_id)
    if request.method == "POST":
        try:
            owners.gap_write(
                gap=gap,
                text=request.POST.get("text", ""),
                expected=request.POST.get("expected", ""),
                user=request.user,
                where=request.POST.get("where", "new"),
                source=request.POST.get("source", ""),
                version=request.POST.get("version", ""),
            )
        except owners.GapInvalid as invalid:
            context["errors"], context["given"], status = invalid.errors, request.POST, 400
        else:
            messages.success(
                request,
                _(
                    "Thank you: the text is being added, and its questions are in the evaluation "
                    "set. The gap closes when an evaluation run answers them."
                ),
            )
            return redirect("insights:gap", request.tenant.slug, gap.public_id)
    if admin:
        context["questions"] = gap.questions.select_related("answer")[:200]
        context["members"] = Membership.objects.filter(tenant=request.tenant).select_related("user")
    context["draft_text"] = " ".join(s["text"] for s in gap.draft.get("sentences", []))
    if gap.state == Gap.State.OPEN:
        context["to"] = owners.destinations(gap)
    return render(request, "insights/gap.html", context, status=status)


@tenant_member_required(admin=True)
@require_http_methods(["GET", "POST"])
def owners_page(request: TenantRequest) -> HttpResponse:
    """Who answers for each source's knowledge (its gaps go to them)."""
    sources = Source.objects.for_tenant(request.tenant).select_related("owner").order_by("label")
    documents = Document.objects.for_tenant(request.tenant).filter(status=Status.ACTIVE).order_by("document_key")
    if request.method == "POST":
        username = request.POST.get("owner", "")
        member = Membership.objects.filter(tenant=request.tenant, user__username=username).first()
        target = (
            sources.filter(public_id=request.POST.get("source", "")).first()
            if request.POST.get("source")
            else documents.filter(public_id=request.POST.get("document", "")).first()
        )
        if target is None or (username and member is None):
            messages.error(request, _("Choose a source or a document, and a member."))
        else:
            target.owner = member.user if member else None  # none: the source's owner, or the admins
            target.save(update_fields=["owner"])
            messages.success(request, _("Saved."))
        return redirect("insights:owners", request.tenant.slug)
    members = Membership.objects.filter(tenant=request.tenant).select_related("user").order_by("user__username")
    context = {
        "tenant": request.tenant,
        "sources": sources,
        "members": members,
        "owned": documents.filter(owner__isnull=False).select_related("owner")[:200],
        "documents": documents.only("public_id", "document_key")[:MAX_LISTED],
    }
    return render(request, "insights/owners.html", context)


@operator_required
@require_GET
def operator_insights(request: HttpRequest) -> HttpResponse:
    """Figures across tenants, for the people who run the server: counts, outcomes, latency — no question text."""
    span, problem = _span(request)
    span = span or usage.date_range()
    rows = usage.across_tenants(span)
    context = {"rows": rows, "span": span, "problem": problem, "users": get_user_model().objects.count()}
    return render(request, "insights/operator.html", context, status=400 if problem else 200)
