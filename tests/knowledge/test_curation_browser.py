"""The curation app in a real browser (Debian's Chromium via Playwright)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowledge.models import Chunk
from tenants.models import Membership
from tests.factories import make_member, make_tenant

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh installs it)"
    ),
]
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _login(browser, base: str, username: str):  # type: ignore[no-untyped-def]
    page = browser.new_page()
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw-for-tests-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


def test_an_admin_uploads_curates_and_sees_the_critical_chunk_first(live_server, transactional_db, browser, tmp_path):
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    guide = tmp_path / "router-guide.md"
    guide.write_text(
        "# Router guide\n\nThe router ships with a power cable and a quick start card.\n\n"
        "## Reset\n\n" + "Hold the reset button for ten seconds to restore the factory settings.\n" * 15 + "\n"
        "## Lights\n\n" + "A blinking orange light means the router is updating its firmware.\n" * 15
    )
    page = _login(browser, live_server.url, "ada")
    page.goto(f"{live_server.url}/t/acme/upload/")
    page.set_input_files("#files", [str(FIXTURES / "handbook.pdf"), str(guide)])
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector(".progress[aria-valuenow='100']", timeout=60_000)
    assert "100 %" in page.inner_text(".progress")
    assert "2 added" in page.inner_text("#job-progress")

    page.click("text=See the documents")
    page.click("text=router-guide.md")
    page.wait_for_selector(".chunk")
    lights = page.locator(".chunk", has_text="blinking orange light")
    lights.locator("button.mark").click()
    page.wait_for_selector(".chunk.critical >> text=★ Critical")
    assert Chunk.objects.get(text__contains="blinking orange").critical

    page.goto(f"{live_server.url}/t/acme/search/")
    page.fill("#q", "router")
    page.check("input[name=bootstrap]")
    page.click("form.row button[type=submit]")
    page.wait_for_selector(".results .result")
    first = page.locator(".results .result").first
    assert "blinking orange light" in first.inner_text() and "critical" in first.inner_text()
    assert "blinking orange light" in page.inner_text("#bootstrap-critical")

    page.goto(f"{live_server.url}/t/acme/documents/?q=handbook")
    page.click("text=handbook.pdf")
    assert "pages 1–2" in page.inner_text(".chunks")  # the handbook chunk covers both pages


def test_staff_and_other_tenants_admins_cannot_reach_curation(live_server, transactional_db, browser):
    acme = make_tenant(slug="acme", name="Acme")
    globex = make_tenant(slug="globex", name="Globex")
    make_member(acme, role=Membership.Role.STAFF, username="sam")
    make_member(globex, role=Membership.Role.ADMIN, username="gina")
    for username in ("sam", "gina"):
        page = _login(browser, live_server.url, username)
        for path in ("sources/", "upload/", "documents/", "search/?q=x"):
            assert page.goto(f"{live_server.url}/t/acme/{path}").status == 404, (username, path)
    assert page.goto(f"{live_server.url}/t/globex/sources/").status == 200


def test_an_upload_where_every_file_was_skipped_is_a_warning_with_its_reasons_open(
    live_server, transactional_db, browser, tmp_path
):  # fmt: skip
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    (tmp_path / "empty.md").write_text("")
    (tmp_path / "setup.exe").write_bytes(b"MZ\x90\x00" + bytes(200))
    page = _login(browser, live_server.url, "ada")
    page.goto(f"{live_server.url}/t/acme/upload/")
    page.set_input_files("#files", [str(tmp_path / "empty.md"), str(tmp_path / "setup.exe")])
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("#job-progress .summary", timeout=60_000)
    progress = page.locator("#job-progress")
    assert progress.locator(".notice.warning").is_visible()
    assert "Nothing was ingested" in progress.inner_text() and "Succeeded" not in progress.inner_text()
    skipped = progress.locator("details", has_text="Skipped")
    assert skipped.get_attribute("open") is not None  # the reasons are open, not collapsed
    assert "empty.md" in skipped.inner_text() and "setup.exe" in skipped.inner_text()


def test_an_admin_makes_groups_and_sets_who_sees_a_source_and_a_document(live_server, transactional_db, browser,
                                                                         tmp_path):  # fmt: skip
    from knowledge.models import Document, Source
    from tests.factories import make_folder_source

    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    make_member(tenant, username="hanna")
    files = {"salaries.md": "# Salaries\n\nBands are reviewed every March.\n", "leave.md": "# Leave\n\n25 days.\n"}
    make_folder_source(tenant=tenant, root=tmp_path / "hr", files=files, name="hr")
    page = _login(browser, live_server.url, "ada")

    page.goto(f"{live_server.url}/t/acme/members/")
    page.fill("#group-name", "hr")
    page.click("#group-create button[type=submit]")
    row = page.locator("tr[data-group='hr']")
    row.locator("select[name=username]").select_option("hanna")
    row.locator("button[value=add]").click()
    page.wait_for_selector("tr[data-group='hr'] >> text=hanna")
    assert "Added to a group" in page.inner_text(".audit")

    page.goto(f"{live_server.url}/t/acme/sources/")
    source = Source.objects.get(name="hr")
    form = page.locator(f"#source-access-{source.public_id}")
    form.locator("input[name=access]").fill("group:hr, group:nope")
    form.locator("button[type=submit]").click()
    page.wait_for_selector(f"#source-access-{source.public_id} .notice.error")  # HTMX swapped in the refusal
    assert "'nope'" in page.inner_text(f"#source-access-{source.public_id}")
    assert Source.objects.get(pk=source.pk).access == ["tenant"]
    page.locator(f"#source-access-{source.public_id} input[name=access]").fill("group:hr")
    page.locator(f"#source-access-{source.public_id} button[type=submit]").click()
    page.wait_for_selector(f"#source-access-{source.public_id} .badge.restricted")
    assert Source.objects.get(pk=source.pk).access == ["group:hr"]

    page.goto(f"{live_server.url}/t/acme/documents/")
    assert page.locator("tr", has_text="salaries.md").locator(".badge.restricted").count() == 1
    page.click("text=leave.md")
    assert "Members who see it: hanna" in page.inner_text("#document-access")
    page.fill("#document-access-input", "tenant")
    page.click("#document-access button[type=submit]")
    page.wait_for_selector("#document-access >> text=Its own list")
    leave = Document.objects.get(document_key="leave.md")
    assert leave.access == ["tenant"] and not leave.restricted
    page.click("#document-access button[name=inherit]")
    page.wait_for_selector("#document-access >> text=Inherits its source's list")
    assert Document.objects.get(pk=leave.pk).access is None
