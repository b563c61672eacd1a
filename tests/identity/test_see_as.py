"""See as (issue 63): a tenant admin sees the workspace as a member, a group or a key — and what the page shows is
what that identity's own requests get, door by door: the documents (REST `documents/`), a search (REST
`retrieve/`), an answer (the member's own staff chat); the look is audited; before an access change is saved, its
preview names who gains and who loses sight."""

from __future__ import annotations

import html as html_text
import json
import re
import shutil

import pytest
from django.test import Client
from rest_framework.test import APIClient

from knowledge import services
from knowledge.index import indexer
from knowledge.models import Document
from mcp_tools import operations
from tenants.models import Group, MembershipEvent
from tenants.services import api_key_issue, group_create, group_member_add
from tests.factories import make_folder_source, make_member
from tests.identity.browser import sign_in_with_password

QUESTION = "How many days of notice does a resignation need?"
FILES = {
    "handbook.md": "# Handbook\n\nA resignation needs thirty days of notice, given in writing to your manager.\n",
    "hr/salaries.md": "# Salary bands\n\nA resignation during probation needs seven days of notice; salary band B4 "
    "pays 52,000 euros.\n",
    "carol/review.md": "# Carol's review\n\nCarol's resignation notice was agreed at sixty days.\n",
}


@pytest.fixture
def office(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    admin = make_member(tenant_a, role="admin", username="root-admin")
    bob, carol = make_member(tenant_a, username="bob"), make_member(tenant_a, username="carol")
    hr = group_create(tenant=tenant_a, name="hr")
    group_member_add(tenant=tenant_a, actor=None, group=hr, user=bob)
    make_folder_source(tenant=tenant_a, root=tmp_path / "office", files=FILES, name="office")
    for key, access in (("hr/salaries.md", ["group:hr"]), ("carol/review.md", ["user:carol"])):
        document = Document.objects.get(tenant=tenant_a, document_key=key)
        services.document_set_access(tenant=tenant_a, document=document, access=access)
    indexer.drain()
    keys = {who: api_key_issue(tenant=tenant_a, name=who, acts_for=[who])
            for who in ("user:bob", "user:carol", "group:hr")}  # fmt: skip
    keys["tenant"] = api_key_issue(tenant=tenant_a, name="plain")
    client = Client()
    client.force_login(admin)
    return {"admin": client, "bob": bob, "carol": carol, "keys": keys}


def _api(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    return client


def _page(office, who: str, question: str = "", answer: bool = False) -> str:  # type: ignore[no-untyped-def]
    response = office["admin"].get("/t/acme/see-as/", {"as": who, "q": question, **({"answer": "1"} if answer else {})})
    assert response.status_code == 200
    return response.content.decode()


def _listed(html: str, list_id: str, attribute: str) -> list[str]:
    block = re.search(rf'<(?:ul|ol)[^>]* id="{list_id}"[^>]*>(.*?)</(?:ul|ol)>', html, re.S)
    return re.findall(rf'{attribute}="([^"]+)"', block.group(1)) if block else []


@pytest.mark.parametrize("who", ["user:bob", "user:carol", "group:hr", "key:plain"])
def test_see_as_shows_exactly_the_documents_and_hits_that_identitys_own_requests_get(office, who):
    api_key, raw = office["keys"]["tenant" if who == "key:plain" else who]
    shown_as = f"key:{api_key.prefix}" if who.startswith("key:") else who
    html = _page(office, shown_as, QUESTION)
    own_documents = _api(raw).get("/api/v1/tenants/acme/documents/").json()
    own_hits = _api(raw).post("/api/v1/tenants/acme/retrieve/", {"query": QUESTION}, format="json").json()["hits"]
    mcp_hits = operations.retrieve(api_key, query=QUESTION)["hits"]  # the MCP door's retrieve tool, same key
    rows = own_documents["results"] if isinstance(own_documents, dict) else own_documents
    assert sorted(_listed(html, "see-as-documents", "data-document")) == sorted(d["document_id"] for d in rows)
    assert _listed(html, "see-as-hits", "data-chunk") == [h["chunk_id"] for h in own_hits]
    assert [h["chunk_id"] for h in mcp_hits] == [h["chunk_id"] for h in own_hits]
    assert len(_listed(html, "see-as-documents", "data-document")) == {"user:bob": 2, "user:carol": 2,
                                                                        "group:hr": 2, "key:plain": 1}[who]  # fmt: skip
    event = MembershipEvent.objects.filter(action="see_as").first()
    assert event.username == shown_as and event.actor.get_username() == "root-admin" and QUESTION in event.detail


def test_another_tenants_member_key_or_group_is_no_one_here(office, tenant_b):
    make_member(tenant_b, username="outsider")
    group_create(tenant=tenant_b, name="outsiders")
    other_key, _raw = api_key_issue(tenant=tenant_b, name="theirs")
    for who in ("user:outsider", "group:outsiders", f"key:{other_key.prefix}"):
        response = office["admin"].get("/t/acme/see-as/", {"as": who, "q": QUESTION})
        assert response.status_code == 400 and "no member, group or active key" in response.content.decode(), who


def test_see_as_follows_a_group_change_at_once_and_refuses_what_the_tenant_lacks(office, tenant_a):
    assert "Salary bands" in _page(office, "user:bob")
    Group.objects.get(tenant=tenant_a, name="hr").members.remove(office["bob"])
    assert "Salary bands" not in _page(office, "user:bob")
    response = office["admin"].get("/t/acme/see-as/", {"as": "user:nobody"})
    assert response.status_code == 400 and "no member, group or active key" in response.content.decode()


def test_the_preview_of_an_access_change_names_who_gains_and_who_loses(office, tenant_a):
    document = Document.objects.get(tenant=tenant_a, document_key="hr/salaries.md")
    url = f"/t/acme/documents/{document.public_id}/access/preview/"
    preview = office["admin"].post(url, {"access": "user:carol"}).content.decode()
    assert re.search(r"Would gain sight: carol, key [^ ,]+…", preview)
    assert "Would lose sight: bob" in preview and "root-admin" not in preview
    assert "no-such-group" in office["admin"].post(url, {"access": "group:no-such-group"}).content.decode()
    assert Document.objects.get(pk=document.pk).effective_access == ["group:hr"]  # a preview saves nothing


@pytest.mark.slow
def test_see_as_gives_the_answer_the_member_gets_in_their_own_chat(office, chat_model):
    html = _page(office, "user:bob", QUESTION, answer=True)
    bob = Client()
    bob.force_login(office["bob"])
    stream = b"".join(bob.post("/t/acme/chat/ask/", {"question": QUESTION}).streaming_content).decode()
    done = json.loads(stream.split("event: done\ndata: ", 1)[1].split("\n\n", 1)[0])
    status = re.search(r'id="see-as-answer" data-status="([^"]+)"', html).group(1)
    assert status == done["status"]
    assert _listed(html, "see-as-answer-citations", "data-chunk") == [c["chunk_id"] for c in done["citations"]]
    shown = re.search(r'id="see-as-answer"[^>]*>(.*?)</p>', html, re.S).group(1)
    assert html_text.unescape(shown).strip() == done["answer"].strip()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_in_chromium_the_admin_previews_an_access_change_and_sees_as_a_member(
    live_server, transactional_db, browser, tmp_path
):
    from tests.factories import make_tenant

    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role="admin", username="root-admin")
    bob = make_member(tenant, username="bob")
    hr = group_create(tenant=tenant, name="hr")
    group_member_add(tenant=tenant, actor=None, group=hr, user=bob)
    make_folder_source(tenant=tenant, root=tmp_path / "office", files=FILES, name="office")
    salaries = Document.objects.get(tenant=tenant, document_key="hr/salaries.md")
    services.document_set_access(tenant=tenant, document=salaries, access=["group:hr"])
    indexer.drain()
    page = browser.new_page()
    sign_in_with_password(page, live_server.url, "root-admin")
    page.goto(f"{live_server.url}/t/acme/documents/{salaries.public_id}/")
    page.fill("#document-access-input", "user:root-admin")
    page.wait_for_selector("#document-access-preview .access-loses")
    assert "bob" in page.inner_text("#document-access-preview")
    assert Document.objects.get(pk=salaries.pk).effective_access == ["group:hr"]  # previewed, not saved
    page.goto(f"{live_server.url}/t/acme/see-as/")
    page.select_option("#see-as-who", "user:bob")
    page.fill("#see-as-question", QUESTION)
    page.click("#see-as-form button[type=submit]")
    titles = page.locator("#see-as-documents li").all_inner_texts()
    assert sorted(titles) == ["Carol's review", "Handbook", "Salary bands"]  # carol's is open here
    assert page.locator("#see-as-hits li").count() >= 1
