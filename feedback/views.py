"""Tenant admins' pages of the feedback loop: the curation queue, one item with its one-click fixes, and the
tenant's evaluation set with its runs over time. Every page is the tenant's admins' only."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from chat.models import AnswerRecord, Verdict
from feedback import conflicts, review, runs, selectors, services
from feedback.evaluation import SHOWN_METRICS
from feedback.models import Fix
from feedback.plot import evaluation_plot
from knowledge import selectors as knowledge_selectors
from knowledge.models import Chunk, Status
from knowledge.search.retrieval import RetrieveFilters, retrieve
from tenants.access import TenantRequest, found_or_404, tenant_member_required

logger = logging.getLogger(__name__)

CANDIDATE_CHUNKS = 3  # of the document the verdict names: the best-matching chunks, to mark critical in one click
MAX_UPLOAD_BYTES = 50 * 2**20


@tenant_member_required(admin=True)
@require_GET
def queue_page(request: TenantRequest) -> HttpResponse:
    filters = selectors.QueueFilters.from_query(request.GET)
    context = {
        "tenant": request.tenant,
        "items": selectors.queue_items(tenant=request.tenant, filters=filters),
        "counts": selectors.queue_counts(tenant=request.tenant),
        "filters": filters,
        "reasons": Verdict.Reason.choices,
        "channels": AnswerRecord.Channel.choices,
        "sources": knowledge_selectors.source_list(viewer=request.viewer),
        "conflicts": list(conflicts.open_conflicts(viewer=request.viewer)[:100]),
    }
    return render(request, "feedback/queue.html", context)


@tenant_member_required(admin=True)
@require_POST
def conflict_resolve(request: TenantRequest, conflict_id: str) -> HttpResponse:
    found = conflicts.open_conflicts(viewer=request.viewer).filter(public_id=conflict_id).first()
    if found is None:
        raise Http404("No such item.")
    try:
        conflicts.conflict_resolve(viewer=request.viewer, conflict=found, action=request.POST.get("action", ""),
                                   actor=request.user.get_username())  # fmt: skip
    except conflicts.ConflictRefused as refused:
        messages.error(request, str(refused))
        return redirect("feedback:queue", request.tenant.slug)
    messages.success(
        request,
        _("Contradiction closed: %(one)s and %(other)s.")
        % {"one": found.document.display_key, "other": found.other.display_key},
    )
    return redirect("feedback:queue", request.tenant.slug)


@tenant_member_required(admin=True)
@require_GET
def item_page(request: TenantRequest, item_id: str) -> HttpResponse:
    verdict = selectors.queue_item(tenant=request.tenant, public_id=item_id)
    return render(request, "feedback/item.html", _item_context(request, verdict))


def _item_context(request: TenantRequest, verdict: Verdict) -> dict[str, Any]:
    record = verdict.answer
    cited = {str(c.get("chunk_id")) for c in record.citations}
    live = _live_chunks(request, [str(h.get("chunk_id")) for h in record.hits])
    hits = [{**hit, "cited": str(hit.get("chunk_id")) in cited, "live": live.get(str(hit.get("chunk_id")))}
            for hit in record.hits]  # fmt: skip
    context = {
        "tenant": request.tenant,
        "item": verdict,
        "record": record,
        "hits": hits,
        "judged_claims": [record.claims[n] for n in verdict.claims if n < len(record.claims)],
        "candidates": _candidates(request, verdict),
        "fix": selectors.item_fix(verdict=verdict),
        "actions": Fix.Action,
        "tags": knowledge_selectors.tag_list(tenant=request.tenant),
        "expected": request.POST.get("expected", services.expected_phrase(verdict.correct_answer, record.question)),
        "today": timezone.localdate().isoformat(),
        "misread_possible": bool(services.misread_cases(verdict)),
        "computed": services.computed_table(verdict),  # its query and rows, with the fixes that fit a computation
    }
    return context


def _live_chunks(request: TenantRequest, chunk_ids: list[str]) -> dict[str, Chunk]:
    """The chunks of the answer's hits as they are now (a reindex may have replaced or removed them)."""
    return knowledge_selectors.live_chunks_by_key(viewer=request.viewer, chunk_ids=chunk_ids)


def _candidates(request: TenantRequest, verdict: Verdict) -> list[Chunk]:
    """The chunks of the document the verdict names that best answer the question, ranked by the same hybrid
    retrieval within that document only, to be marked critical in one click."""
    if verdict.document is None or verdict.document.status != Status.ACTIVE:
        return []
    within = RetrieveFilters(document_ids=[verdict.document.document_id])
    try:
        hits = retrieve(viewer=request.viewer, query=verdict.answer.question, top_k=CANDIDATE_CHUNKS, filters=within)
    except Exception:  # the item's other fixes stay usable; the reason is in the log
        logger.exception("Candidate chunks of %s could not be ranked", verdict.document.document_id)
        return []
    return [hit.chunk for hit in hits]


@tenant_member_required(admin=True)
@require_POST
def item_fix(request: TenantRequest, item_id: str) -> HttpResponse:
    """One click: the button pressed names the fix (and its chunk or document); the item closes."""
    verdict = selectors.queue_item(tenant=request.tenant, public_id=item_id)
    action, _sep, target = request.POST.get("fix", "").partition(":")
    upload = request.FILES.get("upload")
    wanted = services.FixRequest(
        action=action, chunk_id=target if action == Fix.Action.CRITICAL else "",
        document_id=target or request.POST.get("document_id", ""), tag=request.POST.get("tag", ""),
        expected=request.POST.get("expected", ""), in_force_at=_day(request.POST.get("in_force_at", "")),
    )  # fmt: skip
    try:
        if action == Fix.Action.UPLOAD and upload is not None:
            if upload.size and upload.size > MAX_UPLOAD_BYTES:
                raise services.FixRefused(
                    f"The file is larger than {MAX_UPLOAD_BYTES // 2**20} MiB; use the upload page."
                )
            wanted.upload = (upload.name or "upload", upload.read())
        fix = services.item_fix(tenant=request.tenant, verdict=verdict, wanted=wanted, user=request.user)
    except services.FixRefused as refused:  # the item stays open, the page says why
        context = {**_item_context(request, verdict), "error": str(refused)}
        return render(request, "feedback/item.html", context, status=400)
    what = f"{fix.get_action_display()}{f' ({fix.detail})' if fix.detail else ''}"
    messages.success(
        request, _("%(fix)s. The item is closed and its question is in the evaluation set.") % {"fix": what}
    )
    return redirect("feedback:queue", request.tenant.slug)


@tenant_member_required(admin=True)
@require_GET
def review_list(request: TenantRequest) -> HttpResponse:
    return _review_list(request)


def _review_list(request: TenantRequest, error: str = "") -> HttpResponse:
    context = {"tenant": request.tenant, "items": review.review_page(viewer=request.viewer), "error": error}
    return render(request, "feedback/review.html", context, status=400 if error else 200)


@tenant_member_required(admin=True)
@require_POST
def review_act(request: TenantRequest, document_id: str) -> HttpResponse:
    document = found_or_404(knowledge_selectors.document_get(viewer=request.viewer, document_id=document_id))
    action = request.POST.get("action", "")
    try:
        days = int(request.POST.get("days") or 0) or None
    except ValueError:
        return _review_list(request, "Days is a whole number.")
    try:
        review.review_act(viewer=request.viewer, document=document, action=action, actor=request.user.get_username(),
                          days=days, successor=request.POST.get("successor", ""))  # fmt: skip
    except review.ReviewRefused as refused:
        return _review_list(request, str(refused))
    done = {"still_true": _("Reviewed: due again in %(days)s days") % {"days": days}, "retire": _("Retired"),
            "superseded_by": _("Marked superseded")}[action]  # fmt: skip
    messages.success(request, f"{done}: {document.display_key}.")
    return redirect("feedback:review", request.tenant.slug)


@tenant_member_required(admin=True)
@require_GET
def evaluation_page(request: TenantRequest) -> HttpResponse:
    runs.fail_silent(tenant=request.tenant)  # a run whose runner died shows (and stays) failed, never running
    shown = list(selectors.eval_runs(tenant=request.tenant)[:200])
    context: dict[str, Any] = {
        "tenant": request.tenant,
        "questions": selectors.eval_questions(tenant=request.tenant),
        "runs": shown[:20],
        "plot": evaluation_plot(list(reversed(shown))),
        "metrics": SHOWN_METRICS,
        "pending": any(run.state in ("queued", "running") for run in shown),
    }
    return render(request, "feedback/evaluation.html", context)


@tenant_member_required(admin=True)
@require_POST
def evaluation_start(request: TenantRequest) -> HttpResponse:
    if not selectors.eval_questions(tenant=request.tenant).exists():
        messages.error(request, _("The evaluation set is empty: close an item of the curation queue first."))
    else:
        services.evaluation_enqueue(tenant=request.tenant, answers=request.POST.get("answers") != "0",
                                    started_by=request.user.get_username())  # fmt: skip
        messages.success(request, _("The evaluation is running in the background; this page shows it when it ends."))
    return redirect("feedback:evaluation", request.tenant.slug)


@tenant_member_required(admin=True)
@require_GET
def evaluation_export(request: TenantRequest) -> HttpResponse:
    response = HttpResponse(services.eval_set_jsonl(tenant=request.tenant), content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="{request.tenant.slug}-eval.jsonl"'
    return response


@tenant_member_required(admin=True)
@require_GET
def evaluation_run_page(request: TenantRequest, run_id: str) -> HttpResponse:
    run = selectors.eval_run(tenant=request.tenant, public_id=run_id)
    return render(request, "feedback/run.html", {"tenant": request.tenant, "run": run, "metrics": SHOWN_METRICS})


def _day(value: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError:
        return None
