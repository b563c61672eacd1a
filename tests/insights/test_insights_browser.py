"""The insights and the owner's flow in a real browser (Debian's Chromium driven by Playwright), in English and
Spanish: an admin reads the page's pictures and its gaps; the owner of the nearest document writes the missing text;
an evaluation run that answers the gap's questions closes it, and the page counts it."""

from __future__ import annotations

import shutil

import pytest

from feedback.models import EvalQuestion, EvalRun
from insights import gaps
from insights.models import Gap
from tenants.models import Membership
from tests.chat.test_recall_browser import _login
from tests.factories import make_folder_source, make_member, make_tenant
from tests.insights.test_insights import PARKING, ask
from tests.test_languages_browser import english_left

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (scripts/test.sh)"),
]


def test_an_admin_reads_the_insights_and_an_owner_closes_a_gap_in_both_languages(
    live_server, transactional_db, browser, tmp_path
):
    tenant = make_tenant(slug="acme", name="Acme")
    make_member(tenant, role=Membership.Role.ADMIN, username="ada")
    olga = make_member(tenant, role=Membership.Role.STAFF, username="olga")
    source = make_folder_source(tenant=tenant, root=tmp_path / "kb", files={
        "facilities.md": "# Facilities\n\nVisitors park in the street. Employees cycle: the office has a bicycle room "
                         "in the basement.\n",
        "travel.md": "# Travel\n\nThe per diem for travel is 42 EUR a day.\n"})  # fmt: skip
    source.owner = olga
    source.save()
    for question in PARKING:
        ask(tenant, question)
    ask(tenant, "What is the per diem?", status="answered", cite="travel.md", channel="api")
    gaps.refresh(tenant)
    gap = Gap.objects.get()
    assert gap.owner == olga

    admin = browser.new_page()
    _login(admin, live_server.url, "ada", "/t/acme/insights/")
    admin.wait_for_selector("svg.chart rect")
    assert "6 answers from" in admin.inner_text("#insights-summary")
    assert admin.locator("table.gaps tr.gap").count() == 1 and "olga" in admin.inner_text("table.gaps")
    admin.fill("#i-start", "2026-02-01")
    admin.fill("#i-end", "2026-01-01")
    admin.click("#insights-filters button[type=submit]")
    assert "ends before it starts" in admin.inner_text("#insights-problem")  # a message, not a 500
    admin.click(".language-switch a[lang=es]")
    admin.goto(f"{live_server.url}/t/acme/insights/")
    assert admin.inner_text("h1") == "Análisis"
    left = english_left(admin)
    assert left == [], "\n".join(left)

    owner = browser.new_context(locale="es-ES").new_page()
    _login(owner, live_server.url, "olga", "/t/acme/chat/")
    owner.click("nav.sections >> text=Lagunas que puede cerrar")
    owner.click("table.gaps tr.gap a")
    owner.wait_for_selector(".gap .draft")  # a draft from what exists: the facilities sentence, cited
    assert "facilities.md" in owner.inner_text(".gap .draft")
    there = owner.inner_text(".gap-write[data-where=there]")  # a folder's file is edited where it lives, not here
    assert "O edite facilities.md donde está" in there and "Carpeta del servidor" in there
    left = english_left(owner)
    assert left == [], "\n".join(left)
    owner.fill("#gap-text", "Employees park in garage B, level 2, with their badge.")
    owner.fill("#gap-expected", "garage B")
    owner.click(".gap-write[data-where=new] button[type=submit]")
    owner.wait_for_selector(".flash")
    assert "Gracias" in owner.inner_text(".flash")
    gap.refresh_from_db()
    assert gap.state == "written" and gap.written_by == "olga"

    asked = EvalQuestion.objects.filter(answer="garage B")
    rows = [{"uuid": str(q.public_id), "ans_phrase": 1.0, "refused": False} for q in asked]
    EvalRun.objects.create(tenant=tenant, state="done", answers=True, results=rows)
    admin.goto(f"{live_server.url}/t/acme/insights/")
    assert "1 cerradas" in admin.inner_text(".insights") and admin.locator("table.gaps tr.gap").count() == 0


def test_an_owner_edits_the_nearest_document_in_the_browser_and_it_becomes_its_next_version(
    live_server, transactional_db, browser
):
    from django.test import TestCase

    from knowledge import services as knowledge
    from knowledge.models import Document
    from tests.insights.test_insights import FACILITIES

    tenant = make_tenant(slug="acme", name="Acme")
    olga = make_member(tenant, role=Membership.Role.STAFF, username="olga")
    with TestCase.captureOnCommitCallbacks(execute=True):
        knowledge.upload_enqueue(tenant=tenant, source=None, uploads=[("facilities.md", FACILITIES.encode())])
    Document.objects.filter(document_key="facilities.md").update(owner=olga)
    for question in PARKING[:3]:
        ask(tenant, question)
    gaps.refresh(tenant)
    gap = Gap.objects.get()

    owner = browser.new_page()
    _login(owner, live_server.url, "olga", f"/t/acme/gaps/{gap.public_id}/")
    edited = owner.locator("#gap-edited")
    assert "bicycle room in the basement" in edited.input_value()  # its text as the knowledge base holds it
    edited.fill(edited.input_value() + "\nEmployees park in garage B, level 2, with their badge.\n")
    owner.fill("#gap-edited-expected", "garage B")
    owner.click(".gap-write[data-where=edit] button[type=submit]")
    owner.wait_for_selector(".flash")
    assert "In facilities.md." in owner.inner_text(".gap")
    document = Document.objects.get(document_key="facilities.md")
    assert document.version == 2 and Gap.objects.get().state == "written"
