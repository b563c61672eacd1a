"""Obsidian vault sources, with a real vault on disk, the real pipeline and a real vector store: links read as
Obsidian shows them, embeds carry the embedded text, tags and aliases count, the link graph is kept and shown on
every door through the viewer's access, bad links are reported and never guessed, a moved note keeps its history."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from knowledge.index import indexer
from knowledge.ingest import obsidian, pipeline
from knowledge.models import Chunk, Document, DocumentVersion, IngestJob, Source
from knowledge.search.bootstrap import bootstrap
from knowledge.search.retrieval import retrieve
from knowledge.services import document_set_access
from tenants.principals import Viewer
from tenants.services import api_key_issue
from tests.factories import make_member

VAULT = {
    ".obsidian/app.json": '{"theme": "dark"}',
    ".obsidian/workspace.json": '{"secret": "never read"}',
    ".trash/Old idea.md": "# Old idea\n\nThrown away.\n",
    "Home.md": "# Home\n\nStart at [[Calendar#Q3|the third quarter]] and read [[Onboarding]].\n\n"
    "Owner: [[People/Ana|Ana]]. See also [[Missing note]] and [[Ana]].\n",
    "Calendar.md": "---\ntags: [planning, status/active]\naliases:\n  - Company calendar\n  - Year plan\n---\n"
    "# Calendar\n\n## Q3\n\nThe offsite happens in September in Lisbon.\n\n## Q4\n\nBudget review.\n",
    "Onboarding.md": "# Onboarding\n\nNew staff read [[Home]] first. #howto\n\n![[Calendar#Q3]]\n\n"
    "Ask in the channel. ^ask-block\n\n```\n[[Not a link]] #not-a-tag\n```\n",
    "People/Ana.md": "# Ana\n\nAna runs support. Back to [[Home]].\n",
    "Archive/Ana.md": "# Ana (old)\n\nAna ran sales in 2020. [[Onboarding#^ask-block]]\n",
    "Notes/Meeting.md": "# Meeting\n\nDiscussed [[Calendar]] and [[Onboarding]] with the team.\n",
}


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def vault(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "Company vault"
    _write(root, VAULT)
    call_command("ingest", "acme", str(root), "--source", "wiki")  # found a vault by its .obsidian/ folder
    source = Source.objects.get(kind="obsidian")
    return source, root


def _text(key: str) -> str:
    document = Document.objects.get(document_key=key)
    chunks = Chunk.objects.filter(document_version__document=document, document_version__version=document.version)
    return "\n".join(chunks.order_by("index").values_list("text", flat=True))


def test_obsidian_resolves_links_as_obsidian_does():
    vault = obsidian.Vault(["Home.md", "People/Ana.md", "Archive/Ana.md", "Calendar.md", "img/logo.png"])
    assert vault.resolve("Calendar") == ("Calendar.md", [])
    assert vault.resolve("calendar.md") == ("Calendar.md", [])
    assert vault.resolve("People/Ana") == ("People/Ana.md", [])
    assert vault.resolve("Ana") == (None, ["Archive/Ana.md", "People/Ana.md"])
    assert vault.resolve("logo.png") == ("img/logo.png", [])
    assert vault.resolve("Nobody") == (None, [])
    rendered = obsidian.render(vault, "Home.md", "See [[Calendar#Q3|the third quarter]], [[Calendar#Q4]], "
                               "[[People/Ana]], [[Home#^abc]] and `[[code]]` #tag/nested.\n")  # fmt: skip
    assert rendered.text == "See the third quarter, Calendar > Q4, People/Ana, Home and `[[code]]` #tag/nested.\n"
    assert [(link.target, link.heading) for link in rendered.links] == [
        ("Calendar", "Q3"), ("Calendar", "Q4"), ("People/Ana", ""), ("Home", "^abc")]  # fmt: skip
    assert rendered.tags == ["tag", "tag/nested"]


def test_a_vault_is_read_as_obsidian_shows_it(vault, tenant_a):  # type: ignore[no-untyped-def]
    source, _ = vault
    assert source.source_id == "src:acme:obsidian:wiki"
    keys = set(Document.objects.filter(source=source).values_list("document_key", flat=True))
    assert keys == {"Home.md", "Calendar.md", "Onboarding.md", "People/Ana.md", "Archive/Ana.md", "Notes/Meeting.md"}
    home = _text("Home.md")
    assert "Start at the third quarter and read Onboarding." in home and "[[" not in home
    onboarding = _text("Onboarding.md")
    assert "[Embedded from Calendar.md#Q3]" in onboarding and "offsite happens in September in Lisbon" in onboarding
    assert "Budget review" not in onboarding  # only the embedded section
    assert "[[Not a link]]" in onboarding  # code stays as written
    calendar = Document.objects.get(document_key="Calendar.md")
    assert {"planning", "status", "status/active"} <= {t.name for t in calendar.tags.all()}
    assert "howto" in {t.name for t in Document.objects.get(document_key="Onboarding.md").tags.all()}
    assert "not-a-tag" not in {t.name for t in Document.objects.get(document_key="Onboarding.md").tags.all()}
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="company calendar year plan", top_k=3)
    assert hits[0].chunk.document.document_key == "Calendar.md"


def test_bad_links_are_reported_never_guessed(vault):  # type: ignore[no-untyped-def]
    source, _ = vault
    job = IngestJob.objects.filter(source=source).latest("created_at")
    problems = [p["problem"] for p in job.params["link_problems"]]
    assert "Home.md: [[Ana]] is ambiguous: Archive/Ana.md, People/Ana.md" in problems
    assert "Home.md: [[Missing note]] resolves to no note" in problems
    home = Document.objects.get(document_key="Home.md")
    assert {link.target: link.resolved_id for link in home.links_out.all()}["Ana"] is None


def test_the_job_page_and_api_report_bad_links_to_whoever_sees_everything(vault, tenant_a, client_a):  # type: ignore[no-untyped-def]
    source, _ = vault
    job = IngestJob.objects.filter(source=source).latest("created_at")
    page = client_a.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    assert "[[Ana]] is ambiguous: Archive/Ana.md, People/Ana.md" in page
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, acts_for=['all'])[1]}")
    problems = client.get(f"/api/v1/tenants/acme/jobs/{job.public_id}/").json()["link_problems"]
    assert "Home.md: [[Missing note]] resolves to no note" in [p["problem"] for p in problems]
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, scope='read')[1]}")
    assert client.get(f"/api/v1/tenants/acme/jobs/{job.public_id}/").json()["link_problems"] == []


def test_links_and_backlinks_on_every_door_through_access(vault, tenant_a, client_a):  # type: ignore[no-untyped-def]
    source, _ = vault
    home = Document.objects.get(document_key="Home.md")
    calendar = Document.objects.get(document_key="Calendar.md")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    body = client.get(f"/api/v1/tenants/acme/documents/{home.public_id}/").json()
    assert {(link["document_key"], link["heading"]) for link in body["links"] if link["document_key"]} >= {
        ("Calendar.md", "Q3"), ("Onboarding.md", ""), ("People/Ana.md", "")}  # fmt: skip
    backlinks = client.get(f"/api/v1/tenants/acme/documents/{calendar.public_id}/").json()["backlinks"]
    assert {b["document_key"] for b in backlinks} == {"Home.md", "Onboarding.md", "Notes/Meeting.md"}
    page = client_a.get(f"/t/acme/documents/{calendar.public_id}/").content.decode()
    assert "Linked from" in page and "Notes/Meeting.md" in page
    # Meeting notes are restricted to a group: staff outside it see neither the note nor its link.
    from tenants.services import group_create

    group_create(tenant=tenant_a, name="board")
    document_set_access(tenant=tenant_a, document=Document.objects.get(document_key="Notes/Meeting.md"),
                        access=["group:board"])  # fmt: skip
    indexer.drain()
    make_member(tenant_a, username="sam")
    key, staff_key = api_key_issue(tenant=tenant_a, scope="read", acts_for=["user:sam"])
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {staff_key}")
    backlinks = client.get(f"/api/v1/tenants/acme/documents/{calendar.public_id}/").json()["backlinks"]
    assert {b["document_key"] for b in backlinks} == {"Home.md", "Onboarding.md"}
    hidden = client.get(
        f"/api/v1/tenants/acme/documents/{Document.objects.get(document_key='Notes/Meeting.md').public_id}/"
    )
    assert hidden.status_code == 404
    from mcp_tools.operations import get_document

    mcp = get_document(key, calendar.document_id)
    assert {b["document_key"] for b in mcp["backlinks"]} == {"Home.md", "Onboarding.md"}


def test_bootstrap_puts_hub_notes_first(vault, tenant_a):  # type: ignore[no-untyped-def]
    pack = bootstrap(viewer=Viewer.everything(tenant_a))
    hubs = [item for item in pack["items"] if item["kind"] == "hub"]
    assert hubs and pack["items"][0]["kind"] == "hub"
    assert hubs[0]["document_key"] in {"Calendar.md", "Onboarding.md", "Home.md"} and hubs[0]["backlinks"] >= 2


def test_a_moved_note_keeps_its_history_and_an_embed_follows_its_source(vault):  # type: ignore[no-untyped-def]
    source, root = vault
    calendar = Document.objects.get(document_key="Calendar.md")
    (root / "Plans").mkdir()
    os.rename(root / "Calendar.md", root / "Plans" / "Calendar.md")
    job = pipeline.sync_folder(source=source, root=root)
    moved = Document.objects.get(source=source, document_key="Plans/Calendar.md")
    assert moved.pk == calendar.pk and moved.versions.count() == 2
    assert not Document.objects.filter(source=source, document_key="Calendar.md").exists()
    assert job.retired == 0
    # The links that named it by its bare name still resolve; its backlinks came with it.
    assert {d.document.document_key for d in moved.links_in.all()} >= {"Home.md", "Notes/Meeting.md"}
    # Editing the embedded section changes the note that embeds it, with nobody touching that note.
    text = (root / "Plans" / "Calendar.md").read_text().replace("in Lisbon", "in Porto")
    (root / "Plans" / "Calendar.md").write_text(text)
    pipeline.sync_folder(source=source, root=root)
    assert "in Porto" in _text("Onboarding.md")
    assert DocumentVersion.objects.filter(document__document_key="Onboarding.md").count() == 3


def test_the_api_creates_a_vault_inside_the_allowed_roots(tenant_a, tmp_path, settings):  # type: ignore[no-untyped-def]
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    _write(tmp_path / "notes", VAULT)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    refused = client.post("/api/v1/tenants/acme/sources/", {"kind": "obsidian", "name": "x", "path": "/etc"},
                          format="json")  # fmt: skip
    assert refused.status_code == 400 and "outside" in refused.json()["path"][0]
    escape = client.post("/api/v1/tenants/acme/sources/", {"kind": "obsidian", "name": "y",
                         "path": str(tmp_path / "notes" / ".." / ".." / "..")}, format="json")  # fmt: skip
    assert escape.status_code == 400
    created = client.post("/api/v1/tenants/acme/sources/", {"kind": "obsidian", "name": "notes",
                          "path": str(tmp_path / "notes"), "sync_every_minutes": 15}, format="json")  # fmt: skip
    assert created.status_code == 201 and created.json()["source_id"] == "src:acme:obsidian:notes"
    assert created.json()["schedule"]["every_minutes"] == 15


def test_the_sources_page_creates_a_vault(tenant_a, tmp_path, settings, client_a):  # type: ignore[no-untyped-def]
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    _write(tmp_path / "notes", VAULT)
    done = client_a.post("/t/acme/sources/", {"kind": "obsidian", "name": "notes", "path": str(tmp_path / "notes")},
                         follow=True)  # fmt: skip
    assert "Created src:acme:obsidian:notes" in done.content.decode()
    outside = client_a.post("/t/acme/sources/", {"kind": "obsidian", "name": "etc", "path": "/etc"}, follow=True)
    assert "outside the folders this server allows" in outside.content.decode()
    assert list(Source.objects.filter(kind="obsidian").values_list("name", flat=True)) == ["notes"]


def test_image_attachments_are_read_by_ocr_and_a_photo_without_text_is_skipped(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    from PIL import Image

    from knowledge.ingest.ocr import installed_languages
    from tests.factories import page_image

    if not {"eng", "spa"} <= installed_languages():
        pytest.skip("needs Tesseract with eng and spa (scripts/_ocr.sh)")
    root = tmp_path / "vault"
    _write(root, {".obsidian/app.json": "{}", "Offsite.md": "# Offsite\n\nThe whiteboard: ![[whiteboard.png]]\n"})
    (root / "assets").mkdir()
    page_image(["Offsite budget", "twelve thousand euros for the whole team."]).save(root / "assets" / "whiteboard.png")
    Image.new("RGB", (400, 300), (40, 120, 200)).save(root / "assets" / "sky.jpg")
    (root / "assets" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really an image")
    call_command("ingest", "acme", str(root))
    job = IngestJob.objects.latest("created_at")
    board = Document.objects.get(document_key="assets/whiteboard.png")
    assert board.source_type == "image" and "twelve thousand euros" in _text("assets/whiteboard.png")
    assert {s["key"]: s["reason"] for s in job.skips}["assets/sky.jpg"] == "empty"
    assert "assets/broken.png" in {e["key"] for e in job.errors}  # a broken image is one file's failure
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="offsite budget euros", top_k=3)
    assert "assets/whiteboard.png" in [h.chunk.document.document_key for h in hits]
    offsite = Document.objects.get(document_key="Offsite.md")
    assert [link.resolved_id for link in offsite.links_out.all()] == [board.pk]  # the attachment is in the graph


def test_embedded_text_is_cited_to_the_note_it_comes_from(vault, tenant_a):  # type: ignore[no-untyped-def]
    from chat.citations import citation_of

    hits = retrieve(viewer=Viewer.everything(tenant_a), query="new staff onboarding offsite Lisbon", top_k=8)
    onboarding = next(h for h in hits if h.chunk.document.document_key == "Onboarding.md")
    embedded = citation_of(1, onboarding, "The offsite happens in September in Lisbon.")
    assert embedded["document_key"] == "Calendar.md" and embedded["embedded_in"]["document_key"] == "Onboarding.md"
    assert embedded["document_id"] == Document.objects.get(document_key="Calendar.md").document_id
    assert embedded["label"].startswith("Calendar.md (embedded in Onboarding.md")
    own = citation_of(1, onboarding, "New staff read Home first.")
    assert own["document_key"] == "Onboarding.md" and "embedded_in" not in own


def test_another_tenant_gets_nothing_of_a_vault(vault, tenant_a, tenant_b):  # type: ignore[no-untyped-def]
    calendar = Document.objects.get(document_key="Calendar.md")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_b)[1]}")
    assert other.get(f"/api/v1/tenants/globex/documents/{calendar.public_id}/").status_code == 404
    pack = bootstrap(viewer=Viewer.everything(tenant_b))
    assert [item for item in pack["items"] if item["kind"] == "hub"] == []
    assert not retrieve(viewer=Viewer.everything(tenant_b), query="company calendar year plan", top_k=3)
