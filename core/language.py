"""The language switch on every page: a link per language (no form, no token, nothing that differs between two
pages that must look the same). It remembers the choice in the language cookie and goes back to the page it came
from, or to the home page when that page is not this site's."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET


@require_GET
def switch_language(request: HttpRequest, code: str) -> HttpResponse:
    """Any visitor may choose the pages' language (it reads nothing and changes nothing else); an unknown one is
    ignored. The page it came from (the Referer) only when it is this site's, else the home page."""
    back = request.headers.get("referer", "")
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    response = HttpResponseRedirect(back if back and safe else "/")
    if code in dict(settings.LANGUAGES):
        response.set_cookie(
            settings.LANGUAGE_COOKIE_NAME, code, max_age=settings.LANGUAGE_COOKIE_AGE, path="/",
            samesite="Lax", secure=request.is_secure(), httponly=True,
        )  # fmt: skip
    return response
