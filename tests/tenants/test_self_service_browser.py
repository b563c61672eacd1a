"""A company runs itself in a real browser (Debian's Chromium through Playwright): the operator creates a workspace
and joins it, invites its admin by e-mail, the admin accepts, forgets the password and resets it, creates a read key
on the keys page and an agent uses it; a batch with an empty, a corrupt and a renamed file shows each file's row and
reason; a curation fix that already holds is not offered. Every page on the way passes axe-core's contrast rules."""

from __future__ import annotations

import json
import re
import shutil
import urllib.request

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from chat.models import Verdict
from knowledge.models import Chunk, Document
from tenants.models import ApiKey, Membership, MembershipEvent, Tenant
from tests.factories import make_answer, make_folder_source, make_member

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh)")

User = get_user_model()
PASSWORD = "a-long-pass-phrase-42"
AXE_RULES = ["color-contrast", "label", "button-name", "link-name", "select-name", "document-title"]


def assert_accessible(page) -> None:  # type: ignore[no-untyped-def]
    """axe-core (bundled by axe-playwright-python) on the page as it is now: contrast (WCAG AA) and names."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page, options={"runOnly": {"type": "rule", "values": AXE_RULES}})
    problems = [(v["id"], [n["target"] for n in v["nodes"]][:5]) for v in results.response["violations"]]
    assert problems == [], f"{page.url}: {problems}"


def _link(address: str, path: str) -> str:
    (message,) = [m for m in mail.outbox if m.to == [address]][-1:]
    return re.search(rf"https?://\S+{path}\S*", message.body).group(0)


def _sign_in(page, url: str, username: str, password: str) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")


def test_an_operator_opens_a_workspace_an_admin_joins_by_email_resets_a_password_and_issues_a_key(
    live_server, transactional_db, browser
):
    User.objects.create_superuser("root", email="root@ops.example", password="pw-for-tests-123")
    page = browser.new_page()
    _sign_in(page, live_server.url, "root", "pw-for-tests-123")
    assert_accessible(page)
    page.click("text=New workspace")
    page.fill("#slug", "orion")
    page.fill("#name", "Orion Support")
    assert page.is_checked("#join")  # offered by default: the operator joins, recorded
    page.fill("#admin", "ada@orion.example")
    page.click("button:has-text('Create the workspace')")
    page.wait_for_url(f"{live_server.url}/t/orion/members/")
    assert page.locator("tr[data-email='ada@orion.example'][data-state='pending']").is_visible()
    assert_accessible(page)
    orion = Tenant.objects.get(slug="orion")
    assert MembershipEvent.objects.for_tenant(orion).filter(action="operator_joined", actor__username="root").exists()

    # The admin accepts the e-mailed invitation, then forgets the password and resets it from the sign-in page.
    page.context.clear_cookies()
    page.goto(_link("ada@orion.example", "/invitations/"))
    assert_accessible(page)
    page.fill("#id_username", "ada")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("#accept-invitation button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    assert "Orion Support" in page.inner_text("main")
    page.click("text=Sign out")
    page.click("#forgot-password")
    assert_accessible(page)
    page.fill("#id_email", "ada@orion.example")
    page.click("#password-reset button[type=submit]")
    page.wait_for_selector("#reset-sent")
    page.goto(_link("ada@orion.example", "/accounts/reset/"))
    page.fill("#id_new_password1", "a-new-pass-phrase-77")
    page.fill("#id_new_password2", "a-new-pass-phrase-77")
    page.click("#set-password button[type=submit]")
    page.wait_for_selector("text=Your password is set")
    _sign_in(page, live_server.url, "ada", "a-new-pass-phrase-77")

    # A read key from the keys page, shown once; an agent uses it; revoked, it fails at once.
    page.click("text=API keys")
    page.fill("#key-name", "support bot")
    page.select_option("#key-scope", "read")
    page.click("#key-create button[type=submit]")
    raw = page.inner_text("#new-key-value").strip()
    assert raw.startswith("rag_") and ApiKey.objects.get(name="support bot").scope == "read"
    examples = page.locator("#key-examples")  # each door's call, with this key, open at once (issue 50)
    assert examples.is_visible() and f"Api-Key {raw}" in examples.inner_text()
    assert f"Bearer {raw}" in examples.inner_text() and f"{live_server.url}/v1" in examples.inner_text()
    assert_accessible(page)

    def agent(path: str, body: dict | None = None) -> int:
        headers = {"Authorization": f"Api-Key {raw}", "Content-Type": "application/json"}
        data = json.dumps(body).encode() if body else None
        url = f"{live_server.url}/api/v1/tenants/orion/{path}"
        request = urllib.request.Request(url, method="POST" if body else "GET", data=data, headers=headers)
        try:
            return urllib.request.urlopen(request, timeout=30).status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert agent("") == 200 and agent("retrieve/", {"query": "returns"}) == 200
    page.reload()
    assert raw not in page.content() and ApiKey.objects.count() == 1  # shown only once; a reload makes no other
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("tr[data-state='active'] button:has-text('Revoke')")
    page.wait_for_selector("tr[data-state='revoked']")
    assert agent("") == 401


def test_a_batch_with_an_empty_a_corrupt_and_a_renamed_file_shows_each_files_row_and_reason(
    live_server, transactional_db, browser
):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    page = browser.new_page()
    _sign_in(page, live_server.url, "ada", "pw-for-tests-123")
    page.goto(f"{live_server.url}/t/acme/upload/")
    hint = page.inner_text("#formats")
    assert all(name in hint for name in ("Word", "Excel", "PowerPoint", "OpenDocument"))
    page.set_input_files("#files", [
        {"name": "guide.md", "mimeType": "text/markdown", "buffer": b"# Guide\n\nThe router goes into port 4.\n"},
        {"name": "empty.md", "mimeType": "text/markdown", "buffer": b""},
        {"name": "corrupt.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4\n1 0 obj garbage"},
        # A browser sends no folder parts (the API test sends ../../etc/passwd.md); a leading space is renamed too.
        {"name": " passwd.md", "mimeType": "text/markdown", "buffer": b"# Passwords\n\nNever share.\n"},
    ])  # fmt: skip
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector(".progress[aria-valuenow='100']", timeout=120_000)
    assert "4 of 4 files" in page.inner_text("#files-count")
    rows = {row.get_attribute("data-key"): row for row in page.locator("#job-files tbody tr").all()}
    assert set(rows) == {"guide.md", "empty.md", "corrupt.pdf", "passwd.md"}
    assert rows["guide.md"].get_attribute("data-status") == "added"
    assert rows["empty.md"].get_attribute("data-status") == "skipped" and "empty" in rows["empty.md"].inner_text()
    assert rows["corrupt.pdf"].get_attribute("data-status") == "failed"
    assert "damaged" in rows["corrupt.pdf"].inner_text()
    assert "stored as passwd.md: the name was normalised" in rows["passwd.md"].inner_text()
    assert page.locator(".notice", has_text="stored as passwd.md").is_visible()
    # A corrupt PDF fails however often it is sent: no retry is offered, the page says what would help.
    assert page.locator("#retry-failed").count() == 0
    assert "cannot be read as it was sent" in page.inner_text("#unreadable")
    assert_accessible(page)  # the "100 %" label, the states, the table: WCAG AA contrast


def test_a_curation_fix_that_already_holds_is_not_offered(live_server, transactional_db, browser, tmp_path):
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    make_folder_source(tenant=tenant, root=tmp_path / "kb",
                       files={"warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n"})  # fmt: skip
    document = Document.objects.get(tenant=tenant)
    Chunk.objects.filter(document=document).update(critical=True)
    staff = make_member(tenant, username="sam")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    item = Verdict.objects.create(tenant=tenant, answer=make_answer(tenant, user=staff), helpful=False,
                                  reason="wrong_fact", channel="chat", user=staff, document=document)  # fmt: skip
    page = browser.new_page()
    _sign_in(page, live_server.url, "ada", "pw-for-tests-123")
    page.goto(f"{live_server.url}/t/acme/curation/{item.public_id}/")
    assert page.locator("button:has-text('Mark this chunk critical')").count() == 0
    assert page.locator("button:has-text('Mark critical')").count() == 0
    assert page.locator(".chunk.candidate .badge").first.inner_text() == "critical already"
    assert_accessible(page)


def test_every_page_of_a_tenant_admin_meets_wcag_aa_contrast(live_server, transactional_db, browser, tmp_path):
    """Each page an admin or staff member works in, with real content, through axe-core's rules."""
    tenant = Tenant.objects.create(slug="acme", name="Acme")
    make_folder_source(tenant=tenant, root=tmp_path / "kb",
                       files={"warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n"})  # fmt: skip
    staff = make_member(tenant, username="sam")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    item = Verdict.objects.create(tenant=tenant, answer=make_answer(tenant, user=staff), helpful=False,
                                  reason="wrong_fact", channel="chat", user=staff)  # fmt: skip
    document = Document.objects.get(tenant=tenant)
    page = browser.new_page()
    for path in ("/accounts/login/", "/accounts/password_reset/"):
        page.goto(f"{live_server.url}{path}")
        assert_accessible(page)
    _sign_in(page, live_server.url, "ada", "pw-for-tests-123")
    pages = [
        "sources/",
        "upload/",
        "documents/",
        f"documents/{document.public_id}/",
        "search/?q=warranty",
        "curation/",
        f"curation/{item.public_id}/",
        "review/",
        "evaluation/",
        "members/",
        "keys/",
        "chat/",
    ]
    for path in ["/", *(f"/t/acme/{p}" for p in pages)]:
        page.goto(f"{live_server.url}{path}")
        assert_accessible(page)
