"""Issue 63's sign-in figures: what signing in through the company's OpenID Provider costs over a local password,
p50 over repeats, and from a provider's deprovisioning to the first refused request on each door.

The provider is panva's oidc-provider (tests/identity/oidc_provider, `npm ci` there once) under node on this
machine; the browser is played by httpx (the provider's own login and consent pages, their forms filled) and by
Django's test client (ragsite's whole request path, in this process, SQLite). ragsite's own share is the time spent
in its two requests (the redirect to the provider, and the callback: code exchange, ID token checks, UserInfo,
membership); the rest is the provider's pages. The local sign-in is Django's login form with the settings' password
hasher (PBKDF2-SHA256, Django 5.2's 1,000,000 iterations).

    python bench/sign_in.py [--repeats 30]
"""

from __future__ import annotations

import html
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlparse

import httpx
from _django import setup

ROOT = Path(__file__).resolve().parent.parent
PROVIDER_DIR = ROOT / "tests" / "identity" / "oidc_provider"
FORM_RE = re.compile(r"<form[^>]*action=\"([^\"]+)\"[^>]*>(.*?)</form>", re.S)
INPUT_RE = re.compile(r"<input\b[^>]*>", re.S)
ATTRIBUTE_RE = re.compile(r"(name|value)=\"([^\"]*)\"")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def provider(redirect_uri: str, accounts: dict[str, dict[str, object]]) -> tuple[subprocess.Popen[bytes], str]:
    if not (PROVIDER_DIR / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, check=True, capture_output=True)
    port = _port()
    env = {
        **os.environ,
        "PORT": str(port),
        "CLIENT_ID": "bench",
        "CLIENT_SECRET": "bench-secret",
        "REDIRECT_URIS": redirect_uri,
        "ACCOUNTS": json.dumps(accounts),
    }
    process = subprocess.Popen(
        ["node", "provider.mjs"], cwd=PROVIDER_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    issuer = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1)
            return process, issuer
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("oidc-provider did not start")


def sso_sign_in(client, browser: httpx.Client, login: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(the whole sign-in's seconds, ragsite's own share) for one person, through the provider's pages."""
    started = time.perf_counter()
    t = time.perf_counter()
    response = client.get("/sso/bench/okta/", HTTP_HOST="localhost")
    ours = time.perf_counter() - t
    url = response["Location"]
    while True:
        page = browser.get(url)
        if page.is_redirect:
            url = urljoin(url, page.headers["location"])
            if urlparse(url).netloc == "localhost":
                break
            continue
        action, inner = FORM_RE.search(page.text).groups()  # the login form, then the consent form
        tags = [dict(ATTRIBUTE_RE.findall(tag)) for tag in INPUT_RE.findall(inner)]
        fields = {tag["name"]: html.unescape(tag.get("value", "")) for tag in tags if "name" in tag}
        fields.update({"login": login, "password": "any"} if "login" in fields else {})
        page = browser.post(urljoin(url, html.unescape(action)), data=fields)
        assert page.is_redirect, (page.status_code, fields, page.text[:2000])
        url = urljoin(url, page.headers["location"])
        if urlparse(url).netloc == "localhost":
            break
    parsed = urlparse(url)
    t = time.perf_counter()
    done = client.get(f"{parsed.path}?{parsed.query}", HTTP_HOST="localhost")
    ours += time.perf_counter() - t
    assert done.status_code == 302 and "/t/bench/" in done["Location"], (done.status_code, done.content[:300])
    return time.perf_counter() - started, ours


def deprovision_to_refusal(tenant) -> list[str]:  # type: ignore[no-untyped-def]
    """The provider deactivates someone over SCIM (PATCH active=false); then the very next request on each door."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from agent_sessions import services as sessions
    from agent_sessions.models import AgentSession
    from identity.scim import token_issue
    from mcp_tools.http import Refused, authenticate
    from tenants.services import api_key_issue

    scim, base = Client(), f"/api/v1/tenants/{tenant.slug}/scim/v2/"
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {token_issue(tenant=tenant)[1]}", "HTTP_HOST": "localhost"}
    made = scim.post(
        base + "Users",
        json.dumps({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": "leaver"}),
        content_type="application/scim+json",
        **bearer,
    )
    account = get_user_model().objects.get(username="leaver")
    browser = Client()
    browser.force_login(account)
    own = api_key_issue(tenant=tenant, created_by=account, scope="read")[1]
    acting = api_key_issue(tenant=tenant, scope="read", acts_for=["user:leaver"])[1]
    agent = sessions.session_create(tenant=tenant, user=account)
    started = time.perf_counter()
    patch = {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{"op": "replace", "path": "active", "value": False}],
    }
    assert (
        scim.patch(
            base + f"Users/{made.json()['id']}", json.dumps(patch), content_type="application/scim+json", **bearer
        ).json()["active"]
        is False
    )
    lines = [
        f"SCIM PATCH active=false answered in {(time.perf_counter() - started) * 1000:.0f} ms; "
        "then, each door's next request:"
    ]

    def door(name: str, call) -> None:  # type: ignore[no-untyped-def]
        status = call()
        lines.append(f"  {name}: {status} at {(time.perf_counter() - started) * 1000:.0f} ms after the PATCH began")

    retrieve = f"/api/v1/tenants/{tenant.slug}/retrieve/"
    for label, key in (("REST retrieve, their own key", own), ("REST retrieve, a key acting for them", acting)):
        door(
            label,
            lambda key=key: (
                Client()
                .post(
                    retrieve,
                    {"query": "x"},
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Api-Key {key}",
                    HTTP_HOST="localhost",
                )
                .status_code
            ),
        )
    door(
        "OpenAI door /v1/models",
        lambda: Client().get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {acting}", HTTP_HOST="localhost").status_code,
    )

    def mcp() -> int:
        try:
            authenticate(
                {
                    "type": "http",
                    "client": ("127.0.0.1", 1),
                    "headers": [(b"host", b"localhost"), (b"authorization", f"Api-Key {own}".encode())],
                }
            )
        except Refused as refused:
            return refused.status
        return 200

    door("MCP door", mcp)
    door(
        "pages (their browser session)",
        lambda: browser.get(f"/t/{tenant.slug}/chat/", HTTP_HOST="localhost").status_code,
    )
    door("their agent session", lambda: "ended" if AgentSession.objects.get(pk=agent.pk).ended_at else "open")
    return lines


def main() -> None:
    args = sys.argv[1:]
    repeats = int(args[args.index("--repeats") + 1]) if "--repeats" in args else 30
    setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from core.sealed import seal
    from identity.models import SECRET_PURPOSE, Provider
    from tenants.services import membership_add, tenant_create

    tenant = tenant_create(slug="bench", name="Bench")
    accounts = {
        f"p{n:03d}": {
            "preferred_username": f"p{n:03d}",
            "email": f"p{n:03d}@bench.example",
            "email_verified": True,
            "groups": ["engineering"],
        }
        for n in range(repeats)
    }
    process, issuer = provider("http://localhost/sso/bench/okta/callback/", accounts)
    try:
        Provider.objects.create(
            tenant=tenant,
            name="Okta",
            slug="okta",
            issuer=issuer,
            client_id="bench",
            secret_sealed=seal("bench-secret", purpose=SECRET_PURPOSE),
            scopes="openid email profile groups",
            group_map={"engineering": "eng"},
        )
        local = get_user_model().objects.create_user("local", password="a-long-local-pass-phrase")
        membership_add(tenant=tenant, user=local)
        firsts, repeats_s = [], []
        for login in accounts:  # a first sign-in: the member is made just in time
            firsts.append(sso_sign_in(Client(), httpx.Client(timeout=10), login))
        for login in accounts:  # again: found by subject, role and groups brought up to date
            repeats_s.append(sso_sign_in(Client(), httpx.Client(timeout=10), login))
        locals_s = []
        for _ in range(repeats):
            client = Client()
            t = time.perf_counter()
            response = client.post(
                "/accounts/login/", {"username": "local", "password": "a-long-local-pass-phrase"}, HTTP_HOST="localhost"
            )
            locals_s.append(time.perf_counter() - t)
            assert response.status_code == 302
        doors = deprovision_to_refusal(tenant)
    finally:
        process.terminate()

    def p50(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ms"

    print(f"local password sign-in: p50 {p50(locals_s)} ({repeats})")
    for label, runs in (("first SSO sign-in (member made)", firsts), ("repeat SSO sign-in", repeats_s)):
        whole, ours = [r[0] for r in runs], [r[1] for r in runs]
        print(
            f"{label}: p50 {p50(whole)} in all, ragsite's share {p50(ours)} "
            f"({statistics.median(whole) / statistics.median(locals_s):.2f}x the local sign-in)"
        )
    print("\n".join(doors))


if __name__ == "__main__":
    main()
