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


def test_an_over_long_question_is_refused_in_the_page_with_the_limit(live_server, transactional_db, browser):
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    page.fill("#question", "Why? " * 800)  # 4,000 characters: pasted whole, not cut at the limit
    assert len(page.input_value("#question")) == 4000
    page.click("#ask button[type=submit]")
    notice = page.locator("#ask-notice")
    notice.wait_for(state="visible")
    assert "limited to 2,000 characters" in notice.inner_text() and "3,999" in notice.inner_text()
    assert page.locator(".message").count() == 0  # nothing was sent
    assert not ChatMessage.objects.exists()


def test_the_draft_is_shown_as_being_checked_and_never_as_the_answer(live_server, transactional_db, browser,
                                                                     tmp_path, chat_model):  # fmt: skip
    """libffi's manual says bit fields are not supported; whatever the model drafts, the page shows it only as a
    draft being checked, and "Yes" never stands as the answer."""
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    files = {
        "libffi.md": "# Missing features\n\nlibffi is missing a few features. There is no support for bit fields "
        "in structures. The closure API is also missing on some platforms.\n"
    }
    make_folder_source(tenant=tenant, root=tmp_path / "manual", files=files)
    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    page.evaluate("""() => {
      window.answerTextWhileDrafting = [];
      new MutationObserver(() => {
        const bubble = document.querySelector('.message.assistant');
        if (!bubble || !bubble.querySelector('.draft.checking')) return;
        const text = bubble.querySelector('.text').textContent;
        if (Number(bubble.dataset.tokens || 0) > 0) answerTextWhileDrafting.push(text);
      }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
    }""")
    page.fill("#question", "Does libffi support bit fields in structures?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    answer = page.locator(".message.assistant").last
    drafted = page.evaluate("window.answerTextWhileDrafting")
    assert drafted and set(drafted) == {""}  # tokens arrived, into the draft only: the answer stayed empty
    assert page.locator(".draft.checking").count() == 0  # the draft is settled once checked
    shown = answer.locator(".text").inner_text()
    assert not re.match(r"\s*yes\b", shown, re.IGNORECASE)
    if answer.get_attribute("data-status") in ("answered", "partial"):
        assert re.search(r"\b(no|not)\b", shown, re.IGNORECASE)  # an answer that stands says there is none
    else:  # refused: the draft, if kept, is closed and struck out
        assert page.locator(".draft.retracted[open]").count() == 0
        assert answer.locator(".draft.retracted s").count() == answer.locator(".draft.retracted").count()


def test_a_restricted_document_reaches_the_chat_of_its_group_only(live_server, transactional_db, browser, tmp_path,
                                                                  chat_model):  # fmt: skip
    from knowledge.index import indexer
    from knowledge.ingest import pipeline
    from knowledge.services import source_set_access
    from tenants.services import group_create, group_member_add

    canary = "pangolin4410ibis"
    tenant = make_tenant(slug="acme", name="Acme")
    hanna = make_member(tenant, username="hanna")
    make_member(tenant, username="sam")
    group_member_add(tenant=tenant, actor=None, group=group_create(tenant=tenant, name="hr"), user=hanna)
    handbook = {"handbook.md": "# Support\n\nSupport answers every ticket within one business day.\n"}
    make_folder_source(tenant=tenant, root=tmp_path / "handbook", name="handbook", files=handbook)
    root = tmp_path / "hr"
    root.mkdir()
    (root / "salaries.md").write_text(f"# Salary bands\n\nThe salary band for a senior engineer is 92,000 euros a "
                                      f"year. Reference {canary}.\n")  # fmt: skip
    hr = pipeline.folder_source_get_or_create(tenant=tenant, name="hr-files", path=root)
    source_set_access(tenant=tenant, source=hr, access=["group:hr"])
    pipeline.sync_folder(source=hr, root=root)
    indexer.drain()

    def ask(username: str) -> tuple[str, str]:
        page = browser.new_context().new_page()
        _login(page, live_server.url, username, "/t/acme/chat/")
        page.wait_for_selector("#question")
        page.fill("#question", "What is the salary band for a senior engineer?")
        page.click("#ask button[type=submit]")
        page.wait_for_selector(".message.assistant .meta", timeout=600_000)
        return page.locator("#citations").inner_text(), page.content()

    sources, html = ask("sam")
    assert canary not in html and "salaries.md" not in html and "92,000" not in html
    sources, html = ask("hanna")
    assert "salaries.md" in sources and canary in html  # her group's document is her evidence


def test_a_citation_due_a_review_is_badged_and_the_answer_says_so(live_server, transactional_db, browser, tmp_path,
                                                                   chat_model):  # fmt: skip
    import datetime as dt

    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    overdue = dt.date.today() - dt.timedelta(days=20)
    files = {
        "warranty.md": f"---\nreview_by: {overdue}\n---\n# Warranty\n\nEvery product carries a two year warranty.\n"
    }
    make_folder_source(tenant=tenant, root=tmp_path / "handbook", files=files)

    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    page.fill("#question", "How long is the warranty?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    answer = page.locator(".message.assistant").last
    assert answer.get_attribute("data-status") == "answered"
    badge = page.locator("#citations .citation .badge.freshness-review_due").first
    assert badge.is_visible() and badge.inner_text() == "review due"
    assert str(overdue) in (badge.get_attribute("title") or "")
    note = answer.locator(".claim.note")
    assert note.is_visible() and f"due a review since {overdue}" in note.inner_text()
    page.click("#sessions a:has-text('How long is the warranty?')")  # the saved conversation says it too
    page.wait_for_selector(".message.assistant .claim.note")
    assert "due a review since" in page.locator(".message.assistant .claim.note").last.inner_text()
