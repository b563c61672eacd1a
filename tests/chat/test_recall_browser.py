"""Recall in a real browser (Debian's Chromium driven by Playwright): the badge on an old answer in the chat, the inbox
of answers whose ground changed with "ask again", the receipt page, and a key's webhook on the keys page."""

from __future__ import annotations

import shutil

import pytest

from chat import services as chat_services
from chat.models import ChatSession
from tenants.models import Membership
from tenants.services import api_key_issue
from tests.chat.test_recall import TRAVEL, answer_on, resync
from tests.factories import make_folder_source, make_member, make_tenant

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh installs it)"
    ),
]
QUESTION = "What is the per diem for travel?"


def _login(page, base: str, username: str, next_path: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}{next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")


def test_a_changed_answer_is_badged_in_the_chat_listed_in_the_inbox_and_asked_again(
    live_server, transactional_db, browser, tmp_path
):
    tenant = make_tenant(slug="acme", name="Acme")
    hanna = make_member(tenant, role=Membership.Role.STAFF, username="hanna")
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant, root=root, files={"travel.md": TRAVEL})
    record = answer_on(tenant, "travel.md", QUESTION, "The per diem is 42 EUR a day [1].", user=hanna)
    chat = ChatSession.objects.create(tenant=tenant, user=hanna, title=QUESTION)
    result = chat_services.Answer(answer=record.answer, generated=True, model="test", status="answered",
                                  citations=record.citations, hits=[], claims=record.claims)  # fmt: skip
    chat_services.session_record(tenant=tenant, session=chat, question=QUESTION, result=result, record=record)
    resync(source, root, "travel.md", TRAVEL.replace("42 EUR", "45 EUR"))  # the scan runs as the change commits

    page = browser.new_page()
    _login(page, live_server.url, "hanna", f"/t/acme/chat/?session={chat.public_id}")
    badge = page.wait_for_selector(".message.assistant .recall-badge")
    assert badge.get_attribute("data-now") == "changed" and "changed" in badge.inner_text()
    assert "1 answer whose ground changed" in page.inner_text(".recalled-count")

    page.click("nav.sections >> text=Changed answers")
    item = page.wait_for_selector(".recalled-answer.unseen")
    assert QUESTION in item.inner_text()
    assert "it now says “The per diem for travel is 45 EUR a day.”" in item.inner_text()
    assert "the values no longer hold" in item.inner_text()

    item.query_selector("text=Receipt").click()
    row = page.wait_for_selector(".receipt tr.claim")
    assert row.get_attribute("data-now") == "changed" and row.get_attribute("data-then") == "held"
    assert "42 EUR" in row.inner_text() and "45 EUR" in row.inner_text()
    page.go_back()
    page.reload()
    assert page.query_selector(".recalled-answer.unseen") is None  # seen once its receipt was opened

    page.click(".ask-again")
    page.wait_for_selector(".message.user")
    assert page.inner_text(".message.user") == QUESTION  # asked at once, in a new conversation
    assert "ask=" not in page.url  # a reload does not ask it again
    page.wait_for_selector("article.message.assistant footer.meta", timeout=120_000)
    page.click("article.message.assistant .receipt-link a")  # the new answer's receipt, linked as it is given
    page.wait_for_selector(".receipt")
    assert page.inner_text(".receipt blockquote.question") == QUESTION and page.query_selector(".recall-notice") is None


def test_an_admin_sets_a_keys_webhook_on_the_keys_page_sees_its_secret_once_and_a_refused_url(
    live_server, transactional_db, browser, settings
):
    settings.RAG_ALLOWED_WEB_PREFIXES = ["http://127.0.0.1:9/hooks/"]  # names its host: a loopback allowed
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    key, _raw = api_key_issue(tenant=tenant, name="travel-agent", scope="read")
    page = browser.new_page()
    _login(page, live_server.url, "ada", "/t/acme/keys/")
    field = page.wait_for_selector(f"tr.webhook-row[data-webhook-for='{key.prefix}'] input[name=url]")
    field.fill("http://127.0.0.1:9/steal")
    page.click(f"tr.webhook-row[data-webhook-for='{key.prefix}'] button[type=submit]")
    error = page.wait_for_selector(f"tr.webhook-row[data-webhook-for='{key.prefix}'] .notice.error")
    assert "not under" in error.inner_text() or "allow" in error.inner_text()
    page.fill(f"tr.webhook-row[data-webhook-for='{key.prefix}'] input[name=url]", "http://127.0.0.1:9/hooks/recalls")
    page.click(f"tr.webhook-row[data-webhook-for='{key.prefix}'] button[type=submit]")
    secret = page.wait_for_selector(".webhook-secret")
    assert secret.inner_text().startswith("whsec_")
    page.reload()
    row = page.wait_for_selector(f"tr.webhook-row[data-webhook-for='{key.prefix}'] .key-webhook code")
    assert row.inner_text() == "http://127.0.0.1:9/hooks/recalls" and page.query_selector(".webhook-secret") is None
