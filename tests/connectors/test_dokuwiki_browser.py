"""A company admin sets up a DokuWiki source in a real browser (Debian's Chromium through Playwright) against a real
DokuWiki: the form offers the kind and its options, the first sync runs at once, its job page says whose rights it
applied and which pages the wiki lets no one here read, and a page's versions carry the wiki's authors and summaries."""

from __future__ import annotations

import shutil

import pytest

from knowledge.models import Document, Source
from tenants.models import Membership
from tests.connectors.test_dokuwiki import PAGES, RULES
from tests.factories import make_member, make_tenant
from tests.tenants.test_self_service_browser import _sign_in, assert_accessible
from tests.wiki_server import CONNECTOR, DokuWiki, available

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None or not available(), reason="needs Debian's chromium, dokuwiki and php-cli"
)


@pytest.fixture
def dokuwiki(tmp_path):  # type: ignore[no-untyped-def]
    served = DokuWiki(tmp_path, users={"hanna": ("pw-hanna", ["hr", "user"])}, rules=RULES).start()
    for page, text in PAGES.items():
        served.edit(page, text, f"created {page}", wait=False)
    yield served
    served.stop()


def test_an_admin_sets_up_a_wiki_in_the_browser(live_server, transactional_db, browser, dokuwiki, settings):
    settings.RAG_ALLOWED_WEB_PREFIXES = [dokuwiki.base]
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="alice")
    make_member(tenant, username="hanna")

    page = browser.new_page()
    _sign_in(page, live_server.url, "alice", "pw-for-tests-123")
    page.goto(f"{live_server.url}/t/acme/sources/")
    page.select_option("#kind", "dokuwiki")
    page.fill("#name", "company wiki")
    page.fill("#path", dokuwiki.base.replace("http://", f"http://{CONNECTOR[0]}:{CONNECTOR[1]}@"))
    page.fill("#namespace", "")
    page.fill("#people", "hanna=hanna")
    page.click("#new-source button[type=submit]")
    main = page.inner_text("main")
    assert "Created src:acme:dokuwiki:company-wiki" in main and "Its first sync is running" in main, main[:500]
    assert CONNECTOR[1] not in page.content()  # the password is sealed, never shown back
    assert_accessible(page)

    page.locator("tr", has_text="src:acme:dokuwiki:company-wiki").locator("td:nth-child(5) a").click()
    page.wait_for_url(f"{live_server.url}/t/acme/jobs/**")
    page.wait_for_selector("text=Read rights")
    rights = page.inner_text("section.access-sync")
    assert "1 document its system lets no one here read: admins only" in rights and "legal/nda.md" in rights
    assert_accessible(page)

    source = Source.objects.get(kind="dokuwiki")
    salaries = Document.objects.get(source=source, document_key="hr/salaries.md")
    assert salaries.effective_access == ["user:hanna"]
    page.goto(f"{live_server.url}/t/acme/documents/{salaries.public_id}/")
    text = page.inner_text("main")
    assert "created hr:salaries" in text and "wikiadmin" in text
    assert_accessible(page)
