"""A company runs itself without a shell: operators join workspaces explicitly, invitations arrive by e-mail and
expire, can be sent again or revoked, passwords are reset by e-mail (throttled, never saying whether an address
exists), and tenant admins issue and revoke API keys on a page and through the API, all audited."""

from __future__ import annotations

import re
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tenants.models import ApiKey, Invitation, Membership, MembershipEvent, Tenant
from tenants.services import api_key_issue
from tests.factories import make_member

User = get_user_model()
PASSWORD = "a-long-pass-phrase-42"


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def _link(address: str) -> str:
    body = [m for m in mail.outbox if m.to == [address]][-1].body
    return re.search(r"http://testserver(/\S+/)", body).group(1)


def raw_not_again(client: Client) -> bool:
    """The new key's page, loaded again, no longer shows it."""
    return "new-key-value" not in client.get("/t/acme/keys/").content.decode()


def _accept(link: str, username: str) -> int:
    return Client().post(link, {"username": username, "password1": PASSWORD, "password2": PASSWORD}).status_code


# --- operators ----------------------------------------------------------------------------------------------------
def test_an_operator_creates_a_workspace_joins_it_and_the_join_is_audited(db):
    root = User.objects.create_superuser("root", password="pw-for-tests-123")
    client = _client(root)
    response = client.post("/tenants/new/", {"slug": "orion", "name": "Orion", "join": "on"})
    assert response.status_code == 302 and response.url == "/t/orion/members/"
    orion = Tenant.objects.get(slug="orion")
    assert client.get("/t/orion/members/").status_code == 200  # no 403 asking for a shell command
    event = MembershipEvent.objects.for_tenant(orion).get()
    assert (event.action, event.actor, event.role) == ("operator_joined", root, "admin")


def test_a_workspace_the_operator_does_not_join_is_listed_on_home_with_a_join_button_and_stays_closed(db):
    root = User.objects.create_superuser("root", password="pw-for-tests-123")
    client = _client(root)
    client.post("/tenants/new/", {"slug": "orion", "name": "Orion", "admin": "ada@orion.example"})
    orion = Tenant.objects.get(slug="orion")
    assert not Membership.objects.for_tenant(orion).filter(user=root).exists()  # never implied
    home = client.get("/").content.decode()
    assert "Orion" in home and 'action="/tenants/orion/join/"' in home
    assert client.get("/t/orion/members/").status_code == 403
    refused = client.post("/tenants/new/", {"slug": "lyra", "name": "Lyra"}, follow=True).content.decode()
    assert "needs an admin" in refused and not Tenant.objects.filter(slug="lyra").exists()


# --- invitations --------------------------------------------------------------------------------------------------
def test_an_invitation_is_mailed_shows_its_state_and_its_link_creates_the_account_once(tenant_a, settings):
    ada = make_member(tenant_a, role="admin", username="ada")
    client = _client(ada)
    client.post("/t/acme/members/", {"who": "lee@acme.example", "role": "staff"})
    (message,) = mail.outbox
    assert message.to == ["lee@acme.example"] and message.from_email == settings.DEFAULT_FROM_EMAIL
    invitation = Invitation.objects.get()
    expected = timezone.now() + timedelta(days=7)
    assert abs((invitation.expires_at - expected).total_seconds()) < 60  # 7 days by default
    page = client.get("/t/acme/members/").content.decode()
    assert 'data-email="lee@acme.example" data-state="pending"' in page and "expires" in page
    link = _link("lee@acme.example")
    assert Client().get(link).status_code == 200
    assert _accept(link, "ada") == 400  # a taken username is refused, the invitation stays usable
    assert _accept(link, "lee") == 302
    assert Membership.objects.get(tenant=tenant_a, user__username="lee").role == "staff"
    assert 'data-state="accepted"' in client.get("/t/acme/members/").content.decode()
    assert _accept(link, "lee2") == 410 and not User.objects.filter(username="lee2").exists()


def test_an_expired_invitation_fails_and_sending_it_again_makes_a_new_link(tenant_a):
    client = _client(make_member(tenant_a, role="admin", username="ada"))
    client.post("/t/acme/members/", {"who": "lee@acme.example", "role": "staff"})
    first = _link("lee@acme.example")
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(first).status_code == 410 and "expired" in Client().get(first).content.decode()
    assert 'data-state="expired"' in client.get("/t/acme/members/").content.decode()
    invitation = Invitation.objects.get()
    client.post(f"/t/acme/invitations/{invitation.public_id}/", {"action": "resend"})
    second = _link("lee@acme.example")
    assert second != first and len(mail.outbox) == 2
    assert Client().get(first).status_code == 404  # the earlier link no longer works at all
    assert _accept(second, "lee") == 302
    actions = list(MembershipEvent.objects.for_tenant(tenant_a).order_by("pk").values_list("action", flat=True))
    assert actions == ["invitation_sent", "invitation_resent", "invitation_accepted"]


def test_a_revoked_invitation_fails_at_once(tenant_a):
    client = _client(make_member(tenant_a, role="admin", username="ada"))
    client.post("/t/acme/members/", {"who": "lee@acme.example", "role": "admin"})
    link = _link("lee@acme.example")
    client.post(f"/t/acme/invitations/{Invitation.objects.get().public_id}/", {"action": "revoke"})
    assert _accept(link, "lee") == 410 and not User.objects.filter(username="lee").exists()
    assert MembershipEvent.objects.for_tenant(tenant_a).filter(action="invitation_revoked").exists()


def test_an_invitation_of_one_tenant_is_neither_seen_nor_changed_by_another_tenants_admin(tenant_a, tenant_b):
    _client(make_member(tenant_a, role="admin", username="ada")).post(
        "/t/acme/members/", {"who": "lee@acme.example", "role": "staff"}
    )
    invitation = Invitation.objects.get()
    globex = _client(make_member(tenant_b, role="admin", username="gus"))
    assert "lee@acme.example" not in globex.get("/t/globex/members/").content.decode()
    for url in (f"/t/globex/invitations/{invitation.public_id}/", f"/t/acme/invitations/{invitation.public_id}/"):
        assert globex.post(url, {"action": "revoke"}).status_code == 404
    assert Invitation.objects.get().state == "pending"
    assert _accept(_link("lee@acme.example"), "lee") == 302  # and its link joins acme only
    lee = User.objects.get(username="lee")
    assert list(Membership.objects.filter(user=lee).values_list("tenant__slug", flat=True)) == ["acme"]


def test_a_username_with_no_account_is_refused_with_the_way_to_invite(tenant_a):
    client = _client(make_member(tenant_a, role="admin", username="ada"))
    page = client.post("/t/acme/members/", {"who": "lee", "role": "staff"}, follow=True).content.decode()
    assert "invite them by e-mail address" in page and not mail.outbox


# --- password reset -----------------------------------------------------------------------------------------------
def test_the_sign_in_page_links_a_password_reset_that_mails_a_working_link(db):
    User.objects.create_user("ada", email="ada@acme.example", password="an-old-pass-phrase-1")
    assert 'href="/accounts/password_reset/"' in Client().get("/accounts/login/").content.decode()
    response = Client().post("/accounts/password_reset/", {"email": "ADA@acme.example"})
    assert response.status_code == 302 and response.url == "/accounts/password_reset/done/"
    link = _link("ada@acme.example")
    browser = Client()
    form = browser.get(link).url  # Django moves the token into the session
    assert browser.post(form, {"new_password1": PASSWORD, "new_password2": PASSWORD}).status_code == 302
    assert User.objects.get(username="ada").check_password(PASSWORD)
    assert "no longer works" in Client().get(link, follow=True).content.decode()  # the link works once


def test_a_reset_for_an_unknown_address_looks_the_same_and_sends_nothing(db):
    User.objects.create_user("ada", email="ada@acme.example", password="an-old-pass-phrase-1")
    known = Client().post("/accounts/password_reset/", {"email": "ada@acme.example"}, follow=True)
    unknown = Client().post("/accounts/password_reset/", {"email": "nobody@acme.example"}, follow=True)
    assert known.status_code == unknown.status_code == 200
    pages = [re.sub(r'"X-CSRFToken": "\w+"', "", r.content.decode()) for r in (known, unknown)]
    assert pages[0] == pages[1] and "If an account has that address" in pages[0]
    assert [m.to for m in mail.outbox] == [["ada@acme.example"]]


def test_password_resets_are_throttled_like_sign_in(db, settings):
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("ada", email="ada@acme.example", password="an-old-pass-phrase-1")
    codes = [Client().post("/accounts/password_reset/", {"email": "ada@acme.example"}).status_code for _ in range(5)]
    assert codes == [302, 302, 302, 429, 429]
    assert len(mail.outbox) == 3
    # An unknown address is throttled the same way: the answer never tells the two apart.
    codes = [Client().post("/accounts/password_reset/", {"email": f"x{n}@e.example"}).status_code for n in range(2)]
    assert codes == [429, 429]  # the client address reached the limit


# --- API keys -----------------------------------------------------------------------------------------------------
def test_a_tenant_admin_creates_a_read_key_on_the_page_an_agent_uses_it_and_a_revoked_key_fails_at_once(tenant_a):
    ada = make_member(tenant_a, role="admin", username="ada")
    client = _client(ada)
    page = client.post("/t/acme/keys/", {"name": "support bot", "scope": "read", "acts_for": ["tenant"]}, follow=True)
    html = page.content.decode()
    assert raw_not_again(client)
    raw = re.search(r'id="new-key-value">(rag_[\w-]+)<', html).group(1)
    key = ApiKey.objects.get(name="support bot")
    assert key.scope == "read" and key.acts_for == ["tenant"] and key.created_by == ada
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    assert agent.get("/api/v1/tenants/acme/").status_code == 200
    assert agent.post("/api/v1/tenants/acme/retrieve/", {"query": "refunds"}, format="json").status_code == 200
    assert agent.delete("/api/v1/tenants/acme/sources/00000000-0000-0000-0000-000000000000/").status_code == 403
    # Each door's call, copyable with the new key: REST (Api-Key), MCP (Bearer), the OpenAI base URL.
    assert f"Authorization: Api-Key {raw}" in html and f'"Authorization": "Bearer {raw}"' in html
    assert 'base_url="http://testserver/v1"' in html and "/mcp/" in html
    listed = client.get("/t/acme/keys/").content.decode()
    assert raw not in listed and key.prefix in listed  # shown once, listed by its prefix
    assert "Authorization: Bearer &lt;key&gt;" in listed
    assert f'data-prefix="{key.prefix}" data-state="active"' in listed
    client.post(f"/t/acme/keys/{key.public_id}/revoke/")
    assert agent.get("/api/v1/tenants/acme/").status_code == 401  # the very next request
    actions = list(MembershipEvent.objects.for_tenant(tenant_a).order_by("pk").values_list("action", "detail"))
    assert [a for a, _ in actions] == ["key_created", "key_revoked"] and "scope read" in actions[0][1]


def test_an_expired_key_fails_and_a_past_expiry_is_refused(tenant_a):
    client = _client(make_member(tenant_a, role="admin", username="ada"))
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    page = client.post("/t/acme/keys/", {"name": "old", "scope": "read", "expires": yesterday})
    assert page.status_code == 400 and "in the past" in page.content.decode() and not ApiKey.objects.exists()
    key, raw = api_key_issue(tenant=tenant_a, name="short", expires_at=timezone.now() + timedelta(hours=1))
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    assert agent.get("/api/v1/tenants/acme/").status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert agent.get("/api/v1/tenants/acme/").status_code == 401
    assert 'data-state="expired"' in client.get("/t/acme/keys/").content.decode()


def test_keys_through_the_api_for_a_key_that_manages_keys_and_never_across_tenants(tenant_a, tenant_b):
    manager = APIClient()
    manager.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, acts_for=['all'])[1]}")
    created = manager.post("/api/v1/tenants/acme/keys/", {"name": "webui", "scope": "read"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["key"].startswith("rag_") and body["scope"] == "read" and body["acts_for"] == ["tenant"]
    listed = manager.get("/api/v1/tenants/acme/keys/").json()
    assert {k["name"] for k in listed} == {"", "webui"} and all("key" not in k for k in listed)
    webui = APIClient()
    webui.credentials(HTTP_AUTHORIZATION=f"Api-Key {body['key']}")
    assert webui.get("/api/v1/tenants/acme/keys/").status_code == 403  # a read key manages nothing
    assert webui.get("/api/v1/tenants/globex/").status_code == 404  # one tenant's key never opens another
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_b, acts_for=['all'])[1]}")
    assert other.delete(f"/api/v1/tenants/acme/keys/{body['id']}/").status_code == 404
    assert other.delete(f"/api/v1/tenants/globex/keys/{body['id']}/").status_code == 404
    assert manager.delete(f"/api/v1/tenants/acme/keys/{body['id']}/").status_code == 204
    assert webui.get("/api/v1/tenants/acme/").status_code == 401
    events = MembershipEvent.objects.for_tenant(tenant_a).filter(action__startswith="key_").order_by("pk")
    assert [e.action for e in events][-2:] == ["key_created", "key_revoked"] and "by API key" in events.last().detail
