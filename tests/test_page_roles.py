"""Every browser page × {anonymous, staff, admin, another tenant's admin, operator}: each page route says which
role may open it (`page_role`: member, admin or operator, set by the decorators of tenants/access.py), and
nobody else gets in.

The routes are enumerated from the URL configuration, so a new page is covered the day it is added, and a page
under a tenant that declares no role fails here."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from chat.models import Verdict
from feedback.models import Conflict, EvalRun
from identity.models import Provider
from identity.scim import token_issue
from insights.models import Gap
from knowledge.models import Chunk, Document, IngestJob, Source
from tenants.models import Membership
from tenants.services import api_key_issue, invitation_send
from tests.factories import make_answer, make_folder_source, make_member

OUTSIDE = ("api/", "admin/", "accounts/", "healthz")  # the API (tests/test_api_roles.py), Django's own pages


def _page_routes() -> list[tuple[str, object]]:
    routes = []

    def walk(patterns, prefix: str) -> None:  # type: ignore[no-untyped-def]
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                route = prefix + str(entry.pattern)
                if route and not route.startswith(OUTSIDE) and getattr(entry.callback, "view_class", None) is None:
                    routes.append((route, entry.callback))

    walk(get_resolver().url_patterns, "")
    return routes


@pytest.fixture
def world(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"faq.md": "# FAQ\n\nOpen the page.\n"})
    staff = make_member(tenant_a)
    answer = make_answer(tenant_a, user=staff)
    verdict = Verdict.objects.create(tenant=tenant_a, answer=answer, helpful=False, channel="chat", user=staff)
    faq = Document.objects.get(source=source)
    conflict = Conflict.objects.create(tenant=tenant_a, document=faq, other=faq, subject="page", value="1 MB",
                                       other_value="2 MB", sentence="", other_sentence="")  # fmt: skip
    return {
        "conflict_id": conflict.public_id,
        "tenant_slug": "acme",
        "source_id": source.public_id,
        "job_id": IngestJob.objects.filter(source=source).first().public_id,
        "document_id": Document.objects.get(source=source).public_id,
        "chunk_id": Chunk.objects.filter(document__source=source).first().public_id,
        "membership_id": Membership.objects.get(user=staff).public_id,
        "answer_id": answer.public_id,
        "item_id": verdict.public_id,
        "run_id": EvalRun.objects.create(tenant=tenant_a, state="done").public_id,
        "gap_id": Gap.objects.create(
            tenant=tenant_a,
            representative="Where can I park?",
            owner=staff,
            first_asked_at=answer.created_at,
            last_asked_at=answer.created_at,
        ).public_id,
        "invitation_id": invitation_send(
            tenant=tenant_a, actor=None, email="new@acme.example", role="staff", base_url="http://testserver/"
        ).public_id,
        "key_id": api_key_issue(tenant=tenant_a, name="bot")[0].public_id,
        "token_id": token_issue(tenant=tenant_a, name="okta")[0].public_id,
        "provider_id": Provider.objects.create(
            tenant=tenant_a, name="LDAP", slug="ldap", kind="ldap", ldap_url="ldap://127.0.0.1:1", user_base="dc=acme"
        ).public_id,
    }


def _url(route: str, values: dict) -> str:  # type: ignore[type-arg]
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values[m.group(1)]), route)


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_every_page_route_declares_its_role():
    routes = _page_routes()
    undeclared = [route for route, view in routes if "tenant_slug" in route and not hasattr(view, "page_role")]
    assert undeclared == []
    roles = {route: view.page_role for route, view in routes if hasattr(view, "page_role")}  # type: ignore[attr-defined]
    # What each role may do is the product's rule: staff only chat; everything else under a tenant is an admin's.
    assert {route for route, role in roles.items() if role == "member"} == {
        "t/<slug:tenant_slug>/chat/",
        "t/<slug:tenant_slug>/chat/ask/",
        "t/<slug:tenant_slug>/chat/sessions/",
        "t/<slug:tenant_slug>/chat/answers/<str:answer_id>/verdict/",
        "t/<slug:tenant_slug>/chat/answers/<str:answer_id>/receipt/",  # their own answers' (an admin's: any)
        "t/<slug:tenant_slug>/chat/receipts.jsonl",
        "t/<slug:tenant_slug>/chat/recalled/",
        "t/<slug:tenant_slug>/chat/digest/",
        "t/<slug:tenant_slug>/gaps/",  # the content gaps they own (an admin: every gap)
        "t/<slug:tenant_slug>/gaps/<str:gap_id>/",  # one they own (else 404: tests/insights)
        "t/<slug:tenant_slug>/read/<path:document_id>/",  # a document a citation names, read only
    }
    operators = {route for route, role in roles.items() if role == "operator"}
    assert operators == {"tenants/new/", "tenants/<slug:tenant_slug>/join/", "operator/locations/",
                         "operator/insights/"}  # fmt: skip
    # Signing in through a workspace's provider is open to anyone: the provider decides who finishes it
    # (tests/identity/test_oidc.py, test_saml.py refuse whoever it does not admit).
    assert {route for route, role in roles.items() if role == "public"} == {
        "sso/<slug:tenant_slug>/",
        "sso/<slug:tenant_slug>/<slug:provider_slug>/",
        "sso/<slug:tenant_slug>/<slug:provider_slug>/callback/",
        "sso/<slug:tenant_slug>/<slug:provider_slug>/saml/acs/",
        "sso/<slug:tenant_slug>/<slug:provider_slug>/saml/metadata/",
    }


def test_each_role_opens_exactly_its_pages_and_the_others_get_404(world, tenant_a, tenant_b):
    admin = make_member(tenant_a, role="admin")
    staff = Membership.objects.get(public_id=world["membership_id"]).user
    outsider = make_member(tenant_b, role="admin")
    operator = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    anonymous = Client()
    checked = 0
    for route, view in _page_routes():
        role = getattr(view, "page_role", None)
        if role in (None, "public"):
            continue
        url = _url(route, world)
        allowed = {"operator": [operator], "admin": [admin], "member": [admin, staff]}[role]
        refused = {"operator": [admin, staff, outsider], "admin": [staff, outsider], "member": [outsider]}[role]
        for user in refused:
            for method in ("get", "post"):
                assert getattr(_client(user), method)(url).status_code == 404, (url, user.username, method)
        for user in allowed:  # reads only: a POST by an allowed role would act
            assert _client(user).get(url).status_code not in (302, 403, 404), (url, user.username)
        assert anonymous.get(url).status_code == 302 and anonymous.post(url).status_code == 302, url
        checked += 1
    assert checked >= 20
    assert (
        Source.objects.filter(tenant=tenant_a).count() == 1 and Membership.objects.filter(tenant=tenant_a).count() == 2
    )
