"""Directory sync (issue 63) against Debian's OpenLDAP (slapd) started by the test: an admin configures the
directory in Chromium and syncs it; its people become members with the role and groups their directory groups
give; someone removed from the directory is deprovisioned at the next sync (membership, groups, keys — a key acting
for them reads nothing at its next request); an unreachable directory or a search that finds nobody removes
nobody."""

from __future__ import annotations

import shutil

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django_q.models import Schedule

from core.sealed import seal
from identity import directory
from identity.models import SECRET_PURPOSE, Provider, ProviderLink
from tenants.models import ApiKey, Group, Membership
from tenants.services import api_key_issue
from tests.factories import make_member, make_tenant
from tests.identity.browser import sign_in_with_password

User = get_user_model()


def _company(slapd) -> dict[str, str]:  # type: ignore[no-untyped-def]
    ann, ben = slapd.person("ann"), slapd.person("ben")
    slapd.group("engineering", [ann])
    slapd.group("support", [ben])
    slapd.group("ragsite-admins", [ann])
    return {"ann": ann, "ben": ben}


def _ldap(tenant, slapd, **changes) -> Provider:  # type: ignore[no-untyped-def]
    fields = {
        "name": "Corporate LDAP",
        "slug": "ldap",
        "kind": Provider.Kind.LDAP,
        "ldap_url": slapd.url,
        "bind_dn": f"cn=ragsite,ou=services,{slapd.suffix}",
        "user_base": f"ou=people,{slapd.suffix}",
        "group_base": f"ou=groups,{slapd.suffix}",
        "subject_claim": "entryUUID",
        "username_claim": "uid",
        "email_claim": "mail",
        "role_map": {"ragsite-admins": "admin"},
        "group_map": {"engineering": "eng"},
        "secret_sealed": seal("reader-secret", purpose=SECRET_PURPOSE),
        **changes,
    }
    return Provider.objects.create(tenant=tenant, **fields)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_an_admin_configures_the_directory_in_the_browser_and_syncs_it(live_server, transactional_db, browser, slapd):
    _company(slapd)
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role="admin", username="root-admin")
    page = browser.new_page()
    sign_in_with_password(page, live_server.url, "root-admin")
    page.goto(f"{live_server.url}/t/acme/identity/new/")
    page.fill("#id_name", "Corporate LDAP")
    page.fill("#id_slug", "ldap")
    page.select_option("#id_kind", "ldap")
    page.fill("#id_ldap_url", slapd.url)
    page.fill("#id_bind_dn", f"cn=ragsite,ou=services,{slapd.suffix}")
    page.fill("#id_secret", "reader-secret")
    page.fill("#id_user_base", f"ou=people,{slapd.suffix}")
    page.fill("#id_group_base", f"ou=groups,{slapd.suffix}")
    page.fill("#id_subject_claim", "entryUUID")
    page.fill("#id_username_claim", "uid")
    page.fill("#id_email_claim", "mail")
    page.fill("#id_sync_minutes", "15")
    page.fill("#id_role_map_text", "ragsite-admins = admin")
    page.fill("#id_group_map_text", "engineering = eng")
    page.click("#save-provider")
    page.click("#sync-now")
    assert "2 found, 2 in the workspace, 0 deprovisioned" in page.content()
    provider = Provider.objects.get(tenant=tenant, slug="ldap")
    assert "reader-secret" not in provider.secret_sealed
    assert Schedule.objects.get(name=directory.schedule_name(provider)).minutes == 15
    ann, ben = User.objects.get(username="ann"), User.objects.get(username="ben")
    assert Membership.objects.get(tenant=tenant, user=ann).role == "admin"
    assert Membership.objects.get(tenant=tenant, user=ben).role == "staff"
    assert list(Group.objects.get(tenant=tenant, name="eng").members.all()) == [ann]


def test_someone_removed_from_the_directory_loses_everything_at_the_next_sync(db, tenant_a, slapd):
    dns = _company(slapd)
    provider = _ldap(tenant_a, slapd)
    assert directory.sync(provider).admitted == 2
    ben = User.objects.get(username="ben")
    own_key, own_raw = api_key_issue(tenant=tenant_a, name="ben's", created_by=ben)
    bot, bot_raw = api_key_issue(tenant=tenant_a, name="bot for ben", acts_for=["user:ben"])
    assert Client().get("/api/v1/tenants/acme/sources/", HTTP_AUTHORIZATION=f"Api-Key {bot_raw}").status_code == 200

    slapd.delete(dns["ben"])
    report = directory.scheduled_sync(provider.pk)  # what the worker's schedule runs
    assert "1 deprovisioned" in report
    assert not Membership.objects.filter(tenant=tenant_a, user=ben).exists()
    assert not Group.objects.filter(members=ben).exists()
    assert ApiKey.objects.get(pk=own_key.pk).revoked_at and ApiKey.objects.get(pk=bot.pk).revoked_at
    assert Client().get("/api/v1/tenants/acme/sources/", HTTP_AUTHORIZATION=f"Api-Key {bot_raw}").status_code == 401
    assert not User.objects.get(pk=ben.pk).is_active
    assert Membership.objects.filter(tenant=tenant_a, user__username="ann").exists()

    # Back in the directory (the same entry made again gets a new entryUUID): a new link, nothing of the old one.
    slapd.person("ben")
    directory.sync(provider)
    assert Membership.objects.filter(tenant=tenant_a, user=ben).exists() is False  # the old account stays off
    assert "already exists" in Provider.objects.get(pk=provider.pk).last_sync_report


def test_an_unreachable_directory_or_an_empty_search_deprovisions_nobody(db, tenant_a, slapd):
    _company(slapd)
    provider = _ldap(tenant_a, slapd)
    directory.sync(provider)
    members = Membership.objects.filter(tenant=tenant_a).count()
    wrong_password = _ldap(tenant_a, slapd, slug="ldap-2", secret_sealed=seal("nope", purpose=SECRET_PURPOSE))
    report = directory.sync(wrong_password)
    assert not report.ok and "invalidCredentials" in report.summary.replace(" ", "")
    provider.user_filter = "(uid=no-such-person)"
    provider.user_base = f"ou=people,{slapd.suffix}"
    provider.save()
    report = directory.sync(provider)
    assert report.found == 0 and "nobody was deprovisioned" in report.summary
    assert Membership.objects.filter(tenant=tenant_a).count() == members
    assert ProviderLink.objects.filter(provider=provider).count() == 2


def test_a_binary_guid_reads_as_active_directory_shows_it():
    import uuid

    guid = uuid.UUID("0b9e4d5c-1a2b-4c3d-8e9f-a0b1c2d3e4f5")
    assert directory._first({"objectGUID": [guid.bytes_le]}, "objectguid") == str(guid)
    assert directory._first({"uid": ["ann"]}, "uid") == "ann"
