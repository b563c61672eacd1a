from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from tenants.models import Membership


@login_required
def home(request: HttpRequest) -> HttpResponse:
    memberships = Membership.objects.filter(user=request.user).select_related("tenant")  # type: ignore[misc]  # login_required: a User
    return render(request, "home.html", {"memberships": memberships})
