"""A company admin sets up each connector in a real browser (Debian's Chromium through Playwright) against its real
server: the form offers the kind and its options, the first sync runs at once, its job page says whose rights it
applied and what it could not map, and the admin fixes a person's mapping in the source's options and syncs the
rights again — the job page says what opened, to whom."""

from __future__ import annotations

import shutil

import pytest

from knowledge.models import Document, Source
from tenants.models import Membership
from tests import mail_server, redmine_server, wiki_server
from tests.connectors.test_dokuwiki import PAGES, RULES
from tests.factories import make_member, make_tenant
from tests.tenants.test_self_service_browser import _sign_in, assert_accessible

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh)")


@pytest.fixture
def people(transactional_db):  # type: ignore[no-untyped-def]
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="alice")
    return {name: make_member(tenant, username=name) for name in ("hanna", "carla")}


def _add(page, url: str, kind: str, name: str, location: str) -> str:  # type: ignore[no-untyped-def]
    """Fill the new-source form for a kind; returns the page's main text once it is created."""
    page.goto(f"{url}/t/acme/sources/")
    page.select_option("#kind", kind)
    page.fill("#name", name)
    page.fill("#path", location)
    page.click("#new-source button[type=submit]")
    return page.inner_text("main")


def _first_job(page, url: str, source_id: str, gaps: str = "") -> str:  # type: ignore[no-untyped-def]
    """Open the source's first sync from its row: through the row's note of what it could not map, when `gaps`
    names one, else through the job's state. Returns the job page's read-rights section."""
    row = page.locator("tr", has_text=source_id)
    if gaps:
        assert gaps in row.locator("a.rights-gaps").inner_text()
        row.locator("a.rights-gaps").click()
    else:
        row.locator("td:nth-child(5) a").first.click()
    page.wait_for_url(f"{url}/t/acme/jobs/**")
    page.wait_for_selector("section.access-sync")
    return page.inner_text("section.access-sync")


@pytest.mark.skipif(not wiki_server.available(), reason="needs Debian's dokuwiki and php-cli")
def test_an_admin_sets_up_a_wiki_and_maps_a_person_it_could_not(live_server, people, browser, tmp_path, settings):
    users = {"hanna": ("pw-h", ["hr", "user"]), "c.lopez": ("pw-c", ["hr", "user"])}
    wiki = wiki_server.DokuWiki(tmp_path, users=users, rules=RULES).start()
    try:
        for name, text in PAGES.items():
            wiki.edit(name, text, f"created {name}", wait=False)
        settings.RAG_ALLOWED_WEB_PREFIXES = [wiki.base]
        page = browser.new_page()
        _sign_in(page, live_server.url, "alice", "pw-for-tests-123")
        user, password = wiki_server.CONNECTOR
        main = _add(
            page,
            live_server.url,
            "dokuwiki",
            "company wiki",
            wiki.base.replace("http://", f"http://{user}:{password}@"),
        )
        assert "Created src:acme:dokuwiki:company-wiki" in main and "Its first sync is running" in main, main[:500]
        assert password not in page.content()  # sealed, never shown back
        assert_accessible(page)
        rights = _first_job(page, live_server.url, "src:acme:dokuwiki:company-wiki", "1 document for admins only")
        assert "lets no one here read: admins only" in rights and "legal/nda.md" in rights
        policy = Document.objects.get(document_key="hr/policy.md")
        assert policy.effective_access == ["user:hanna"]  # carla is c.lopez there: not mapped yet

        page.goto(f"{live_server.url}/t/acme/sources/")  # the admin maps her in the source's options
        row = page.locator("tr", has_text="src:acme:dokuwiki:company-wiki")
        row.locator("summary:has-text('Options')").click()
        row.locator("input[name=people]").fill("carla=c.lopez")
        row.locator("button:has-text('Save options')").click()
        assert "options of company wiki are saved" in page.inner_text("main")
        page.locator("tr", has_text="src:acme:dokuwiki:company-wiki").locator(
            "button:has-text('Sync rights now')"
        ).click()
        page.wait_for_url(f"{live_server.url}/t/acme/jobs/**")
        page.wait_for_selector("section.access-sync")
        assert "hr/policy.md: opened to user:carla" in page.inner_text("section.access-sync")
        assert_accessible(page)
        policy.refresh_from_db()
        assert policy.effective_access == ["user:carla", "user:hanna"]
        page.goto(f"{live_server.url}/t/acme/documents/{policy.public_id}/")
        assert "created hr:policy" in page.inner_text("main") and "wikiadmin" in page.inner_text("main")
    finally:
        wiki.stop()


@pytest.mark.skipif(not redmine_server.available(), reason="needs Debian's redmine")
def test_an_admin_sets_up_redmine(live_server, people, browser, tmp_path, settings):
    redmine = redmine_server.Redmine(redmine_server.template(tmp_path / "template"), tmp_path / "redmine").start()
    try:
        outsider = redmine.user("outsider", "outsider@elsewhere.test")
        hanna = redmine.user("hanna", "hanna@acme.test")
        redmine.project("hr", "Human resources", public=False)
        redmine.member("hr", hanna, "Manager")
        redmine.member("hr", outsider, "Manager")
        redmine.issue("hr", "Salary bands", "The bands for engineers run from 58,000 to 91,000 EUR.")
        settings.RAG_ALLOWED_WEB_PREFIXES = [redmine.base]
        page = browser.new_page()
        _sign_in(page, live_server.url, "alice", "pw-for-tests-123")
        main = _add(
            page, live_server.url, "redmine", "tracker", redmine.base.replace("http://", f"http://{redmine.key}@")
        )
        assert "Created src:acme:redmine:tracker" in main, main[:500]
        assert redmine.key not in page.content()
        rights = _first_job(page, live_server.url, "src:acme:redmine:tracker", "1 person there is no one here")
        assert "People there who are no one here" in rights and "outsider" in rights
        assert_accessible(page)
        assert Document.objects.get(source__kind="redmine").effective_access == ["user:hanna"]
    finally:
        redmine.stop()


@pytest.mark.skipif(not mail_server.available(), reason="needs Debian's dovecot-imapd")
def test_an_admin_sets_up_a_shared_mailbox(live_server, people, browser, settings):
    dovecot = mail_server.Dovecot({"hanna": ("pw-h", [])}, ("support", "support-secret-1")).start()
    try:
        dovecot.deliver("Escalations", "Refund for order 5512", "A refund of 1,240 EUR.", message_id="<r-1@x.test>")
        dovecot.share("Escalations", "hanna", "lr")
        settings.RAG_ALLOWED_MAIL_SERVERS = [f"127.0.0.1:{dovecot.port}"]
        page = browser.new_page()
        _sign_in(page, live_server.url, "alice", "pw-for-tests-123")
        main = _add(
            page, live_server.url, "mailbox", "support", f"imap://support:support-secret-1@127.0.0.1:{dovecot.port}/"
        )
        assert "Created src:acme:mailbox:support" in main, main[:500]
        assert "support-secret-1" not in page.content()
        _first_job(page, live_server.url, "src:acme:mailbox:support")
        assert_accessible(page)
        assert Source.objects.get(kind="mailbox").documents.get().effective_access == ["user:hanna"]
    finally:
        dovecot.remove()
