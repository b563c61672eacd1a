"""The staff chat in a real browser: Debian's Chromium driven by Playwright."""

from __future__ import annotations

import re
import shutil

import pytest

from chat.models import ChatMessage
from tenants.models import Membership
from tests.factories import make_folder_source, make_member, make_tenant, make_user

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh installs it)"
    ),
]


def _login(page, base: str, username: str, next_path: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{base}{next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")


def test_staff_asks_sees_tokens_stream_and_the_cited_excerpt(live_server, transactional_db, browser, tmp_path,
                                                             chat_model):  # fmt: skip
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    files = {
        "warranty.md": "# Warranty\n\nEvery product carries a two year warranty. Claims need the original receipt.\n"
    }
    make_folder_source(tenant=tenant, root=tmp_path / "handbook", files=files)

    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    assert page.locator("#model-status").get_attribute("data-state") == "ready"  # staff see the model's state
    # Record, in the page, the order in which the sources and the first token appear.
    page.evaluate("""() => {
      window.seen = [];
      new MutationObserver(() => {
        if (document.querySelector('#citations .citation') && !seen.includes('sources')) seen.push('sources');
        const bubble = document.querySelector('.message.assistant');
        if (bubble && Number(bubble.dataset.tokens || 0) > 0 && !seen.includes('token')) seen.push('token');
      }).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    }""")
    page.fill("#question", "How long is the warranty?")
    page.click("#ask button[type=submit]")
    answer = page.locator(".message.assistant").last
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)  # the final event has arrived
    assert page.evaluate("window.seen") == ["sources", "token"]  # the sources came before the first token
    assert int(answer.get_attribute("data-tokens") or 0) >= 2  # the text arrived token by token
    assert answer.get_attribute("data-status") == "answered"
    assert re.search(r"\b(two|2)[ -]years?\b", answer.locator(".text").inner_text().lower())
    assert "[1]" in answer.locator(".claim").first.inner_text()  # the verified citation marker
    # Under the claim, the excerpt sentence it stands on, verbatim: checked at a glance, without hovering.
    evidence = answer.locator(".text .evidence").first
    assert evidence.is_visible() and "two year warranty" in evidence.inner_text()
    sources = page.locator("#citations")
    assert "Cited excerpts:" in sources.inner_text()
    assert "two year warranty" in sources.inner_text()
    support = page.locator("#citations .citation .support").first.inner_text()  # the sentence a claim stands on
    assert support.startswith("Supports “") and "two year warranty" in support
    assert "warranty.md" in sources.inner_text()
    assert ChatMessage.objects.filter(role="user", text="How long is the warranty?").exists()
    page.wait_for_selector("#sessions a:has-text('How long is the warranty?')")


def test_a_user_of_another_tenant_gets_404_on_that_chat(live_server, transactional_db, browser):
    make_tenant(slug="acme", name="Acme")
    globex = make_tenant(slug="globex", name="Globex")
    make_member(globex, username="gus")
    make_user(username="nobody")
    page = browser.new_page()
    _login(page, live_server.url, "gus", "/")
    response = page.goto(f"{live_server.url}/t/acme/chat/")
    assert response.status == 404
    response = page.goto(f"{live_server.url}/t/globex/chat/")
    assert response.status == 200
