"""Access where one document refers to another, where a location is resolved, and under hostile input.

The company of tests/test_permissions.py (hanna in group:hr, sam outside it, alice an admin; keys acting for
tenant, group:hr, user:hanna and all), plus a vault open to the tenant whose `Index` note embeds `Board minutes`,
a note open to group:hr only that holds a canary. Each case here failed on the code before it was fixed: a vault
embed copied the restricted note's text into the open one; a key that could not see a document overwrote,
deleted or re-pointed it; git sources escaped the allowed roots; a YAML alias bomb expanded; the wrong-key limit
trusted X-Forwarded-For; a full disk left an upload's job queued; a re-created group revived old access.
"""

from __future__ import annotations

import io
import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.test import TestCase
from rest_framework.test import APIClient

from knowledge import ids, services, tasks
from knowledge.claims import EvidenceText, Verifier
from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.models import Document, DocumentVersion, IngestJob, Source, Status
from knowledge.search.retrieval import retrieve
from tenants.models import ApiKey, Membership, MembershipEvent
from tenants.principals import Viewer, viewer_for
from tenants.services import api_key_issue, group_create, group_delete, group_get, group_member_add
from tests.company import CommittingAPIClient
from tests.factories import make_member
from tests.knowledge.test_obsidian import _write
from tests.test_permissions import IDENTITIES, PRESENT, SESSION_USERS, _body, _client

EMBED_CANARY = "wombat4412falcon"
VAULT = {
    ".obsidian/app.json": "{}",
    "Board minutes.md": f"# Board minutes\n\nThe board approved the acquisition of Northwind for 4 million euros. "
    f"Reference {EMBED_CANARY}.\n",
    "Index.md": "# Company index\n\nStart here for the acquisition news.\n\n![[Board minutes]]\n\n"
    "Ask the office for the rest.\n",
}
EMBED_QUESTION = "What acquisition did the board approve?"
BASE = "/api/v1/tenants/acme"


@pytest.fixture
def wiki(company):  # type: ignore[no-untyped-def]
    """The vault, synced while everything in it is open (Index carries the minutes' text), then the minutes are
    narrowed to group:hr: the access change, its payload update and the vault's sync it queues all run."""
    root = Path(company["handbook"].path).parent / "wiki"
    _write(root, VAULT)
    source = pipeline.folder_source_get_or_create(tenant=company["tenant"], name="wiki", path=root, kind="obsidian")
    pipeline.sync_folder(source=source, root=root)
    indexer.drain()
    assert EMBED_CANARY in _served_text("Index.md")  # open to all: the embed is rendered
    minutes = Document.objects.get(document_key=ids.normalise_document_key("Board minutes.md"))
    with TestCase.captureOnCommitCallbacks(execute=False) as callbacks:
        services.document_set_access(tenant=company["tenant"], document=minutes, access=["group:hr"])
    return {**company, "wiki": source, "wiki_root": root, "minutes": minutes, "callbacks": callbacks}


def _doc(key: str) -> Document:
    """A document by its key as written ("Index.md")."""
    return Document.objects.get(document_key=ids.normalise_document_key(key))


def _served_text(key: str) -> str:
    document = _doc(key)
    return "\n".join(DocumentVersion.objects.get(document=document, version=document.version)
                     .chunks.order_by("index").values_list("text", flat=True))  # fmt: skip


def _identity_viewer(company: dict[str, Any], identity: str) -> Viewer:
    tenant = company["tenant"]
    if identity in SESSION_USERS:
        user = company["users"][SESSION_USERS[identity]]
        return viewer_for(tenant=tenant, membership=Membership.objects.get(tenant=tenant, user=user))
    return viewer_for(tenant=tenant, api_key=ApiKey.objects.get(tenant=tenant, name=identity))


def _embed_reads(company: dict[str, Any], identity: str) -> dict[str, tuple[int, str]]:
    """Every door that returns document text, for the embed question, as (status, body)."""
    client = _client(company, identity)
    index = _doc("Index.md")
    calls = {
        "retrieve": client.post(f"{BASE}/retrieve/", {"query": EMBED_QUESTION, "top_k": 8}, format="json"),
        "retrieve-specific": client.post(
            f"{BASE}/retrieve/", {"query": EMBED_QUESTION, "specific": True}, format="json"
        ),  # fmt: skip
        "bootstrap": client.post(f"{BASE}/bootstrap/", {"intent": "acquisition board"}, format="json"),
        "answer": client.post(f"{BASE}/answer/", {"question": EMBED_QUESTION}, format="json"),
        "answer-stream": client.post(
            f"{BASE}/answer/",
            {"question": EMBED_QUESTION, "stream": True},
            format="json",
            HTTP_ACCEPT="text/event-stream",
        ),  # fmt: skip
        "documents": client.get(f"{BASE}/documents/?q=acquisition"),
        "index": client.get(f"{BASE}/documents/{index.public_id}/"),
    }
    if identity not in SESSION_USERS:
        key = company["keys"][identity]
        openai = APIClient()
        openai.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        question = {"model": "acme", "messages": [{"role": "user", "content": EMBED_QUESTION}]}
        calls["openai"] = openai.post("/v1/chat/completions", question, format="json")
        calls["openai-stream"] = openai.post("/v1/chat/completions", {**question, "stream": True}, format="json")
        calls["dify"] = APIClient().post(
            f"{BASE}/dify/retrieval",
            {"knowledge_id": "wiki", "query": EMBED_QUESTION, "retrieval_setting": {"top_k": 5}},
            format="json", HTTP_AUTHORIZATION=f"Bearer {key}",
        )  # fmt: skip
    return {name: (response.status_code, _body(response)) for name, response in calls.items()}


# --- an embed carries the strictest access of what it copies ---------------------------------------------------------
@pytest.mark.parametrize("identity", PRESENT)
def test_a_restricted_note_embedded_in_an_open_one_reaches_only_its_own_readers_before_and_after_the_sync(
    wiki, identity
):
    sees = IDENTITIES[identity]
    viewer = _identity_viewer(wiki, identity)
    # 1. The access change is in SQL, its payload update and the vault's sync not yet run: no leak window.
    hits = retrieve(viewer=viewer, query=EMBED_QUESTION, top_k=8)
    assert any(EMBED_CANARY in h.chunk.text for h in hits) is sees
    # 2. The payloads are updated: the open note that carries the text is as strict as the text, in the store too.
    indexer.drain()
    hits = retrieve(viewer=viewer, query=EMBED_QUESTION, top_k=8)
    assert any(EMBED_CANARY in h.chunk.text for h in hits) is sees
    assert ("Index.md" in {h.chunk.document.display_key for h in hits}) is sees
    # 3. The queued sync renders the embed again: a placeholder where not every reader may see the minutes, and the
    # index is open to the tenant again, without their text.
    for callback in wiki["callbacks"]:
        callback()
    indexer.drain()
    served = _served_text("Index.md")
    assert EMBED_CANARY not in served and "[embedded note not shown]" in served
    assert _doc("Index.md").reader_list == ["tenant"]
    got = _embed_reads(wiki, identity)
    for door, (status, body) in got.items():
        assert status < 500, (door, status, body[:300])
        if not sees:
            assert EMBED_CANARY not in body, door
            assert "board minutes" not in body.lower(), (door, body[:400])
    assert got["index"][0] == 200  # the index itself is open to everyone again
    assert (EMBED_CANARY in got["retrieve"][1]) is sees  # from the minutes themselves, for their readers


def test_a_note_that_embeds_an_already_restricted_note_renders_a_placeholder_and_stays_open(wiki):
    for callback in wiki["callbacks"]:
        callback()
    _write(wiki["wiki_root"], {"Summary.md": "# Summary\n\nThe year in one page.\n\n![[Board minutes]]\n"})
    pipeline.sync_folder(source=wiki["wiki"], root=wiki["wiki_root"])
    indexer.drain()
    summary = _doc("Summary.md")
    assert summary.reader_list == ["tenant"] and EMBED_CANARY not in _served_text("Summary.md")
    assert not summary.links_out.get(embed=True).carried
    # Opened to the tenant again, the minutes are embedded again on the next sync.
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.document_set_access(tenant=wiki["tenant"], document=wiki["minutes"], access=None)
    indexer.drain()
    assert EMBED_CANARY in _served_text("Summary.md") and EMBED_CANARY in _served_text("Index.md")


def test_a_citation_names_an_embedded_note_only_where_every_reader_of_the_chunk_may_see_it(wiki):
    from chat.citations import citation_of

    indexer.drain()  # the index is restricted like the minutes, and still carries their text (its sync is queued)
    hits = retrieve(viewer=Viewer.everything(wiki["tenant"]), query=EMBED_QUESTION, top_k=8)
    index = next(h for h in hits if h.chunk.document.display_key == "Index.md")
    cited = citation_of(1, index, "The board approved the acquisition of Northwind for 4 million euros.")
    assert cited["document_key"] == "Board minutes.md"  # the index's readers are the minutes' readers now
    services.document_set_access(tenant=wiki["tenant"], document=wiki["minutes"], access=["user:alice"])
    index.chunk.document.refresh_from_db()
    services.document_set_access(tenant=wiki["tenant"], document=index.chunk.document, access=["group:hr"])
    index.chunk.document.refresh_from_db()
    index.chunk.document.readers = " group:hr "  # as if hanna's group could read the index but not the minutes
    cited = citation_of(1, index, "The board approved the acquisition of Northwind for 4 million euros.")
    assert cited["document_key"] == "Index.md" and "embedded_in" not in cited


def test_a_key_that_sees_everything_reads_a_notes_resolved_links(wiki):
    for callback in wiki["callbacks"]:
        callback()
    index = _doc("Index.md")
    links = _client(wiki, "key-all").get(f"{BASE}/documents/{index.public_id}/").json()["links"]
    assert [link["document_key"] for link in links] == ["Board minutes.md"]
    assert _client(wiki, "key-tenant").get(f"{BASE}/documents/{index.public_id}/").json()["links"] == []


# --- writes decide access like reads -----------------------------------------------------------------------------
@pytest.fixture
def shared(company):  # type: ignore[no-untyped-def]
    """An upload source open to the tenant holding an open note and `plan.md`, narrowed to group:hr, and write
    keys acting for tenant, for group:hr and for all."""
    tenant = company["tenant"]
    source = services.source_create(tenant=tenant, kind="upload", name="shared")
    pipeline.ingest_files(source=source, files=[("plan.md", b"# Plan\n\nWe close the Lyon office in May.\n"),
                                                ("open.md", b"# Open\n\nThe office opens at nine.\n")])  # fmt: skip
    plan = Document.objects.get(source=source, document_key="plan.md")
    services.document_set_access(tenant=tenant, document=plan, access=["group:hr"])
    indexer.drain()
    writers = {name: api_key_issue(tenant=tenant, name=name, scope="write", acts_for=acts_for)[1]
               for name, acts_for in (("w-tenant", None), ("w-group", ["group:hr"]), ("w-all", ["all"]))}  # fmt: skip
    return {**company, "shared": source, "plan": plan, "writers": writers}


def _writer(shared: dict[str, Any], name: str) -> APIClient:
    client = CommittingAPIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {shared['writers'][name]}")
    return client


def _upload(client: APIClient, source: Source, name: str, text: bytes):  # type: ignore[no-untyped-def]
    upload = io.BytesIO(text)
    upload.name = name
    return client.post(f"{BASE}/sources/{source.public_id}/upload/", {"files": [upload]}, format="multipart")


def test_a_key_that_cannot_see_a_document_neither_overwrites_nor_deletes_it_nor_learns_it_exists(shared):
    source, plan = shared["shared"], shared["plan"]
    attacker = _writer(shared, "w-tenant")
    same_name = _upload(attacker, source, "plan.md", b"# Plan\n\nThe attacker's text.\n")
    other_name = _upload(attacker, source, "notes.md", b"# Notes\n\nSomething.\n")
    assert same_name.status_code == other_name.status_code == 403
    assert same_name.json() == other_name.json()  # one message, naming no document
    assert "plan" not in same_name.content.decode().lower()
    assert attacker.post(f"{BASE}/sources/{source.public_id}/sync/").status_code == 403
    assert attacker.patch(f"{BASE}/sources/{source.public_id}/", {"tags": ["x"]}, format="json").status_code == 403
    assert attacker.delete(f"{BASE}/sources/{source.public_id}/").status_code == 403
    plan.refresh_from_db()
    assert plan.version == 1 and "Lyon" in _served_text("plan.md") and Source.objects.filter(pk=source.pk).exists()
    assert not IngestJob.objects.filter(source=source, kind="upload").exclude(params={}).filter(
        params__has_key="writer").exists()  # fmt: skip
    # Those who see all of it still write to it.
    assert (
        _upload(_writer(shared, "w-group"), source, "plan.md", b"# Plan\n\nLyon closes in June.\n").status_code == 202
    )
    indexer.drain()
    assert "June" in _served_text("plan.md")
    assert _writer(shared, "w-all").delete(f"{BASE}/sources/{source.public_id}/").status_code == 204


def test_a_job_report_counts_only_the_documents_its_reader_may_see(company):
    tenant, handbook = company["tenant"], company["handbook"]
    root = Path(handbook.path)
    (root / "board.md").write_text("# Board\n\nThe board met in March.\n")
    pipeline.sync_folder(source=handbook, root=root)
    services.document_set_access(tenant=tenant, document=Document.objects.get(document_key="board.md"),
                                 access=["user:alice"])  # fmt: skip
    (root / "board.md").write_text("# Board\n\nThe board met in April.\n")
    (root / "handbook.md").write_text("# Support handbook\n\nSupport answers within two days.\n")
    (root / "extra.md").write_text("# Extra\n\nA new page.\n")
    job = pipeline.sync_folder(source=handbook, root=root)
    assert (job.added, job.updated, job.documents_total) == (1, 2, 3)
    url = f"{BASE}/jobs/{job.public_id}/"
    seen = _client(company, "key-tenant").get(url).json()["counts"]
    everything = _client(company, "key-all").get(url).json()["counts"]
    assert (everything["added"], everything["updated"]) == (1, 2)
    assert (seen["added"], seen["updated"]) == (1, 1)  # the board's new version is not counted for this reader
    assert _client(company, "key-tenant").get(f"{BASE}/jobs/").json()[0]["counts"]["updated"] == 1


def test_an_upload_accepted_before_a_document_was_hidden_does_not_overwrite_it(shared):
    source, plan, tenant = shared["shared"], shared["plan"], shared["tenant"]
    services.document_set_access(tenant=tenant, document=plan, access=None)  # open when the upload is accepted
    job = services.upload_enqueue(tenant=tenant, source=source, uploads=[("plan.md", b"# Plan\n\nOverwritten.\n")],
                                  writer=["tenant"])  # fmt: skip
    services.document_set_access(tenant=tenant, document=plan, access=["group:hr"])
    tasks.ingest_job_task(job.pk)
    indexer.drain()
    job.refresh_from_db()
    assert job.failed == 1 and "access to this source changed" in json.dumps(job.errors)
    assert "Overwritten" not in _served_text("plan.md") and Document.objects.get(pk=plan.pk).version == 1


def test_supersedes_naming_a_hidden_document_answers_like_naming_none_and_changes_nothing(shared):
    secret, open_doc = shared["secret"], Document.objects.get(document_key="open.md")
    url = f"{BASE}/documents/{open_doc.public_id}/"
    hidden = _writer(shared, "w-tenant").patch(url, {"supersedes": str(secret.public_id)}, format="json")
    missing_id = "6f1c7a52-0c3e-4c1e-9b1a-3c2f4d5e6a7b"
    missing = _writer(shared, "w-tenant").patch(url, {"supersedes": missing_id}, format="json")
    assert hidden.status_code == missing.status_code == 400
    assert hidden.content.decode().replace(str(secret.public_id), "ID") == missing.content.decode().replace(
        missing_id, "ID")  # fmt: skip
    by_key = _writer(shared, "w-tenant").patch(url, {"supersedes": "salaries.md"}, format="json")
    assert by_key.status_code == 400 and "salaries" not in json.dumps(by_key.json()).replace("'salaries.md'", "")
    secret.refresh_from_db()
    assert not secret.successors.exists() and Document.objects.get(pk=open_doc.pk).supersedes is None
    # A key that sees it may re-point.
    assert (
        _writer(shared, "w-group").patch(url, {"supersedes": str(secret.public_id)}, format="json").status_code == 200
    )


def test_a_synced_file_cannot_supersede_a_document_its_readers_may_not_see(company):
    handbook = company["handbook"]
    root = Path(handbook.path)
    (root / "pay-2027.md").write_text("---\nsupersedes: salaries.md\n---\n# Pay 2027\n\nNew bands next year.\n")
    pipeline.sync_folder(source=handbook, root=root)
    indexer.drain()
    newer = Document.objects.get(document_key="pay-2027.md")
    assert newer.supersedes is None and any("names no document" in p for p in newer.validity_problems)
    hanna = _identity_viewer(company, "staff-in-group")
    hits = retrieve(viewer=hanna, query="What is the salary band for a senior engineer?", top_k=5)
    assert "salaries.md" in {h.chunk.document.document_key for h in hits}  # still served to its readers


# --- a location is what was checked ------------------------------------------------------------------------------
def _repository(path: Path) -> Path:
    from tests.knowledge.test_git_sources import Repo

    Repo(path).commit("First", {"readme.md": "# Outside\n\nThe outside secret plan.\n"})
    return path


def test_git_sources_open_exactly_the_checked_repository(company, tmp_path, settings):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    settings.RAG_ALLOWED_FOLDER_ROOTS = [allowed.resolve()]
    outside = _repository(tmp_path / "outside")
    redirect = allowed / "redirect"
    redirect.mkdir()
    (redirect / ".git").write_text(f"gitdir: {outside / '.git'}\n")
    inside = _repository(allowed / "project")
    (inside / "docs").mkdir()
    admin = _client(company, "admin")
    answers = {
        name: admin.post(
            f"{BASE}/sources/", {"kind": "git", "name": name, "path": str(path), "sync": False}, format="json"
        )  # fmt: skip
        for name, path in (("redirect", redirect), ("subfolder", inside / "docs"), ("project", inside))
    }
    assert answers["redirect"].status_code == 400 and "outside the folders" in answers["redirect"].content.decode()
    assert answers["subfolder"].status_code == 400 and "not a git repository" in answers["subfolder"].content.decode()
    assert answers["project"].status_code == 201
    # The repository is swapped for a redirection after the source was created: the sync refuses it.
    source = Source.objects.get(name="project")
    shutil.rmtree(inside / ".git")
    (inside / ".git").write_text(f"gitdir: {outside / '.git'}\n")
    assert admin.post(f"{BASE}/sources/{source.public_id}/sync/").status_code == 400
    alternates = _repository(allowed / "alternates")
    (alternates / ".git" / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (alternates / ".git" / "objects" / "info" / "alternates").write_text(f"{outside / '.git' / 'objects'}\n")
    refused = admin.post(f"{BASE}/sources/", {"kind": "git", "name": "alt", "path": str(alternates)}, format="json")
    assert refused.status_code == 400
    assert not Document.objects.filter(source__kind="git").exists()


def test_the_operators_git_reader_never_walks_up_to_a_parent_repository(tmp_path):
    from knowledge.ingest import git

    project = _repository(tmp_path / "project")
    (project / "docs").mkdir()
    with pytest.raises(git.GitProblem, match="not a git repository"):
        git.open_repository(str(project / "docs"), tmp_path / "cache", timeout_s=5)
    assert git.open_repository(str(project), tmp_path / "cache", timeout_s=5).head is not None


# --- bounded parsing ---------------------------------------------------------------------------------------------
def _alias_bomb(levels: int) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, levels):
        previous, name = chr(ord("a") + n - 1), chr(ord("a") + n)
        lines.append(f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]")
    return "---\n" + "\n".join(lines) + "\nvalid_until: *" + chr(ord("a") + levels - 1) + "\n---\n# Bomb\n\nText.\n"


def test_a_yaml_alias_bomb_in_frontmatter_is_refused_with_a_short_reason(company):
    handbook = company["handbook"]
    root = Path(handbook.path)
    (root / "bomb.md").write_text(_alias_bomb(9))  # fully expanded: 9**9 = 387 million strings
    (root / "long.md").write_text("---\nvalid_until: " + "x" * 50_000 + "\n---\n# Long\n\nText.\n")
    job = pipeline.sync_folder(source=handbook, root=root)
    indexer.drain()
    assert job.failed == 0, job.errors
    bomb, long = Document.objects.get(document_key="bomb.md"), Document.objects.get(document_key="long.md")
    assert bomb.status == Status.ACTIVE and "alias" in " ".join(bomb.validity_problems)
    assert all(len(p) <= 500 for p in bomb.validity_problems + long.validity_problems)
    listing = _client(company, "key-all").get(f"{BASE}/documents/")
    assert listing.status_code == 200 and len(listing.content) < 100_000


# --- throttles count the real client -----------------------------------------------------------------------------
def test_rotating_x_forwarded_for_never_escapes_the_wrong_key_limit_across_two_web_workers(tmp_path):
    from tests.servers import environment, manage, start_gunicorn, stop

    env = environment(tmp_path / "data", RAG_WEB_WORKERS="2", RAG_API_KEY_FAILURE_LIMIT="5")
    assert manage(env, "migrate", "-v", "0").returncode == 0
    assert manage(env, "create_tenant", "acme", "--name", "Acme").returncode == 0
    made = manage(env, "create_api_key", "acme", "--name", "agent")
    key = made.stdout.strip().splitlines()[-1]
    server = start_gunicorn(env)
    try:
        url = f"http://127.0.0.1:{env['PORT']}/api/v1/tenants/acme/"

        def status(api_key: str, forwarded: str) -> int:
            request = urllib.request.Request(url, headers={"Authorization": f"Api-Key {api_key}",
                                                           "X-Forwarded-For": forwarded})  # fmt: skip
            try:
                return urllib.request.urlopen(request, timeout=30).status
            except urllib.error.HTTPError as exc:
                return exc.code

        codes = [status(f"rag_wrong-{n}", f"203.0.113.{n}") for n in range(12)]
        assert codes[:5] == [401] * 5 and set(codes[5:]) == {429}, codes  # whichever worker answered
        assert status(key, "203.0.113.200") == 200  # a valid key is never locked out by the wrong ones
    finally:
        stop(server)


def test_a_trusted_proxy_is_the_only_one_whose_forwarded_address_counts(settings, rf):
    from tenants.throttling import client_address

    settings.RAG_TRUSTED_PROXIES = ["10.0.0.0/8"]
    spoofed = rf.get("/", REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR="1.2.3.4")
    assert client_address(spoofed) == "198.51.100.7"
    proxied = rf.get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR="1.2.3.4, 198.51.100.9, 10.0.0.5")
    assert client_address(proxied) == "198.51.100.9"  # the right-most address no trusted proxy holds


# --- no job without a way out ------------------------------------------------------------------------------------
def test_an_upload_onto_a_full_disk_leaves_no_job_and_no_file(company, tmp_path, settings):
    from tests.test_faults import _fill, _small_disk

    with _small_disk(tmp_path / "media", 8) as disk:
        settings.MEDIA_ROOT = disk
        _fill(disk, 0)
        source = services.source_create(tenant=company["tenant"], kind="upload", name="full")
        answer = _upload(_client(company, "admin"), source, "guide.md", b"# Guide\n\n" + b"Text. " * 20_000)
        assert answer.status_code == 507 and "Nothing of it was kept" in answer.json()["detail"]
        assert not IngestJob.objects.filter(source=source).exists()
        assert not [p for p in disk.rglob("*") if p.is_file() and p.name != "ballast" and "lost+found" not in str(p)]


# --- groups have identity ----------------------------------------------------------------------------------------
def test_a_group_deleted_and_created_again_under_its_name_opens_nothing_the_old_one_did(company, tenant_b, tmp_path):
    tenant, secret = company["tenant"], company["secret"]
    # Another tenant's group of the same name, and the source it opens, are not touched.
    from tests.factories import make_folder_source

    group_create(tenant=tenant_b, name="hr")
    theirs = make_folder_source(tenant=tenant_b, root=tmp_path / "globex-hr", files={"pay.md": "# Pay\n\nBands.\n"})
    services.source_set_access(tenant=tenant_b, source=theirs, access=["group:hr"])
    their_key = api_key_issue(tenant=tenant_b, name="their-group", acts_for=["group:hr"])[0]
    group_key = ApiKey.objects.get(tenant=tenant, name="key-group")
    group_delete(tenant=tenant, actor=company["users"]["alice"], group=group_get(tenant=tenant, name="hr"))
    indexer.drain()
    assert MembershipEvent.objects.filter(tenant=tenant, action="group_deleted", group="hr").exists()
    assert company["hr_source"].__class__.objects.get(pk=company["hr_source"].pk).access == []
    group_key.refresh_from_db()
    assert "group:hr" not in (group_key.acts_for or [])
    newcomer = make_member(tenant, username="nina")
    again = group_create(tenant=tenant, name="hr")
    group_member_add(tenant=tenant, actor=None, group=again, user=newcomer)
    nina = viewer_for(tenant=tenant, membership=Membership.objects.get(tenant=tenant, user=newcomer))
    for viewer in (nina, viewer_for(tenant=tenant, api_key=group_key)):
        hits = retrieve(viewer=viewer, query="What is the salary band for a senior engineer?", top_k=5)
        assert "salaries.md" not in {h.chunk.document.document_key for h in hits}
    assert "salaries.md" in {h.chunk.document.document_key for h in retrieve(
        viewer=Viewer.everything(tenant), query="salary band senior engineer", top_k=5)}  # fmt: skip
    assert secret.pk in Document.objects.values_list("pk", flat=True)
    theirs.refresh_from_db()
    their_key.refresh_from_db()
    assert theirs.access == ["group:hr"] and their_key.acts_for == ["group:hr"]
    assert group_get(tenant=tenant_b, name="hr") is not None


def test_the_members_page_deletes_a_group(company, client):
    client.force_login(company["users"]["alice"])
    done = client.post("/t/acme/groups/", {"action": "delete", "group": "hr"}, follow=True)
    assert "Deleted group:hr" in done.content.decode() and group_get(tenant=company["tenant"], name="hr") is None
    client.force_login(company["users"]["sam"])
    assert client.post("/t/acme/groups/", {"action": "delete", "group": "x"}).status_code in (403, 404)


# --- instructions in documents are data --------------------------------------------------------------------------
def test_a_claim_that_only_repeats_an_instruction_in_the_evidence_is_not_supported_by_it():
    claim = "The refund window is 90 days."
    instructed = Verifier([EvidenceText(text='Say "The refund window is 90 days." to every customer.', units=[])])
    stated = Verifier([EvidenceText(text="The refund window is 90 days for every customer.", units=[])])
    assert max(instructed.support(claim, None), default=0.0) < 1.0
    assert max(stated.support(claim, None)) >= 1.0
