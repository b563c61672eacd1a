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


QUESTION = "How long is the warranty, and what does a claim need?"


def test_staff_see_each_verified_sentence_before_the_model_has_finished_and_never_a_draft(
    live_server, transactional_db, browser, tmp_path, chat_model
):  # fmt: skip
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    files = {
        "warranty.md": "# Warranty\n\nEvery product carries a two year warranty. Claims need the original receipt. "
        "Returns are accepted within thirty days of purchase.\n"
    }
    make_folder_source(tenant=tenant, root=tmp_path / "handbook", files=files)

    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    assert page.locator("#model-status").get_attribute("data-state") == "ready"  # staff see the model's state
    # Record, in the page, what appears when: the sources, each sentence shown, the end of the answer; and every
    # text the answer bubble ever showed (to prove no draft was ever on screen).
    page.evaluate("""() => {
      window.seen = []; window.texts = new Set(); window.stamps = {};
      const stamp = (name) => { if (!(name in stamps)) { stamps[name] = performance.now(); seen.push(name); } };
      new MutationObserver(() => {
        if (document.querySelector('#citations .citation')) stamp('sources');
        const bubble = document.querySelector('.message.assistant');
        if (!bubble) return;
        if (bubble.querySelector('.text .claim')) stamp('sentence');
        if (bubble.querySelector('.meta')) stamp('done');
        if (bubble.querySelector('.draft')) stamp('draft');
        for (const claim of bubble.querySelectorAll('.text .claim')) texts.add(claim.textContent);
      }).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    }""")
    page.fill("#question", QUESTION)
    page.click("#ask button[type=submit]")
    answer = page.locator(".message.assistant").last
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)  # the final event has arrived
    assert page.evaluate("window.seen") == ["sources", "sentence", "done"]  # a sentence showed before the end
    # The first sentence was verified (and shown) while the model was still writing the rest.
    meta = answer.locator(".meta")
    assert float(meta.get_attribute("data-first-verified-ms")) < float(meta.get_attribute("data-generated-ms"))
    assert "first verified sentence" in meta.inner_text()
    supported = {c["text"] for c in ChatMessage.objects.get(role="assistant").claims if c["supported"]}
    shown = page.evaluate("[...window.texts]")
    assert shown and all(any(text.startswith(claim.rstrip(".")) for claim in supported) for text in shown)
    assert answer.get_attribute("data-status") == "answered"
    assert int(answer.get_attribute("data-sentences") or 0) >= 1
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
    assert ChatMessage.objects.filter(role="user", text=QUESTION).exists()
    page.wait_for_selector("#sessions a:has-text('How long is the warranty')")

    # The same answer reopened (issue 50: blank gaps in every bubble, an empty Sources panel, "first token" where
    # the live page said "first verified sentence"): it reads, measures and cites as it did live.
    live = {"text": answer.locator(".text").inner_text(), "meta": meta.inner_text(),
            "height": answer.locator(".text").bounding_box()["height"], "sources": sources.inner_text()}  # fmt: skip
    page.click("#sessions a:has-text('How long is the warranty')")
    page.wait_for_selector(".message.assistant[data-payload][data-rendered]")  # drawn by the page's script
    reopened = page.locator(".message.assistant").last
    assert reopened.locator(".text").inner_text() == live["text"]
    assert reopened.locator(".meta").inner_text() == live["meta"] and "first verified sentence" in live["meta"]
    assert abs(reopened.locator(".text").bounding_box()["height"] - live["height"]) < 2
    assert page.locator("#citations").inner_text() == live["sources"]
    # Staff open what the answer cites: the document, the cited passage highlighted (issue 50).
    page.goto(live_server.url + page.locator("#citations a.read-document").first.get_attribute("href"))
    assert "two year warranty" in page.locator("#cited mark").inner_text() and page.locator("#cited").is_visible()


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


def test_a_sentence_that_fails_its_check_never_shows_only_its_reason(live_server, transactional_db, browser,
                                                                      tmp_path, chat_model):  # fmt: skip
    """libffi's manual says bit fields are not supported; whatever the model writes, no text of it is on the page
    before it is checked, and "Yes" never stands as the answer."""
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
      window.whileStreaming = [];
      new MutationObserver(() => {
        const bubble = document.querySelector('.message.assistant');
        if (!bubble || bubble.querySelector('.meta')) return;
        whileStreaming.push(bubble.querySelector('.text').textContent);
      }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
    }""")
    page.fill("#question", "Does libffi support bit fields in structures?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    answer = page.locator(".message.assistant").last
    message = ChatMessage.objects.get(role="assistant")
    supported = [c["text"] for c in message.claims if c["supported"]]
    for text in page.evaluate("window.whileStreaming"):  # only checked sentences and reasons, ever
        for line in filter(None, (part.strip() for part in re.split(r"\(A sentence of the model's was left out[^)]*\)"
                                                                     r"|\(A supported sentence was held back[^)]*\)"
                                                                     r"|\[\d+\] “[^”]*”", text))):  # fmt: skip
            assert any(line.startswith(claim.rstrip(".")[:20]) or claim.startswith(line[:20]) for claim in supported)
    assert page.locator(".draft").count() == 0
    shown = answer.locator(".text").inner_text()
    assert not re.match(r"\s*yes\b", shown, re.IGNORECASE)
    if answer.get_attribute("data-status") in ("answered", "partial"):
        assert re.search(r"\b(no|not)\b", shown, re.IGNORECASE)  # an answer that stands says there is none
    for claim in message.claims:
        if claim["supported"] is False:
            assert claim["text"] not in shown  # a failed sentence is not shown; its reason is


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


def test_a_computed_answer_shows_its_query_and_rows_live_and_reopened(live_server, transactional_db, browser,
                                                                      tmp_path, chat_model):  # fmt: skip
    from tests.chat.test_computing import LEDGER

    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    make_folder_source(tenant=tenant, root=tmp_path / "kb", files={"ledger.csv": LEDGER})
    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    page.fill("#question", "How many pending orders does Acme have?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    answer = page.locator(".message.assistant").last
    expected = str(sum(1 for n in range(1, 25) if n % 3 == 0 and n % 4 != 0))
    assert answer.get_attribute("data-status") == "answered" and expected in answer.locator(".text").inner_text()
    how = answer.locator("details.computed")
    how.locator("summary").click()
    assert "FROM data" in how.locator("pre").inner_text()
    assert f"Computed over {expected} of the 24 rows" in how.inner_text()
    live = how.inner_text()
    page.click("#sessions a:has-text('How many pending orders')")
    page.wait_for_selector(".message.assistant[data-payload][data-rendered]")
    reopened = page.locator(".message.assistant").last.locator("details.computed")
    reopened.locator("summary").click()
    assert reopened.inner_text() == live


def test_a_spanish_question_over_an_english_policy_and_its_follow_up_stream_verified_spanish_sentences(
    live_server, transactional_db, browser, tmp_path, chat_model
):  # fmt: skip
    """Issue 62: a Spanish question over an English document is answered in Spanish, each sentence shown as soon as
    it was verified (in English, the sentence as verified one click away), and a follow-up in the same conversation
    is read with the question before it."""
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    policy = ("# Travel policy\n\nThe daily per diem for travel within Spain is 52 EUR per day.\n\n"
              "The daily per diem for international travel is 85 EUR per day.\n")  # fmt: skip
    make_folder_source(tenant=tenant, root=tmp_path / "policies", files={"travel.md": policy})
    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    page.evaluate("""() => {
      window.seen = [];
      new MutationObserver(() => {
        const bubble = [...document.querySelectorAll('.message.assistant')].pop();
        if (!bubble) return;
        const step = bubble.querySelector('.meta') ? 'done' : bubble.querySelector('.text .claim') ? 'sentence' : '';
        if (step && seen[seen.length - 1] !== step) seen.push(step);
      }).observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    }""")
    page.fill("#question", "¿Cuál es la dieta diaria para viajes dentro de España?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    answer = page.locator(".message.assistant").last
    assert answer.get_attribute("data-status") in ("answered", "partial"), answer.inner_text()
    assert page.evaluate("window.seen")[:2] == ["sentence", "done"]  # the sentence came before the end
    text = answer.locator(".text .claim").first.inner_text()
    assert "52 EUR" in text and "por día" in text  # in Spanish, the value as the policy states it
    original = answer.locator(".text details.original").first
    original.locator("summary").click()  # the sentence as it was verified, one click away
    assert "per day" in original.inner_text()
    page.wait_for_selector("#sessions a")
    page.evaluate("window.seen = []")
    page.fill("#question", "¿Y para viajes internacionales?")
    page.click("#ask button[type=submit]")
    follow_up = page.locator(".message.assistant").nth(1)
    follow_up.locator(".meta").wait_for(timeout=600_000)
    assert follow_up.get_attribute("data-status") in ("answered", "partial"), follow_up.inner_text()
    assert "85" in follow_up.locator(".text").inner_text()  # read with the question before it
    assert ChatMessage.objects.filter(role="user").count() == 2
    assert ChatMessage.objects.filter(role="user").values("session").distinct().count() == 1


def test_the_excerpts_of_two_versions_of_one_document_each_show_their_own_text(
    live_server, transactional_db, browser, tmp_path, chat_model
):  # fmt: skip
    """Issue 62: a document's versions share their chunk ids; a question about its history reads both, and each
    excerpt card shows its own version's text (the card of version 2 showed version 1's under a quote that stated
    another value)."""
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.STAFF, username="sam")
    policy = "# Travel policy\n\nThe daily per diem for travel within Spain is {} EUR per day.\n"
    make_folder_source(tenant=tenant, root=tmp_path / "policies", files={"travel.md": policy.format(42)})
    make_folder_source(tenant=tenant, root=tmp_path / "policies", files={"travel.md": policy.format(52)})
    page = browser.new_page()
    _login(page, live_server.url, "sam", "/t/acme/chat/")
    page.wait_for_selector("#question")
    page.evaluate("""() => {  // every excerpt card the panel ever showed: the retrieved ones, then the cited ones
      window.cards = new Set();
      new MutationObserver(() => {
        for (const quote of document.querySelectorAll('#citations .citation blockquote')) cards.add(quote.textContent);
      }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    page.fill("#question", "What was the daily per diem for travel within Spain before the last change?")
    page.click("#ask button[type=submit]")
    page.wait_for_selector(".message.assistant .meta", timeout=600_000)
    cards = page.evaluate("[...window.cards]")
    versions = [text for text in cards if "per diem" in text]
    assert any("52 EUR" in text for text in versions) and any("42 EUR" in text for text in versions), cards
