"""Issue 63's SCIM figures: a provider's full sync of N users and G groups (each user looked up by userName, then
created, as Okta and Entra ID do; each group created with its members), then a PATCH that deactivates one user
(deprovisioning: membership, groups, keys, agent sessions, account) and the lookup of one user, p50 over repeats.
Through Django's test client (the whole request path, in this process, SQLite), this machine.

    python bench/identity.py [--users 5000] [--groups 200] [--repeats 50]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from _django import setup

SCIM = "application/scim+json"


def main() -> None:
    args = sys.argv[1:]
    users = int(args[args.index("--users") + 1]) if "--users" in args else 5000
    groups = int(args[args.index("--groups") + 1]) if "--groups" in args else 200
    repeats = int(args[args.index("--repeats") + 1]) if "--repeats" in args else 50
    setup()
    from django.test import Client

    from identity.scim import token_issue
    from tenants.services import tenant_create

    tenant = tenant_create(slug="bench-idp", name="Bench")
    token = token_issue(tenant=tenant)[1]
    from django.conf import settings

    client, base = Client(HTTP_HOST="localhost"), f"/api/v1/tenants/{tenant.slug}/scim/v2/"
    assert "localhost" in settings.ALLOWED_HOSTS or "*" in settings.ALLOWED_HOSTS, settings.ALLOWED_HOSTS
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    def call(method: str, path: str, body: object = None):  # type: ignore[no-untyped-def]
        if method == "get":
            return client.get(base + path, **auth)
        return getattr(client, method)(base + path, json.dumps(body), content_type=SCIM, **auth)

    started = time.perf_counter()
    ids = []
    for n in range(users):
        name = f"person{n:05d}"
        assert call("get", f'Users?filter=userName eq "{name}"').json()["totalResults"] == 0
        made = call("post", "Users", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": name,
                                      "externalId": f"00u{n}", "name": {"givenName": "P", "familyName": str(n)},
                                      "emails": [{"value": f"{name}@example.com", "primary": True}]})  # fmt: skip
        ids.append(made.json()["id"])
    users_s = time.perf_counter() - started
    for g in range(groups):
        members = [{"value": ids[i]} for i in range(g, users, groups)]
        assert call("post", "Groups", {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                                       "displayName": f"Team {g}", "members": members}).status_code == 201  # fmt: skip
    full_s = time.perf_counter() - started
    lookups, patches = [], []
    for n in range(repeats):
        t = time.perf_counter()
        assert call("get", f'Users?filter=userName eq "person{n * 7:05d}"').json()["totalResults"] == 1
        lookups.append(time.perf_counter() - t)
        t = time.perf_counter()
        off = call("patch", f"Users/{ids[n * 7]}", {"schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
                                                     "Operations": [{"op": "replace", "path": "active",
                                                                     "value": False}]})  # fmt: skip
        patches.append(time.perf_counter() - t)
        assert off.json()["active"] is False
    t = time.perf_counter()
    page = call("get", "Users?startIndex=1&count=500").json()
    page_s = time.perf_counter() - t
    print(
        f"full sync: {users} users (a lookup and a create each) in {users_s:.1f} s, then {groups} groups with "
        f"their members: {full_s:.1f} s in all ({full_s / (users + groups) * 1000:.1f} ms a resource)"
    )
    print(
        f"lookup by userName p50 {statistics.median(lookups) * 1000:.1f} ms; PATCH active=false (deprovision) "
        f"p50 {statistics.median(patches) * 1000:.1f} ms, max {max(patches) * 1000:.1f} ms ({repeats} each)"
    )
    print(f"a page of {page['itemsPerPage']} of {page['totalResults']} users: {page_s * 1000:.0f} ms")


if __name__ == "__main__":
    main()
