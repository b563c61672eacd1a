"""SAML 2.0 sign-in (issue 63) against pysaml2's IdP behind its own login page (tests/identity/saml_idp.py): in
Chromium, an admin imports the IdP's metadata, publishes this service's, and a person signs in through the IdP's
page; without a browser, an unsigned assertion, a replayed one, one for another audience and an unsolicited one are
each refused with nothing created."""

from __future__ import annotations

import shutil
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from identity.models import Provider, ProviderLink
from tenants.models import Group, Membership, MembershipEvent
from tests.factories import make_member, make_tenant
from tests.identity.browser import sign_in_with_password

User = get_user_model()


def _provider(tenant, idp) -> Provider:  # type: ignore[no-untyped-def]
    return Provider.objects.create(tenant=tenant, name="Corporate SAML", slug="corp", kind=Provider.Kind.SAML,
                                   idp_metadata=idp.metadata(), subject_claim="NameID", username_claim="uid",
                                   email_claim="mail", groups_claim="groups", role_map={"ragsite-admins": "admin"},
                                   group_map={"engineering": "eng"})  # fmt: skip


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_an_admin_imports_the_idp_and_a_person_signs_in_through_its_page(live_server, transactional_db, browser,
                                                                        saml_idp):  # fmt: skip
    url = live_server.url
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role="admin", username="root-admin")
    page = browser.new_page()
    sign_in_with_password(page, url, "root-admin")
    page.goto(f"{url}/t/acme/identity/new/")
    page.fill("#id_name", "Corporate SAML")
    page.fill("#id_slug", "corp")
    page.select_option("#id_kind", "saml")
    page.fill("#id_idp_metadata", saml_idp.metadata())
    page.fill("#id_subject_claim", "NameID")
    page.fill("#id_username_claim", "uid")
    page.fill("#id_email_claim", "mail")
    page.fill("#id_role_map_text", "ragsite-admins = admin")
    page.fill("#id_group_map_text", "engineering = eng")
    page.click("#save-provider")
    sp_metadata_url = page.inner_text("#sp-metadata")
    assert sp_metadata_url == f"{url}/sso/acme/corp/saml/metadata/"
    saml_idp.trust(httpx.get(sp_metadata_url).text)  # the IdP's admin imports this service's metadata

    dana = browser.new_context().new_page()
    dana.goto(f"{url}/t/acme/chat/")
    dana.click("a[data-provider=corp]")
    dana.fill("#username", "dana")
    dana.fill("#password", "dana-password")
    dana.click("button[type=submit]")
    dana.wait_for_url(f"{url}/t/acme/chat/")
    user = User.objects.get(username="dana")
    assert Membership.objects.get(tenant=tenant, user=user).role == "admin"
    assert list(Group.objects.get(tenant=tenant, name="eng").members.all()) == [user]
    assert ProviderLink.objects.get(user=user).subject == "f7a1c2d3-dana"


class Browser:
    """A browser's round trip without a browser: the Django client starts the sign-in (its session holds what the
    answer must match) and the IdP object answers the AuthnRequest it was sent."""

    def __init__(self, idp) -> None:  # type: ignore[no-untyped-def]
        self.idp, self.client = idp, Client()

    def start(self) -> str:
        response = self.client.get("/sso/acme/corp/")
        assert response.status_code == 302
        return parse_qs(urlparse(response["Location"]).query)["SAMLRequest"][0]

    def post(self, acs: str, answer: str):  # type: ignore[no-untyped-def]
        return self.client.post(urlparse(acs).path, {"SAMLResponse": answer, "same_site": "1"})


@pytest.fixture
def corp(db, tenant_a, saml_idp) -> Browser:  # type: ignore[no-untyped-def]
    _provider(tenant_a, saml_idp)
    saml_idp.trust(Client().get("/sso/acme/corp/saml/metadata/").content.decode())
    return Browser(saml_idp)


def test_a_signed_assertion_signs_in_and_the_same_one_again_is_refused(corp, tenant_a):
    acs, answer = corp.idp.answer(corp.start(), "erik")
    assert corp.post(acs, answer).status_code == 302
    assert Membership.objects.get(tenant=tenant_a, user__username="erik").role == "staff"
    replay = Browser(corp.idp)  # another browser, with a sign-in of its own started
    replay.start()
    refused = replay.post(acs, answer)
    assert refused.status_code == 400 and b"sign-in-refused" in refused.content
    corp.start()
    assert corp.post(acs, answer).status_code == 400  # the same browser, a new sign-in: still used once


@pytest.mark.parametrize(
    "changes, said",
    [({"sign_assertion": False}, "Signature missing"), ({"sp_entity_id": "https://other.example/sp"}, "Audience"),
     ({"in_response_to": "id-forged"}, "Unsolicited")],
    ids=["unsigned", "another-audience", "unsolicited"],
)  # fmt: skip
def test_an_unsigned_foreign_or_unsolicited_assertion_is_refused_and_creates_nothing(corp, tenant_a, changes, said):
    acs, answer = corp.idp.answer(corp.start(), "dana", **changes)
    response = corp.post(acs, answer)
    assert response.status_code == 400 and said in response.content.decode()
    assert not User.objects.filter(username="dana").exists()
    assert said in MembershipEvent.objects.get(tenant=tenant_a, action="sign_in_refused").detail


def test_an_answer_nobody_asked_for_is_refused(corp):
    acs, answer = corp.idp.answer(Browser(corp.idp).start(), "dana")
    stranger = Client()  # no sign-in started in this browser
    assert stranger.post(urlparse(acs).path, {"SAMLResponse": answer, "same_site": "1"}).status_code == 400
    assert not User.objects.filter(username="dana").exists()
