"""A company sets itself up in the product: an operator creates a tenant and its first admin, the admin invites
people with a role, changes roles and removes members, and every change is audited."""

from __future__ import annotations

import re
import shutil

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from chat.models import ChatMessage
from tenants.models import Membership, MembershipEvent, Tenant
from tests.factories import make_member, make_tenant

User = get_user_model()


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_only_an_operator_may_create_a_tenant(db):
    assert Client().get("/tenants/new/").status_code == 302  # sign in first
    tenant = make_tenant(slug="acme", name="Acme")
    admin = make_member(tenant, role="admin")
    assert _client(admin).get("/tenants/new/").status_code == 404
    assert _client(admin).post("/tenants/new/", {"slug": "evil", "admin": "x"}).status_code == 404
    assert not Tenant.objects.filter(slug="evil").exists()


def test_the_members_page_is_for_the_tenants_admins_only(tenant_a, tenant_b):
    staff = make_member(tenant_a)
    outsider_admin = make_member(tenant_b, role="admin")
    membership = Membership.objects.get(user=staff)
    for client in (_client(staff), _client(outsider_admin)):
        assert client.get("/t/acme/members/").status_code == 404
        assert client.post("/t/acme/members/", {"who": "mallory", "role": "admin"}).status_code == 404
        url = f"/t/acme/members/{membership.public_id}/"
        assert client.post(url, {"action": "role", "role": "admin"}).status_code == 404
    assert not User.objects.filter(username="mallory").exists()
    assert Membership.objects.get(user=staff).role == "staff"


def test_an_admin_invites_changes_roles_and_removes_and_every_change_is_audited(tenant_a, tenant_b):
    ada = make_member(tenant_a, role="admin", username="ada")
    existing = User.objects.create_user("sam", email="sam@acme.example", password="pw-for-tests-123")
    for user, role in ((ada, "admin"), (existing, "staff")):  # sam works in another workspace ada administers
        Membership.objects.create(tenant=tenant_b, user=user, role=role)
    client = _client(ada)
    page = client.post("/t/acme/members/", {"who": "SAM@acme.example", "role": "staff"}, follow=True)
    assert "Added sam as staff" in page.content.decode()
    assert Membership.objects.get(tenant=tenant_a, user=existing).role == "staff"
    page = client.post("/t/acme/members/", {"who": "lee@acme.example", "role": "admin"}, follow=True).content.decode()
    assert "Sent an invitation to lee@acme.example as admin" in page
    assert not User.objects.filter(email="lee@acme.example").exists()  # no account until the link is used
    (message,) = [m for m in mail.outbox if m.to == ["lee@acme.example"]]
    assert "Acme" in message.subject and "as admin" in message.body
    link = re.search(r"http://testserver(/invitations/[\w-]+/)", message.body).group(1)
    anonymous = Client()
    accepted = {"username": "lee", "password1": "a-long-pass-phrase-42", "password2": "a-long-pass-phrase-42"}
    assert anonymous.post(link, accepted).status_code == 302
    lee = User.objects.get(username="lee")
    assert lee.check_password("a-long-pass-phrase-42") and lee.email == "lee@acme.example" and lee.is_staff
    assert Membership.objects.get(tenant=tenant_a, user=lee).role == "admin"
    assert Client().get(link).status_code == 410  # the link works once
    sam = Membership.objects.get(tenant=tenant_a, user=existing)
    client.post(f"/t/acme/members/{sam.public_id}/", {"action": "role", "role": "admin"})
    client.post(f"/t/acme/members/{sam.public_id}/", {"action": "remove"})
    assert not Membership.objects.filter(tenant=tenant_a, user=existing).exists()
    events = [(e.action, e.username, e.role, e.actor.username) for e in MembershipEvent.objects.order_by("pk")]
    assert events == [("added", "sam", "staff", "ada"), ("invitation_sent", "lee@acme.example", "admin", "ada"),
                      ("invitation_accepted", "lee", "admin", "lee"), ("role_changed", "sam", "admin", "ada"),
                      ("removed", "sam", "admin", "ada")]  # fmt: skip
    audit = client.get("/t/acme/members/").content.decode()
    assert "Removed <strong>sam</strong> (admin) by ada" in audit


def test_the_last_admin_can_be_neither_demoted_nor_removed(tenant_a):
    ada = make_member(tenant_a, role="admin", username="ada")
    mine = Membership.objects.get(user=ada)
    client = _client(ada)
    page = client.post(f"/t/acme/members/{mine.public_id}/", {"action": "remove"}, follow=True).content.decode()
    assert "last admin" in page
    client.post(f"/t/acme/members/{mine.public_id}/", {"action": "role", "role": "staff"})
    assert Membership.objects.get(user=ada).role == "admin"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh installs it)")
def test_a_company_onboards_in_the_browser_from_a_new_tenant_to_staff_chat(live_server, transactional_db, browser,
                                                                           tmp_path, chat_model):  # fmt: skip
    """Operator creates the tenant and invites its admin → the admin sets a password, uploads and curates, invites
    staff → staff chat. No Django admin on the way (docs/onboarding.md)."""
    User.objects.create_superuser("root", password="pw-for-tests-123")
    page = browser.new_page()

    def sign_in(username: str, password: str = "pw-for-tests-123") -> None:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")

    def accept(address: str, username: str) -> None:
        (message,) = [m for m in mail.outbox if m.to == [address]]
        page.context.clear_cookies()
        page.goto(re.search(r"https?://\S+/invitations/\S+/", message.body).group(0))
        page.fill("#id_username", username)
        page.fill("#id_password1", "a-long-pass-phrase-42")
        page.fill("#id_password2", "a-long-pass-phrase-42")
        page.click("#accept-invitation button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")

    sign_in("root")
    page.click("text=New workspace")
    page.fill("#slug", "acme")
    page.fill("#name", "Acme Support")
    page.uncheck("#join")
    page.fill("#admin", "ada@acme.example")
    page.click("button:has-text('Create the workspace')")
    accept("ada@acme.example", "ada")

    sign_in("ada", "a-long-pass-phrase-42")
    page.click("text=Upload")
    guide = tmp_path / "returns.md"
    guide.write_text("# Returns\n\nAn unopened dishwasher may be returned within forty five days.\n")
    page.set_input_files("#files", [str(guide)])
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector(".progress[aria-valuenow='100']", timeout=120_000)
    assert "1 added" in page.inner_text("#job-progress")
    page.click("text=See the documents")  # curate: the returns policy is critical
    page.click("text=returns.md")
    page.locator(".chunk button.mark").first.click()
    page.wait_for_selector(".chunk.critical")
    page.click("text=Members")
    page.fill("#who", "sam@acme.example")
    page.select_option("#role", "staff")
    page.click("#invite-form button[type=submit]")
    assert page.locator("tr[data-email='sam@acme.example'][data-state='pending']").is_visible()
    accept("sam@acme.example", "sam")

    sign_in("sam", "a-long-pass-phrase-42")
    page.click("text=Chat")
    page.fill("#question", "Within how many days can a dishwasher be returned?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    assert page.locator("text=Members").count() == 0  # staff see no admin pages
    assert ChatMessage.objects.filter(role="user", session__tenant__slug="acme").exists()
    assert MembershipEvent.objects.filter(tenant__slug="acme").count() == 4  # two invitations sent and accepted


def test_a_tenant_admin_cannot_pull_in_another_tenants_people(tenant_a, tenant_b):
    ada = make_member(tenant_a, role="admin", username="ada")
    make_member(tenant_b, username="gus")  # Globex's, and nobody's at Acme
    page = _client(ada).post("/t/acme/members/", {"who": "gus", "role": "staff"}, follow=True).content.decode()
    assert "cannot be invited from here" in page
    assert not Membership.objects.filter(tenant=tenant_a, user__username="gus").exists()
    both = make_member(tenant_b, username="lee")
    ada_at_globex = Membership.objects.create(tenant=tenant_b, user=ada, role="admin")
    assert ada_at_globex and _client(ada).post("/t/acme/members/", {"who": "lee", "role": "staff"}).status_code == 302
    assert Membership.objects.filter(tenant=tenant_a, user=both).exists()  # shares a workspace ada administers
