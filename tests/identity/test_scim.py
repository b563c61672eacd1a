"""SCIM 2.0 provisioning (issue 63): the company's identity provider makes, changes and removes members and groups
of one tenant, and a leaver loses access at their very next request, on every door."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.core.management import call_command
from django.test import Client

from agent_sessions import services as sessions
from agent_sessions.models import AgentSession
from identity.models import ScimUser
from identity.scim import token_issue
from mcp_tools.http import Refused as McpRefused
from mcp_tools.http import authenticate as mcp_authenticate
from tenants.models import ApiKey, Group, Membership, MembershipEvent
from tenants.services import api_key_issue
from tests.factories import make_folder_source, make_member

SCIM = "application/scim+json"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


class Scim:
    """A provider's calls to one tenant's SCIM base URL, with its bearer token."""

    def __init__(self, slug: str, token: str) -> None:
        self.base, self.client, self.token = f"/api/v1/tenants/{slug}/scim/v2/", Client(), token

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token or self.token}"}
        if method == "get":
            return self.client.get(self.base + path, **headers)
        data = json.dumps(body) if body is not None and not isinstance(body, str) else body
        return getattr(self.client, method)(self.base + path, data=data, content_type=SCIM, **headers)


@pytest.fixture
def scim(tenant_a) -> Scim:  # type: ignore[no-untyped-def]
    return Scim(tenant_a.slug, token_issue(tenant=tenant_a, name="okta")[1])


def _user(name: str, **extra: Any) -> dict[str, Any]:
    return {"schemas": [USER], "userName": name, "externalId": f"ext-{name}", "active": True,
            "name": {"givenName": name.title(), "familyName": "Doe"},
            "emails": [{"value": f"{name}@acme.example", "primary": True}], **extra}  # fmt: skip


def test_a_provisioned_user_is_a_member_with_their_groups_and_reads_back_in_scims_shape(scim, tenant_a):
    made = scim.call("post", "Users", _user("ana"))
    assert made.status_code == 201 and made["Content-Type"].startswith(SCIM), made.content
    user = made.json()
    assert user["userName"] == "ana" and user["active"] is True and user["externalId"] == "ext-ana"
    assert made["Location"].endswith(f"/scim/v2/Users/{user['id']}")
    account = Account.objects.get(username="ana")
    assert Membership.objects.filter(tenant=tenant_a, user=account, role="staff").exists()
    assert not account.has_usable_password()  # signs in through the provider
    group = scim.call("post", "Groups", {"schemas": [GROUP], "displayName": "Support Team",
                                         "members": [{"value": user["id"]}]})  # fmt: skip
    assert group.status_code == 201, group.content
    assert Group.objects.get(tenant=tenant_a, name="support-team").members.filter(pk=account.pk).exists()
    again = scim.call("get", f"Users/{user['id']}").json()
    assert again["groups"][0]["display"] == "Support Team" and again["emails"][0]["value"] == "ana@acme.example"
    found = scim.call("get", 'Users?filter=userName eq "ANA"').json()
    assert found["totalResults"] == 1 and found["Resources"][0]["id"] == user["id"]
    assert scim.call("get", 'Users?filter=userName eq "bob"').json()["totalResults"] == 0
    assert scim.call("get", 'Groups?filter=displayName eq "Support Team"').json()["totalResults"] == 1
    # PATCH a group's members: remove, then add (as Okta and Entra ID send them)
    removed = scim.call("patch", f"Groups/{group.json()['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "remove", "path": f'members[value eq "{user["id"]}"]'}]})  # fmt: skip
    assert removed.status_code == 200, removed.content
    assert not Group.objects.get(tenant=tenant_a, name="support-team").members.exists()
    added = scim.call("patch", f"Groups/{group.json()['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "add", "path": "members", "value": [{"value": user["id"]}]}]})  # fmt: skip
    assert added.status_code == 200 and Group.objects.get(name="support-team").members.count() == 1
    assert MembershipEvent.objects.filter(tenant=tenant_a, username="ana", action="provisioned").exists()


def test_pages_of_users_and_scims_errors(scim, tenant_a):
    for n in range(5):
        assert scim.call("post", "Users", _user(f"user{n}")).status_code == 201
    page = scim.call("get", "Users?startIndex=2&count=2").json()
    assert page["totalResults"] == 5 and page["startIndex"] == 2 and page["itemsPerPage"] == 2
    assert [r["userName"] for r in page["Resources"]] == ["user1", "user2"]
    taken = scim.call("post", "Users", _user("user1"))
    assert taken.status_code == 409 and taken.json()["scimType"] == "uniqueness" and taken.json()["schemas"] == [ERROR]
    bad_filter = scim.call("get", "Users?filter=userName eq")
    assert bad_filter.status_code == 400 and bad_filter.json()["scimType"] == "invalidFilter"
    assert scim.call("post", "Users", "{not json").status_code == 400
    assert scim.call("post", "Users", {"schemas": [USER]}).status_code == 400  # no userName
    missing = scim.call("get", "Users/7f0a3c4e-0000-4000-8000-000000000000")
    assert missing.status_code == 404 and missing.json()["schemas"] == [ERROR]
    assert scim.call("get", "Users/not-an-id").status_code == 404
    hostile = scim.call("post", "Users", _user("ana/../x<script>"))
    assert hostile.status_code == 400 and hostile.json()["scimType"] == "invalidValue"
    assert scim.call("post", "Groups", {"schemas": [GROUP], "displayName": "%%%"}).status_code == 400
    assert scim.call("post", "Users", ["not", "an", "object"]).status_code == 400
    assert scim.call("get", "Users?startIndex=x").status_code == 400
    assert scim.call("get", "Nothing/here").status_code == 404
    assert scim.call("get", "ServiceProviderConfig").json()["patch"]["supported"] is True
    assert {r["id"] for r in scim.call("get", "ResourceTypes").json()["Resources"]} == {"User", "Group"}
    assert scim.call("get", f"Schemas/{USER}").json()["id"] == USER


def test_a_username_another_account_holds_is_never_taken_over(scim, tenant_a, tenant_b):
    make_member(tenant_b, username="carol")
    refused = scim.call("post", "Users", _user("carol"))
    assert refused.status_code == 409 and "another account" in refused.json()["detail"]
    assert not Membership.objects.filter(tenant=tenant_a, user__username="carol").exists()
    assert not ScimUser.objects.filter(user_name="carol").exists()


def test_a_group_never_takes_in_another_tenants_user(scim, tenant_a, tenant_b):
    theirs = Scim(tenant_b.slug, token_issue(tenant=tenant_b)[1])
    stranger = theirs.call("post", "Users", _user("zoe")).json()
    refused = scim.call("post", "Groups", {"schemas": [GROUP], "displayName": "Ops",
                                           "members": [{"value": stranger["id"]}]})  # fmt: skip
    assert refused.status_code == 400 and "No user" in refused.json()["detail"]
    assert not Group.objects.filter(tenant=tenant_a, name="ops").exists()
    assert scim.call("get", f"Users/{stranger['id']}").status_code == 404  # another tenant's user is not found
    assert scim.call("get", "Users").json()["totalResults"] == 0


def test_only_the_tenants_scim_token_gets_in(scim, tenant_a, tenant_b, settings):
    """Every SCIM route × {no credentials, a wrong token, a revoked token, another tenant's SCIM token, the
    tenant's read and write API keys, an admin's session}: 401 in SCIM's shape, nothing made."""
    from django.urls import reverse

    from identity.scim import token_revoke

    settings.RAG_API_KEY_FAILURE_LIMIT = 1000  # every refusal here is a 401 (a guessing address: 429, below)
    other = token_issue(tenant=tenant_b)[1]
    revoked_row, revoked = token_issue(tenant=tenant_a)
    token_revoke(revoked_row)
    read_key = api_key_issue(tenant=tenant_a, scope="read")[1]
    write_key = api_key_issue(tenant=tenant_a, scope="write")[1]
    routes = ["Users", "Users/7f0a3c4e-0000-4000-8000-000000000000", "Groups", "ServiceProviderConfig",
              "ResourceTypes", "Schemas"]  # fmt: skip
    assert reverse("identity:scim-users", args=["acme"]) == scim.base + "Users"
    for path in routes:
        for token in ("", "scim_wrong", revoked, other, read_key, write_key):
            for method in ("get", "post", "put", "patch", "delete"):
                response = scim.call(method, path, _user("mallory"), token=token or " ")
                assert response.status_code == 401, (path, method, token[:6], response.content)
                assert response.json()["schemas"] == [ERROR]
    admin = make_member(tenant_a, role="admin", username="root")
    session = Client()
    session.force_login(admin)
    assert session.post(scim.base + "Users", json.dumps(_user("mallory")), content_type=SCIM).status_code == 401
    assert not Account.objects.filter(username="mallory").exists()
    assert scim.call("get", "Users").status_code == 200
    settings.RAG_API_KEY_FAILURE_LIMIT = 3  # an address guessing tokens is held back, as for API keys
    codes = [scim.call("get", "Users", token=f"scim_guess{n}").status_code for n in range(5)]
    assert codes[-1] == 429 and scim.call("get", "Users").status_code == 200


def test_deprovisioning_ends_every_way_in_at_the_next_request(scim, tenant_a, tmp_path):
    """`active: false`: the person's browser session, their own key, a key acting for them, their agent session
    and the REST/OpenAI doors all refuse at the next request; audited; `active: true` lets them back with nothing
    of before but what the directory gives."""
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"faq.md": "# FAQ\n\nThe office opens at 9.\n"})
    user = scim.call("post", "Users", _user("dave")).json()
    account = Account.objects.get(username="dave")
    browser = Client()
    browser.force_login(account)
    assert browser.get(f"/t/{tenant_a.slug}/chat/").status_code == 200
    own_key = api_key_issue(tenant=tenant_a, created_by=account, scope="read")[1]
    acting = api_key_issue(tenant=tenant_a, scope="read", acts_for=["user:dave"])[1]
    everyone = api_key_issue(tenant=tenant_a, scope="read")[1]
    agent = sessions.session_create(tenant=tenant_a, user=account)
    retrieve = f"/api/v1/tenants/{tenant_a.slug}/retrieve/"

    def status(key: str) -> int:
        return Client().post(retrieve, {"query": "office"}, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Api-Key {key}").status_code  # fmt: skip

    assert status(own_key) == 200 and status(acting) == 200
    off = scim.call("patch", f"Users/{user['id']}", {"schemas": [PATCH], "Operations": [
        {"op": "replace", "path": "active", "value": False}]})  # fmt: skip
    assert off.status_code == 200 and off.json()["active"] is False
    page = browser.get(f"/t/{tenant_a.slug}/chat/")
    assert page.status_code == 302 and "/login" in page["Location"]  # the session ended
    assert status(own_key) == 401 and status(acting) == 401 and status(everyone) == 200
    openai = Client().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {own_key}")
    assert openai.status_code == 401
    for key in (own_key, acting):  # the MCP door (mcp_tools/http.py reads the key as every door does)
        with pytest.raises(McpRefused) as refused:
            mcp_authenticate({"type": "http", "client": ("10.0.0.7", 5000), "headers": [
                (b"host", b"testserver"), (b"authorization", f"Api-Key {key}".encode())]})  # fmt: skip
        assert refused.value.status == 401
    assert AgentSession.objects.get(pk=agent.pk).ended_at is not None
    assert not Membership.objects.filter(tenant=tenant_a, user=account).exists()
    assert not Account.objects.get(pk=account.pk).is_active
    event = MembershipEvent.objects.get(tenant=tenant_a, username="dave", action="deprovisioned")
    assert "2 keys revoked" in event.detail and "1 agent sessions ended" in event.detail
    assert scim.call("get", f"Users/{user['id']}").json()["active"] is False  # the provider can read it back
    on = scim.call("put", f"Users/{user['id']}", _user("dave"))
    assert on.status_code == 200 and on.json()["active"] is True
    assert Membership.objects.filter(tenant=tenant_a, user=account).exists()
    assert ApiKey.objects.filter(tenant=tenant_a, revoked_at__isnull=True).count() == 1  # `everyone`'s alone


def test_a_deleted_user_is_gone_and_a_new_one_with_the_name_inherits_nothing(scim, tenant_a, tmp_path):
    from knowledge.models import Document
    from knowledge.services import document_set_access

    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"pay.md": "# Pay\n\nSalaries.\n"})
    first = scim.call("post", "Users", _user("erin")).json()
    document = Document.objects.get(source=source)
    document_set_access(tenant=tenant_a, document=document, access=["user:erin"])
    assert scim.call("delete", f"Users/{first['id']}").status_code == 204
    assert not Account.objects.filter(username="erin").exists()
    assert scim.call("get", f"Users/{first['id']}").status_code == 404
    document.refresh_from_db()
    assert "user:erin" not in document.access  # the next erin does not see the old one's documents
    second = scim.call("post", "Users", _user("erin"))
    assert second.status_code == 201 and second.json()["id"] != first["id"]


def test_create_scim_token_prints_the_token_last(tenant_a, capsys):
    call_command("create_scim_token", tenant_a.slug, "--name", "entra")
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert token.startswith("scim_")
    assert Scim(tenant_a.slug, token).call("get", "Users").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_scim2_tester_finds_the_endpoints_compliant(live_server):
    """scim2-tester (a compliance checker written by others) over real HTTP: discovery, create, read, replace,
    PATCH and delete of Users and Groups. What it reports apart from success is listed, with why, in
    docs/identity.md; a check that errs fails this test."""
    import httpx2
    from scim2_client.engines.httpx2 import SyncSCIMClient
    from scim2_tester import check_server

    from tests.factories import make_tenant

    tenant = make_tenant(slug="initech", name="Initech")
    token = token_issue(tenant=tenant)[1]
    base = f"{live_server.url}/api/v1/tenants/initech/scim/v2/"
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        results = check_server(SyncSCIMClient(http), raise_exceptions=False)
    report = [(r.status.name, r.resource_type, r.title, r.reason) for r in results]
    for line in report:
        print(*line)
    failed = {(r[1], r[2]) for r in report if r[0] in ("ERROR", "CRITICAL", "DEVIATION")}
    # Deliberate (docs/identity.md): a userName is the member's username, a principal access lists and keys name,
    # so it is not renamed in place; a member's `display` in a group is the member's userName, not what was sent.
    known = {("User", "object_replacement"), ("User", "check_replace_attribute"), ("Group", "check_add_attribute"),
             ("Group", "check_replace_attribute")}  # fmt: skip
    assert len(report) > 100 and failed <= known, failed - known
    assert sum(1 for r in report if r[0] == "SUCCESS") >= 105


def test_an_admin_makes_a_scim_token_on_the_page_sees_it_once_and_revokes_it(scim, tenant_a):
    import re

    from identity.models import ScimToken

    admin = make_member(tenant_a, role="admin", username="root")
    page = Client()
    page.force_login(admin)
    made = page.post(f"/t/{tenant_a.slug}/keys/scim/", {"name": "entra"}, follow=True)
    raw = re.search(r'id="new-scim-token">(scim_[^<]+)<', made.content.decode())
    assert made.status_code == 200 and raw is not None and "/scim/v2/" in made.content.decode()
    assert "new-scim-token" not in page.get(f"/t/{tenant_a.slug}/keys/scim/").content.decode()  # shown once
    assert Scim(tenant_a.slug, raw.group(1)).call("get", "Users").status_code == 200
    token = ScimToken.objects.get(tenant=tenant_a, name="entra")
    assert page.post(f"/t/{tenant_a.slug}/keys/scim/{token.public_id}/revoke/").status_code == 302
    assert Scim(tenant_a.slug, raw.group(1)).call("get", "Users").status_code == 401
    assert "keys/scim/" in page.get(f"/t/{tenant_a.slug}/keys/").content.decode()  # linked from the keys page
