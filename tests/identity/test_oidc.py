"""OpenID Connect sign-in (issue 63) against a real OpenID Provider (panva's oidc-provider under node, its own
login and consent pages), in Chromium: an admin configures the provider in the browser, a person signs in through
it and becomes a member with the role and groups their provider groups give, a person of another e-mail domain is
refused with nothing created, and a workspace that requires SSO refuses its members' passwords. Without a browser:
every check of the ID token (signature, algorithm, key, issuer, audience, expiry, nonce) on tokens made here."""

from __future__ import annotations

import shutil
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from core.sealed import seal
from identity import oidc
from identity.models import SECRET_PURPOSE, Provider, ProviderLink
from tenants.models import Group, Membership, MembershipEvent
from tests.factories import make_member, make_tenant
from tests.identity.browser import sign_in_with_password

User = get_user_model()
PASSWORD = "pw-for-tests-123"
needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")


def _through_the_provider(page, login: str) -> None:  # type: ignore[no-untyped-def]
    """The provider's own development login page, then its consent page."""
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "whatever-the-provider-accepts")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    if page.locator("button[type=submit]", has_text="Continue").count():
        page.click("button[type=submit]")


@needs_chromium
def test_an_admin_configures_oidc_in_the_browser_and_people_sign_in_through_the_providers_pages(
    live_server, transactional_db, browser, oidc_provider
):
    url = live_server.url
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role="admin", username="root-admin")
    local = make_member(tenant, username="carol")
    User.objects.create_superuser("operator", password=PASSWORD)

    page = browser.new_page()
    sign_in_with_password(page, url, "root-admin")
    page.goto(f"{url}/t/acme/identity/")
    page.click("#add-provider")
    page.fill("#id_name", "Okta")
    page.fill("#id_slug", "okta")
    page.select_option("#id_kind", "oidc")
    page.fill("#id_issuer", oidc_provider["issuer"])
    page.fill("#id_client_id", oidc_provider["client_id"])
    page.fill("#id_secret", oidc_provider["client_secret"])
    page.fill("#id_scopes", "openid email profile groups")
    page.fill("#id_allowed_domains", "acme.example")
    page.fill("#id_role_map_text", "ragsite-admins = admin")
    page.fill("#id_group_map_text", "engineering = eng\nsupport = support")
    page.click("#save-provider")
    assert page.inner_text("#redirect-uri") == f"{url}/sso/acme/okta/callback/"
    provider = Provider.objects.get(tenant=tenant, slug="okta")
    assert provider.secret_sealed and oidc_provider["client_secret"] not in provider.secret_sealed
    assert oidc_provider["client_secret"] not in page.content()  # write-only

    # Alice: a first sign-in makes her a member, admin through `ragsite-admins`, in `eng` through `engineering`.
    alice_page = browser.new_context().new_page()
    alice_page.goto(f"{url}/t/acme/chat/")
    alice_page.click("a[data-provider=okta]")
    _through_the_provider(alice_page, "alice")
    alice_page.wait_for_url(f"{url}/t/acme/chat/")
    alice = User.objects.get(username="alice")
    assert Membership.objects.get(tenant=tenant, user=alice).role == "admin"
    assert list(Group.objects.get(tenant=tenant, name="eng").members.all()) == [alice]
    assert not Group.objects.filter(tenant=tenant, members=alice).exclude(name="eng").exists()
    assert ProviderLink.objects.get(provider=provider, user=alice).subject == "alice"
    assert alice.email == "alice@acme.example" and not alice.has_usable_password()
    assert MembershipEvent.objects.filter(tenant=tenant, username="alice", action="signed_in").count() == 1

    # Mallory's e-mail domain may not join: refused on a page that says so, nothing created.
    mallory_page = browser.new_context().new_page()
    mallory_page.goto(f"{url}/sso/acme/")
    mallory_page.click("a[data-provider=okta]")
    _through_the_provider(mallory_page, "mallory")
    assert "domain" in mallory_page.inner_text("#sign-in-refused")
    assert not User.objects.filter(username="mallory").exists()
    assert MembershipEvent.objects.filter(tenant=tenant, username="mallory", action="sign_in_refused").exists()

    # The admin requires SSO: Carol's password stops working (plainly said), the operator's does not.
    page.goto(f"{url}/t/acme/identity/")
    page.check("#sso-required")
    page.click("#sso-required-form button[type=submit]")
    carol_page = browser.new_context().new_page()
    sign_in_with_password(carol_page, url, local.get_username(), lands=False)
    assert "identity provider" in carol_page.inner_text("#sso-required-error")
    operator_page = browser.new_context().new_page()
    sign_in_with_password(operator_page, url, "operator")


def test_a_callback_without_the_sign_in_it_answers_is_refused_and_creates_nothing(db, tenant_a):
    provider = Provider.objects.create(
        tenant=tenant_a,
        name="Okta",
        slug="okta",
        issuer="https://idp.invalid",
        client_id="x",
        secret_sealed=seal("s", purpose=SECRET_PURPOSE),
    )
    users = User.objects.count()
    for query in ("?code=abc&state=forged", "?code=abc", "?error=access_denied&error_description=nope&state=x"):
        response = Client().get(f"/sso/acme/okta/callback/{query}")
        assert response.status_code == 400
        assert b"sign-in-refused" in response.content
    assert User.objects.count() == users and not ProviderLink.objects.filter(provider=provider).exists()
    assert Client().get("/sso/acme/nope/callback/?code=a&state=b").status_code == 404
    assert Client().get("/sso/globex/okta/").status_code == 404


# --- the ID token's checks, on tokens made here ----------------------------------------------------------------

ISSUER, AUDIENCE, NONCE = "https://idp.example", "ragsite-acme", "n-0S6_WzA2Mj"


def _key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig"}, private=True)


@pytest.fixture(scope="module")
def keys() -> dict[str, RSAKey]:
    return {"published": _key("k1"), "unpublished": _key("k2")}


def _token(key: RSAKey, **changes: object) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "248289761001", "iat": now, "exp": now + 300, "nonce": NONCE}
    header = {"alg": "RS256", "kid": key.kid}
    header.update(changes.pop("header", {}))  # type: ignore[arg-type]
    claims.update(changes)
    return jwt.encode(header, {k: v for k, v in claims.items() if v is not None}, key)


def _check(token: str, keys: dict[str, RSAKey]) -> dict[str, object]:
    published = KeySet([RSAKey.import_key(keys["published"].as_dict(private=False))])
    return oidc.id_token_claims(token, published, issuer=ISSUER, audience=AUDIENCE, nonce=NONCE, allowed=["RS256"])


def test_a_right_id_token_gives_its_claims(keys):
    assert _check(_token(keys["published"]), keys)["sub"] == "248289761001"


@pytest.mark.parametrize(
    "changes, said",
    [
        ({"iss": "https://evil.example"}, "not for this sign-in"),
        ({"aud": "another-client"}, "not for this sign-in"),
        ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "expired"),
        ({"nonce": "replayed-nonce"}, "not for this sign-in"),
        ({"nonce": None}, "not for this sign-in"),
        ({"aud": [AUDIENCE, "other"]}, "another client"),
    ],
)
def test_an_id_token_for_another_issuer_audience_time_or_nonce_is_refused(keys, changes, said):
    with pytest.raises(oidc.OidcFailed, match=said):
        _check(_token(keys["published"], **changes), keys)


def test_an_id_token_signed_by_a_key_the_provider_does_not_publish_or_unsigned_is_refused(keys):
    with pytest.raises(oidc.OidcFailed, match="signature"):
        _check(_token(keys["unpublished"]), keys)
    with pytest.raises(oidc.OidcFailed, match="signature"):  # the published kid, another key's signature
        _check(_token(keys["unpublished"], header={"kid": "k1"}), keys)
    import base64
    import json

    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    signed = _token(keys["published"]).split(".")
    unsigned = f"{part({'alg': 'none'})}.{signed[1]}."
    with pytest.raises(oidc.OidcFailed, match="signature"):
        _check(unsigned, keys)


def test_requiring_sso_ends_the_password_sessions_already_open_and_the_last_provider_cannot_strand_members(
    db, tenant_a
):
    from tenants.models import SIGNED_IN_WITH

    provider = Provider.objects.create(tenant=tenant_a, name="Okta", slug="okta", issuer="https://idp.invalid",
                                       client_id="x", secret_sealed=seal("s", purpose=SECRET_PURPOSE))  # fmt: skip
    admin = make_member(tenant_a, role="admin", username="root-admin")
    carol = make_member(tenant_a, username="carol")
    by_password, by_sso = Client(), Client()
    by_password.force_login(carol)
    by_sso.force_login(carol)
    session = by_sso.session
    session[SIGNED_IN_WITH] = "oidc:acme/okta"
    session.save()
    tenant_a.sso_required = True
    tenant_a.save()
    page = by_password.get("/t/acme/chat/")
    assert page.status_code == 302 and page["Location"] == "/sso/acme/?next=/t/acme/chat/"
    assert by_password.post("/api/v1/tenants/acme/retrieve/", {"query": "x"}, content_type="application/json",
                            ).status_code in (401, 403)  # fmt: skip
    assert by_sso.get("/t/acme/chat/").status_code == 200
    assert Client().get("/sso/acme/").status_code == 200  # where the redirect leads: the provider's button
    # Deleting the last sign-in provider switches the requirement off rather than lock everyone out.
    admin_client = Client()
    admin_client.force_login(admin)
    session = admin_client.session
    session[SIGNED_IN_WITH] = "oidc:acme/okta"
    session.save()
    assert admin_client.post(f"/t/acme/identity/{provider.public_id}/delete/").status_code == 302
    tenant_a.refresh_from_db()
    assert tenant_a.sso_required is False and by_password.get("/t/acme/chat/").status_code == 200


def test_a_provider_that_answers_too_much_is_refused_without_reading_it_all(db, tenant_a):
    """A discovery document, key set or UserInfo is read within a time and size bound (identity.oidc._fetch_json):
    an issuer that sends megabytes holds no web worker."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Endless(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                self.wfile.write(b'{"issuer": "' + b"x" * (3 * oidc.MAX_BYTES) + b'"}')
            except OSError:
                pass  # the reader gave up, as it should

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        provider = Provider.objects.create(tenant=tenant_a, name="Big", slug="big", client_id="x",
                                           issuer=f"http://127.0.0.1:{server.server_port}")  # fmt: skip
        with pytest.raises(oidc.OidcFailed, match="too slowly or too much"):
            oidc.discovery(provider)
    finally:
        server.shutdown()
