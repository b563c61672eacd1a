"""Groups from the company's directory in the access matrix (issue 63): the restricted `hr-files` of the access
tests' company (tests/company.py) opened to groups SCIM provisioned instead of the hand-made `hr` — `payroll`
(kept), `auditors` (provisioned, then deleted by the provider), `board` (deleted, then provisioned again under the
same name with someone else in it). Every door of tests/test_permissions.py is read as each identity: a member and
a key of a provisioned group see the document; a key that acted for a deprovisioned group and a member of the
re-provisioned one see nothing of it, on any door."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from identity.scim import token_issue
from knowledge import services
from knowledge.index import indexer
from tenants.services import api_key_issue
from tests.company import CANARY, CommittingAPIClient
from tests.test_permissions import _reads

USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
SEES = {
    "member-of-provisioned": True,
    "key-of-provisioned": True,
    "key-of-deprovisioned": False,
    "member-of-reprovisioned": False,
}


def _directory(company: dict[str, Any]) -> dict[str, Any]:
    tenant = company["tenant"]
    scim, auth = Client(), {"HTTP_AUTHORIZATION": f"Bearer {token_issue(tenant=tenant, name='okta')[1]}"}

    def call(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = getattr(scim, method)(
            f"/api/v1/tenants/{tenant.slug}/scim/v2/{path}",
            data=json.dumps(body or {}),
            content_type="application/scim+json",
            **auth,
        )
        assert response.status_code in (200, 201, 204), response.content
        return response.json() if response.content else None

    quinn = call("post", "Users", {"schemas": [USER], "userName": "quinn"})
    uma = call("post", "Users", {"schemas": [USER], "userName": "uma"})
    made = {
        name: call("post", "Groups", {"schemas": [GROUP], "displayName": name, "members": [{"value": quinn["id"]}]})
        for name in ("Payroll", "Auditors", "Board")
    }
    services.source_set_access(
        tenant=tenant, source=company["hr_source"], access=["group:payroll", "group:auditors", "group:board"]
    )
    keys = {
        "key-of-provisioned": api_key_issue(tenant=tenant, scope="read", acts_for=["group:payroll"])[1],
        "key-of-deprovisioned": api_key_issue(tenant=tenant, scope="read", acts_for=["group:auditors"])[1],
    }
    call("delete", f"Groups/{made['Auditors']['id']}")
    call("delete", f"Groups/{made['Board']['id']}")
    call("post", "Groups", {"schemas": [GROUP], "displayName": "Board", "members": [{"value": uma["id"]}]})
    indexer.drain()
    return {"keys": keys, "users": {"member-of-provisioned": quinn["userName"], "member-of-reprovisioned": "uma"}}


@pytest.mark.parametrize("identity", list(SEES))
def test_provisioned_deprovisioned_and_reprovisioned_groups_on_every_door(company, identity):
    from django.contrib.auth import get_user_model

    directory = _directory(company)
    client: APIClient = CommittingAPIClient()
    if identity in directory["users"]:
        client.force_login(get_user_model().objects.get(username=directory["users"][identity]))
        reads = _reads(company, client, "staff-outside")  # a session: the doors a person's browser has
    else:
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {directory['keys'][identity]}")
        company["keys"]["probe"] = directory["keys"][identity]
        reads = _reads(company, client, "probe")  # a key: its doors, Dify's and the OpenAI door's included
    sees = SEES[identity]
    for door, (status, body) in reads.items():
        assert status < 500, (door, status, body[:300])
        if not sees:
            assert CANARY not in body, door
    assert (CANARY in reads["answer"][1]) is sees
    assert ("salaries.md" in reads["retrieve"][1]) is sees
    assert reads["document"][0] == (200 if sees else 404)
