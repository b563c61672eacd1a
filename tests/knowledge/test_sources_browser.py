"""An admin adds an Obsidian vault and a git repository in a real browser (Debian's Chromium through Playwright):
from the upload page to the sources form, each synced from its row, each job page saying what the sync found."""

from __future__ import annotations

import shutil

import pytest

from knowledge.models import Document, Source
from tenants.models import Membership
from tests.factories import make_member, make_tenant
from tests.knowledge.test_git_sources import Repo, _guide
from tests.knowledge.test_obsidian import VAULT, _write
from tests.tenants.test_self_service_browser import _sign_in, assert_accessible

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh)")


def test_an_admin_adds_a_vault_and_a_repository_and_syncs_them(live_server, transactional_db, browser, tmp_path,
                                                               settings):  # fmt: skip
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="alice")
    _write(tmp_path / "wiki", VAULT)
    repo = Repo(tmp_path / "handbook")
    repo.commit("Add the returns guide", {"guide.md": _guide(14)})
    repo.commit("Returns: 30 days", {"guide.md": _guide(30)})

    page = browser.new_page()
    _sign_in(page, live_server.url, "alice", "pw-for-tests-123")
    page.goto(f"{live_server.url}/t/acme/upload/")
    page.click("text=Add a server folder, an Obsidian vault or a git repository")
    page.wait_for_url(f"{live_server.url}/t/acme/sources/#new-source")
    assert_accessible(page)
    # What the admin can add alone (issue 50): the workspace's drop folder, where it is, what it holds.
    help_text = page.inner_text("#where-help")
    assert "drop folder" in help_text and "/drop/acme" in help_text and "Allowed locations" in help_text

    page.select_option("#kind", "obsidian")
    page.fill("#name", "wiki")
    page.fill("#path", str(tmp_path / "wiki"))
    page.click("#new-source button[type=submit]")
    assert "Created src:acme:obsidian:wiki" in page.inner_text("main")
    vault = Source.objects.get(kind="obsidian")
    page.locator("tr", has_text="src:acme:obsidian:wiki").locator("button:has-text('Re-sync')").click()
    page.wait_for_url(f"{live_server.url}/t/acme/jobs/**")
    page.wait_for_selector("text=Links that resolve to no one note")
    assert "[[Ana]] is ambiguous: Archive/Ana.md, People/Ana.md" in page.inner_text("main")
    assert Document.objects.filter(source=vault, document_key="Calendar.md").exists()

    page.goto(f"{live_server.url}/t/acme/sources/")
    page.select_option("#kind", "git")
    page.fill("#name", "handbook")
    page.fill("#path", str(repo.path))
    page.fill("#branch", "main")
    page.click("#new-source button[type=submit]")
    assert "Created src:acme:git:handbook" in page.inner_text(
        "main"
    ) and "Its first sync is running" in page.inner_text("main")
    page.locator("tr", has_text="src:acme:git:handbook").locator("td:nth-child(5) a").click()  # its first sync's job
    page.wait_for_url(f"{live_server.url}/t/acme/jobs/**")
    page.wait_for_selector("text=Read 2 commit(s)")
    assert_accessible(page)
    guide = Document.objects.get(source__kind="git", document_key="guide.md")
    page.goto(f"{live_server.url}/t/acme/documents/{guide.public_id}/")
    assert "Returns: 30 days" in page.inner_text("main") and "Add the returns guide" in page.inner_text("main")
    assert_accessible(page)

    page.goto(f"{live_server.url}/t/acme/sources/")
    page.select_option("#kind", "git")
    page.fill("#name", "system")
    page.fill("#path", "/etc")
    page.click("#new-source button[type=submit]")
    assert "outside the folders this server allows" in page.inner_text("main")
    assert not Source.objects.filter(name="system").exists()
