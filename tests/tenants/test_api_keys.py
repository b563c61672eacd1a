from __future__ import annotations

import hashlib
import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from tenants.models import ApiKey, Tenant
from tenants.services import api_key_authenticate, api_key_issue
from tests.factories import make_member, make_user


def _url(slug: str) -> str:
    return f"/api/v1/tenants/{slug}/"


def test_an_api_key_is_stored_only_as_a_hash(tenant_a):
    api_key, raw_key = api_key_issue(tenant=tenant_a, name="bot")
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tenants_apikey")
        stored_values = [str(value) for row in cursor.fetchall() for value in row]
    assert raw_key.startswith("rag_") and len(raw_key) > 40
    assert not any(raw_key in value for value in stored_values)
    assert api_key.key_hash == hashlib.sha256(raw_key.encode()).hexdigest()
    assert raw_key.startswith(api_key.prefix) and len(api_key.prefix) < 16


def test_a_valid_key_reaches_its_own_tenant_and_records_its_use(tenant_a):
    api_key, raw_key = api_key_issue(tenant=tenant_a)
    response = APIClient().get(_url("acme"), HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    assert response.status_code == 200
    assert response.json() == {"id": str(tenant_a.public_id), "slug": "acme", "name": "Acme", "acts_for": ["tenant"],
                               "sees_everything": False}  # fmt: skip
    api_key.refresh_from_db()
    assert api_key.last_used_at is not None


def test_a_revoked_key_fails(tenant_a):
    api_key, raw_key = api_key_issue(tenant=tenant_a)
    api_key.revoke()
    response = APIClient().get(_url("acme"), HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    assert response.status_code == 401
    assert api_key_authenticate(raw_key) is None


@pytest.mark.parametrize("header", ["Api-Key rag_wrong", "Api-Key ", "Api-Key " + "x" * 5000])
def test_a_wrong_key_is_refused_with_401(tenant_a, header):
    response = APIClient().get(_url("acme"), HTTP_AUTHORIZATION=header)
    assert response.status_code == 401


def test_no_credentials_is_refused(tenant_a):
    assert APIClient().get(_url("acme")).status_code in (401, 403)


def test_a_key_for_one_tenant_gets_404_on_another_tenant_like_a_missing_one(tenant_a, tenant_b):
    _, raw_key = api_key_issue(tenant=tenant_a)
    client = APIClient()
    other = client.get(_url("globex"), HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    missing = client.get(_url("no-such-tenant"), HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    assert other.status_code == missing.status_code == 404
    assert other.json() == missing.json()
    assert "globex" not in other.content.decode().lower()


def test_a_logged_in_member_reaches_only_tenants_they_belong_to(tenant_a, tenant_b):
    client = APIClient()
    client.force_login(make_member(tenant_a))
    assert client.get(_url("acme")).status_code == 200
    assert client.get(_url("globex")).status_code == 404


def test_a_logged_in_user_without_membership_gets_404(tenant_a):
    client = APIClient()
    client.force_login(make_user())
    assert client.get(_url("acme")).status_code == 404


def test_create_api_key_prints_a_working_key_as_the_last_line(tenant_a):
    out = io.StringIO()
    call_command("create_api_key", "acme", "--name", "cli", stdout=out)
    raw_key = out.getvalue().strip().splitlines()[-1]
    api_key = api_key_authenticate(raw_key)
    assert api_key is not None and api_key.tenant == tenant_a and api_key.name == "cli"


def test_create_api_key_for_an_unknown_tenant_fails_clearly(db):
    with pytest.raises(CommandError, match="No tenant"):
        call_command("create_api_key", "nobody")
    assert ApiKey.objects.count() == 0


def test_create_tenant_validates_the_slug(db):
    call_command("create_tenant", "initech", "--name", "Initech", stdout=io.StringIO())
    assert Tenant.objects.get(slug="initech").name == "Initech"
    with pytest.raises(CommandError, match="slug"):
        call_command("create_tenant", "Not A Slug", stdout=io.StringIO())
    with pytest.raises(CommandError, match="already exists"):
        call_command("create_tenant", "initech", stdout=io.StringIO())
