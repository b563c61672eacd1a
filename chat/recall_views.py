"""The pages of receipts and recall (docs/receipts.md): an answer's receipt, a member's inbox of answers whose ground
changed (with "ask again"), their digest and its frequency; for the tenant's admins, the retention period with what
it will delete, and each API key's webhook (a fragment of the keys page)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from chat import digests, recall, receipts, retention, webhooks
from chat.models import AnswerRecord, DigestChoice
from tenants.access import TenantRequest, tenant_member_required
from tenants.models import ApiKey

MAX_KEEP_DAYS = 36500


def _readable(request: TenantRequest) -> Any:
    """The answers this person may read the receipt of: their own; a tenant admin, every answer of the tenant."""
    answers = AnswerRecord.objects.for_tenant(request.tenant)
    return answers if request.membership.is_admin else answers.filter(user=request.user)


@tenant_member_required
@require_GET
def receipt_page(request: TenantRequest, answer_id: str) -> HttpResponse:
    record = _readable(request).select_related("user", "api_key", "agent_session").public_or_404(answer_id)
    shown = receipts.receipt(record, request.viewer)
    if record.user_id == request.user.pk:
        recall.seen(record)
    context = {"tenant": request.tenant, "record": record, "receipt": shown, "mine": record.user_id == request.user.pk}
    return render(request, "chat/receipt.html", context)


@tenant_member_required
@require_GET
def receipts_export(request: TenantRequest) -> StreamingHttpResponse:
    """JSON lines, one receipt per answer (an auditor's export): a member's own answers, an admin's every answer."""
    lines = receipts.export_lines(_readable(request), request.viewer)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson; charset=utf-8")
    day = timezone.localdate().isoformat()
    response["Content-Disposition"] = f'attachment; filename="receipts-{request.tenant.slug}-{day}.jsonl"'
    return response


@tenant_member_required
@require_GET
def recalled_inbox(request: TenantRequest) -> HttpResponse:
    """Answers you got whose ground changed: what changed, the receipt, and "ask again"."""
    answers = list(recall.recalled_for(tenant=request.tenant, user=request.user)[:100])
    context = {
        "tenant": request.tenant,
        "answers": answers,
        "unseen": sum(1 for a in answers if a.recall_seen_at is None),
    }
    return render(request, "chat/recalled.html", context)


@tenant_member_required
@require_http_methods(["GET", "POST"])
def digest_page(request: TenantRequest) -> HttpResponse:
    """The digest since the last one (or the last week), and how often it is sent."""
    choice, _created = DigestChoice.objects.get_or_create(tenant=request.tenant, user=request.user)
    if request.method == "POST":
        every = request.POST.get("every", "")
        if every not in DigestChoice.Every.values:
            messages.error(request, _("Choose never, daily or weekly."))
        else:
            choice.every = every
            choice.save(update_fields=["every"])
            messages.success(request, _("Saved."))
            return redirect("chat:digest", request.tenant.slug)
    since = choice.last_sent_at or timezone.now() - digests.PERIOD[DigestChoice.Every.WEEKLY]
    context = {
        "tenant": request.tenant,
        "choice": choice,
        "choices": DigestChoice.Every.choices,
        "since": since,
        "lines": digests.digest(request.membership, since=since),
        "has_email": bool(request.user.email),
    }
    return render(request, "chat/digest.html", context)


@tenant_member_required(admin=True)
@require_http_methods(["GET", "POST"])
def retention_page(request: TenantRequest) -> HttpResponse:
    """The tenant's retention period, and what the next daily run will delete under it."""
    tenant, status = request.tenant, 200
    if request.method == "POST":
        raw = request.POST.get("keep_days", "").strip()
        if raw and (not raw.isdigit() or not 1 <= int(raw) <= MAX_KEEP_DAYS):
            messages.error(request, _("Keep answers for 1 to 36,500 days, or leave it blank to keep them."))
            status = 400
        else:
            tenant.answers_keep_days = int(raw) if raw else None
            tenant.save(update_fields=["answers_keep_days"])
            messages.success(request, _("Saved."))
            return redirect("chat:retention", tenant.slug)
    context = {"tenant": tenant, "due": retention.due(tenant)}
    return render(request, "chat/retention.html", context, status=status)


@tenant_member_required(admin=True)
@require_http_methods(["GET", "POST"])
def key_webhook(request: TenantRequest, key_id: str) -> HttpResponse:
    """A key's webhook on the keys page: set it (its secret is shown once), remove it, see its deliveries."""
    api_key = ApiKey.objects.for_tenant(request.tenant).public_or_404(key_id)
    context: dict[str, Any] = {"tenant": request.tenant, "key": api_key}
    status = 200
    if request.method == "POST":
        if request.POST.get("remove"):
            webhooks.webhook_remove(api_key=api_key)
        else:
            try:
                _hook, context["secret"] = webhooks.webhook_set(api_key=api_key, url=request.POST.get("url", ""))
            except webhooks.WebhookRefused as refused:
                context["error"], context["url"] = str(refused), request.POST.get("url", "")
                status = 200 if request.headers.get("HX-Request") else 400  # HTMX swaps only a 2xx into the row
    context.update(webhooks.key_webhook_state(api_key))
    return render(request, "chat/partials/_key_webhook.html", context, status=status)
