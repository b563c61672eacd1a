"""GET /healthz: is the web process up, and what is the chat model doing. Public: no tenant data, no paths."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from inference.runtime import model_status


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    """200 whenever this process serves requests: a model that is restarting does not take the web out of a
    load balancer (retrieval and the pages still work); its state is in the body."""
    status = model_status()
    public = {k: status.get(k) for k in ("state", "model", "restarts", "since", "remote") if k in status}
    return JsonResponse({"status": "ok", "chat_model": public})
