"""Error pages in the product's look, that never say whether another tenant's object exists; an operator who is
not a member is told so, with the way to join."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.test import Client

from tenants.models import MembershipEvent
from tests.factories import make_member


def test_a_missing_page_and_another_tenants_page_look_the_same_and_are_styled(tenant_a, tenant_b, settings):
    settings.DEBUG = False
    client = Client()
    client.force_login(make_member(tenant_b))
    other = client.get("/t/acme/documents/")  # exists, another tenant's
    missing = client.get("/t/no-such-tenant/documents/")
    assert other.status_code == missing.status_code == 404
    page = other.content.decode()
    assert 'class="card error-page"' in page and "ragsite.css" in page  # the product's page, not Django's bare one
    assert "Not found" in page and "acme" not in page.lower().split("<main")[-1]
    unmasked = [re.sub(r'"X-CSRFToken": "\w+"|value="\w{64}"', "", r.content.decode()) for r in (other, missing)]
    assert unmasked[0] == unmasked[1]  # nothing tells them apart (but the per-response CSRF mask)


def test_an_operator_who_is_not_a_member_is_offered_to_join_and_joining_is_audited(tenant_a):
    root = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    client = Client()
    client.force_login(root)
    response = client.get("/t/acme/chat/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "You are not a member of" in page and 'action="/tenants/acme/join/"' in page
    assert client.get("/t/no-such-tenant/chat/").status_code == 404  # an unknown tenant is still just missing
    assert client.get("/tenants/acme/join/").status_code == 405  # joining is a POST, never a link followed
    assert client.post("/tenants/acme/join/").status_code == 302
    assert client.get("/t/acme/chat/").status_code == 200
    event = MembershipEvent.objects.for_tenant(tenant_a).get(action="operator_joined")
    assert event.actor == root and event.username == "root" and event.role == "admin"


def test_the_home_page_leads_a_tenant_admin_to_the_curation_pages_not_the_django_admin(tenant_a):
    client = Client()
    client.force_login(make_member(tenant_a, role="admin"))
    page = client.get("/").content.decode()
    assert 'href="/t/acme/sources/"' in page and 'href="/t/acme/upload/"' in page
    assert "/admin/" not in page
