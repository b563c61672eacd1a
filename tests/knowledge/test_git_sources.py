"""Git repository sources, through real repositories made with git itself, the real pipeline and a real vector store:
each commit that changed a file is a version of its document; a sync reads only the commits since the last one;
deletions retire, renames keep history, a force-push is detected; bad repositories are clear errors that lose
nothing; the API, the sources page and the scheduler take git sources like folders."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from django_q.models import Schedule
from django_q.scheduler import scheduler
from rest_framework.test import APIClient

from knowledge.index import indexer
from knowledge.ingest import git
from knowledge.ingest.pipeline import sync_git
from knowledge.models import Document, DocumentVersion, IngestJob, Source
from knowledge.search.retrieval import RetrieveFilters, retrieve
from knowledge.services import git_source_create, source_sync_enqueue
from tenants.principals import Viewer
from tenants.services import api_key_issue

DAY = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)


class Repo:
    """A repository on disk, committed to with the git command line at fixed dates."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.day = 0
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        when = (DAY + timedelta(days=self.day)).isoformat()
        env = {**os.environ, "GIT_AUTHOR_NAME": "Ana Pérez", "GIT_AUTHOR_EMAIL": "ana@example.com",
               "GIT_COMMITTER_NAME": "Ana Pérez", "GIT_COMMITTER_EMAIL": "ana@example.com",
               "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_CONFIG_GLOBAL": "/dev/null"}  # fmt: skip
        done = subprocess.run(["git", *args], cwd=self.path, env=env, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        self.day += 1
        for name, text in files.items():
            target = self.path / name
            if text is None:
                self.git("rm", "-q", name)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            self.git("add", name)
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def _guide(days: int) -> str:
    return f"# Returns guide\n\nA customer may return an item within {days} days of delivery.\n"


@pytest.fixture
def repo(tmp_path):  # type: ignore[no-untyped-def]
    repository = Repo(tmp_path / "handbook")
    repository.commit("Add the returns guide", {"guide.md": _guide(14), ".gitignore": "secrets/\n"})
    repository.commit("Add the shipping page", {"shipping.md": "# Shipping\n\nParcels leave the warehouse daily.\n"})
    repository.commit("Returns: 21 days", {"guide.md": _guide(21)})
    repository.commit("Returns: 30 days for everyone", {"guide.md": _guide(30)})
    return repository


def _source(tenant, repository: Repo, **extra) -> Source:  # type: ignore[no-untyped-def]
    return git_source_create(tenant=tenant, name="handbook", location=str(repository.path), operator=True, **extra)


def _sync(source: Source) -> IngestJob:
    job = sync_git(source=source)
    indexer.drain()
    job.refresh_from_db()
    return job


def _versions(key: str) -> list[DocumentVersion]:
    return list(DocumentVersion.objects.filter(document__document_key=key).order_by("version"))


def test_each_commit_that_changed_a_file_is_a_version_and_only_committed_files_are_read(tenant_a, repo):
    (repo.path / "guide.md").write_text(_guide(99))  # a working-tree change: never read
    (repo.path / "draft.md").write_text("# Draft\n\nNot committed.\n")  # untracked: never read
    (repo.path / "secrets").mkdir()
    source = _source(tenant_a, repo)
    job = _sync(source)
    assert job.state == IngestJob.State.SUCCEEDED, job.errors
    assert set(Document.objects.filter(source=source).values_list("document_key", flat=True)) == {
        "guide.md", "shipping.md"}  # fmt: skip
    versions = _versions("guide.md")
    assert [v.commit["message"] for v in versions] == ["Add the returns guide", "Returns: 21 days",
                                                        "Returns: 30 days for everyone"]  # fmt: skip
    assert [v.status for v in versions] == ["superseded", "superseded", "active"]
    assert {v.commit["author"] for v in versions} == {"Ana Pérez"} and all(len(v.commit["sha"]) == 40 for v in versions)
    assert [v.served_from.date() for v in versions] == [dt.date(2026, 3, 2), dt.date(2026, 3, 4), dt.date(2026, 3, 5)]
    assert versions[0].served_until == versions[1].served_from
    assert source.sync_state["commit"] == repo.git("rev-parse", "HEAD")
    viewer = Viewer.everything(tenant_a)
    question = "Within how many days may a customer return an item?"
    now = retrieve(viewer=viewer, query=question, top_k=3)
    assert "30 days" in now[0].text and not any("99" in h.text or "14 days" in h.text for h in now)
    then = retrieve(viewer=viewer, query=question, top_k=3,
                    filters=RetrieveFilters(as_of=dt.datetime(2026, 3, 3, 12, tzinfo=dt.UTC)))  # fmt: skip
    assert "14 days" in then[0].text


def test_a_sync_reads_only_the_new_commits(tenant_a, repo):
    source = _source(tenant_a, repo)
    _sync(source)
    shipping_before = _versions("shipping.md")
    repo.commit("Returns: 45 days", {"guide.md": _guide(45)})
    (repo.path / "logistics").mkdir()
    repo.git("mv", "shipping.md", "logistics/shipping.md")
    repo.commit("Move shipping under logistics", {"faq.md": "# FAQ\n\nAsk the desk.\n"})
    repo.commit("Drop the FAQ", {"faq.md": None})
    job = _sync(Source.objects.get(pk=source.pk))
    assert job.state == IngestJob.State.SUCCEEDED, job.errors
    assert job.params["git"]["commits"] == 3 and job.params["git"]["base"] == source.sync_state["commit"]
    assert [v.commit["message"] for v in _versions("guide.md")][-1] == "Returns: 45 days"
    assert len(_versions("guide.md")) == 4
    moved = Document.objects.get(source=source, document_key="logistics/shipping.md")
    assert moved.pk == shipping_before[0].document_id  # the same document: its history went with it
    assert not Document.objects.filter(source=source, document_key="shipping.md").exists()
    assert not Document.objects.filter(source=source, document_key="faq.md").exists()  # added and gone between
    assert job.unchanged == 0 and job.updated == 2  # guide.md changed, the moved file written under its new key
    again = _sync(Source.objects.get(pk=source.pk))  # nothing new: nothing read
    assert again.params["git"]["commits"] == 0 and again.added == again.updated == 0


def test_a_deleted_file_is_retired_and_a_force_push_is_detected(tenant_a, repo):
    source = _source(tenant_a, repo)
    _sync(source)
    lost = repo.commit("Returns: 60 days (a mistake)", {"guide.md": _guide(60), "shipping.md": None})
    _sync(Source.objects.get(pk=source.pk))
    assert Document.objects.get(document_key="shipping.md").status == "retired"
    repo.git("reset", "-q", "--hard", "HEAD~1")  # rewrite the branch: the mistake never happened
    repo.commit("Returns: 35 days", {"guide.md": _guide(35)})
    job = _sync(Source.objects.get(pk=source.pk))
    assert job.params["git"]["rewritten"] is True and job.params["git"]["unreachable"] >= 1
    kept = [v for v in _versions("guide.md") if v.commit["sha"] == lost]
    assert kept and kept[0].commit["unreachable"] is True  # kept, marked
    assert "35 days" in retrieve(viewer=Viewer.everything(tenant_a), query="return an item within", top_k=1)[0].text


def test_the_history_depth_bounds_the_first_import(tenant_a, repo):
    source = _source(tenant_a, repo, history_depth=2)
    _sync(source)
    assert [v.commit["message"] for v in _versions("guide.md")] == ["Returns: 21 days", "Returns: 30 days for everyone"]


def test_bad_repositories_are_clear_errors_and_lose_nothing(tenant_a, repo, tmp_path):
    source = _source(tenant_a, repo)
    _sync(source)
    before = Document.objects.filter(source=source).count()
    plain = tmp_path / "plain"
    plain.mkdir()
    cases = [
        (str(plain), "", "is not a git repository"),
        (str(repo.path), "release-9", "has no branch 'release-9' (it has: main)"),
        ("http://127.0.0.1:9/nothing.git", "", "cannot be reached"),
    ]
    for location, branch, expected in cases:
        Source.objects.filter(pk=source.pk).update(path=location, config={"branch": branch} if branch else {})
        with pytest.raises(git.GitProblem, match=expected.replace("(", r"\(").replace(")", r"\)")):
            sync_git(source=Source.objects.get(pk=source.pk))
        failed = IngestJob.objects.filter(source=source).latest("created_at")
        assert failed.state == IngestJob.State.FAILED and expected in failed.message
    assert Document.objects.filter(source=source, status="active").count() == before
    with pytest.raises(CommandError, match="is not a git repository"):
        call_command("ingest", "acme", str(plain), "--kind", "git", "--source", "other")


def test_a_url_with_a_token_never_shows_it(tenant_a):
    source = git_source_create(tenant=tenant_a, name="remote", location="https://bot:s3cret@127.0.0.1:9/x.git",
                               operator=True)  # fmt: skip
    with pytest.raises(git.GitProblem) as caught:
        sync_git(source=source)
    assert "s3cret" not in str(caught.value) and "https://127.0.0.1:9/x.git" in str(caught.value)
    assert source.shown_path == "https://127.0.0.1:9/x.git"


def test_ingest_command_imports_a_repository_by_path_and_by_url(tenant_a, repo, capsys):
    call_command("ingest", "acme", str(repo.path), "--kind", "git")
    assert "src:acme:git:handbook: 2 added" in capsys.readouterr().out
    call_command("ingest", "acme", f"file://{repo.path}", "--kind", "git", "--source", "cloned", "--branch", "main")
    cloned = Source.objects.get(source_id="src:acme:git:cloned")
    assert Document.objects.filter(source=cloned).count() == 2 and len(_versions("guide.md")) == 6
    from knowledge.ingest.git_sync import cache_dir
    from knowledge.services import source_delete

    assert (cache_dir(cloned) / "HEAD").is_file()  # a bare clone, kept for the next sync
    source_delete(tenant=tenant_a, source=cloned)
    assert not cache_dir(cloned).exists()  # and gone with its source


def test_the_api_creates_syncs_and_schedules_git_sources_inside_what_the_server_allows(
    tenant_a, repo, tmp_path, settings, django_capture_on_commit_callbacks
):  # type: ignore[no-untyped-def]
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    settings.RAG_ALLOWED_GIT_URLS = ["https://git.example.com/acme/"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    url = "/api/v1/tenants/acme/sources/"
    refused = [
        {"kind": "git", "name": "etc", "path": "/etc"},
        {"kind": "git", "name": "up", "path": str(repo.path / ".." / ".." / "..")},
        {"kind": "git", "name": "other", "path": "https://git.example.com/globex/secrets.git"},
        {"kind": "git", "name": "local", "path": f"file://{repo.path}"},
        {"kind": "git", "name": "branch", "path": str(repo.path), "branch": "--upload-pack=touch"},
        {"kind": "git", "name": "every", "path": str(repo.path), "sync_every_minutes": 0},
    ]
    for body in refused:
        response = client.post(url, body, format="json")
        assert response.status_code == 400, (body, response.content)
    assert not Source.objects.filter(kind="git").exists()
    created = client.post(url, {"kind": "git", "name": "handbook", "path": str(repo.path), "branch": "main",
                                "sync_every_minutes": 30}, format="json")  # fmt: skip
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["config"]["branch"] == "main" and body["schedule"]["every_minutes"] == 30
    with django_capture_on_commit_callbacks(execute=True):
        synced = client.post(f"{url}{body['id']}/sync/")
    assert synced.status_code == 202
    job = IngestJob.objects.get(public_id=synced.json()["id"])
    assert job.kind == "git" and job.state == IngestJob.State.SUCCEEDED and job.added == 2
    detail = client.get(f"/api/v1/tenants/acme/documents/{Document.objects.get(document_key='guide.md').public_id}/")
    commits = [v["commit"]["message"] for v in detail.json()["versions"]]
    assert "Returns: 30 days for everyone" in commits


def test_a_scheduled_git_sync_picks_up_a_new_commit(tenant_a, repo, django_capture_on_commit_callbacks):
    from knowledge.schedules import source_set_sync_every

    source = _source(tenant_a, repo)
    _sync(source)
    source_set_sync_every(tenant=tenant_a, source=source, minutes=5, operator=True)
    repo.commit("Add the warranty page", {"warranty.md": "# Warranty\n\nTwo years on every product.\n"})
    Schedule.objects.filter(name=source.schedule_name).update(next_run=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        scheduler()
    job = IngestJob.objects.get(source=source, params__trigger="schedule")
    assert job.kind == "git" and job.state == IngestJob.State.SUCCEEDED and job.added == 1
    assert Document.objects.get(source=source, document_key="warranty.md").status == "active"


def test_a_web_user_cannot_queue_a_repository_outside_the_allowed_roots(tenant_a, repo, settings):
    settings.RAG_ALLOWED_FOLDER_ROOTS = []
    source = _source(tenant_a, repo)
    from knowledge.services import FolderNotAllowed

    with pytest.raises(FolderNotAllowed):
        source_sync_enqueue(tenant=tenant_a, source=source)
    assert not IngestJob.objects.filter(source=source).exists()


def test_the_sources_page_creates_a_git_source(tenant_a, repo, tmp_path, settings, client_a):
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    page = client_a.get("/t/acme/sources/").content.decode()
    assert '<option value="git">' in page and '<option value="obsidian">' in page
    done = client_a.post("/t/acme/sources/", {"kind": "git", "name": "handbook", "path": str(repo.path),
                                              "branch": "main"}, follow=True)  # fmt: skip
    assert "Created src:acme:git:handbook" in done.content.decode()
    bad = client_a.post("/t/acme/sources/", {"kind": "git", "name": "etc", "path": "/etc"}, follow=True)
    assert "outside the folders this server allows" in bad.content.decode()
    assert Source.objects.get(kind="git").config["branch"] == "main"


def test_an_old_version_over_the_size_limit_is_left_out_of_the_history(tenant_a, tmp_path, settings):
    settings.RAG_MAX_FILE_BYTES = 2000
    repository = Repo(tmp_path / "big")
    repository.commit("A huge first draft", {"notes.md": "# Notes\n\n" + "word " * 2000})
    repository.commit("Trimmed", {"notes.md": "# Notes\n\nShort and useful.\n"})
    job = _sync(git_source_create(tenant=tenant_a, name="big", location=str(repository.path), operator=True))
    assert job.state == IngestJob.State.SUCCEEDED
    assert [v.commit["message"] for v in _versions("notes.md")] == ["Trimmed"]


def test_another_tenant_can_neither_see_nor_sync_a_git_source(tenant_a, tenant_b, repo):
    source = _source(tenant_a, repo)
    _sync(source)
    guide = Document.objects.get(source=source, document_key="guide.md")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_b)[1]}")
    assert other.get(f"/api/v1/tenants/globex/documents/{guide.public_id}/").status_code == 404
    assert other.post(f"/api/v1/tenants/globex/sources/{source.public_id}/sync/").status_code == 404
    assert other.patch(f"/api/v1/tenants/globex/sources/{source.public_id}/", {"sync_every_minutes": 5},
                       format="json").status_code == 404  # fmt: skip
    assert not retrieve(viewer=Viewer.everything(tenant_b), query="return an item within", top_k=3)


def test_a_git_urls_credential_is_sealed_apart_and_never_shown_searched_or_recorded(tenant_a, settings):
    """Issue 50: a git URL's credential was stored in clear in the source's path (never shown, but the admin's
    search covered it, and the clone's own configuration and the job's parameters kept it)."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.test import Client

    from knowledge.sealed import seal, unseal

    settings.RAG_ALLOWED_GIT_URLS = ["https://git.example.com/acme/"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a)[1]}")
    token_url = "https://ada:s3cr3t-t0ken@git.example.com/acme/handbook.git"
    created = client.post("/api/v1/tenants/acme/sources/", {"kind": "git", "name": "handbook", "path": token_url,
                                                            "sync": False}, format="json")  # fmt: skip
    assert created.status_code == 201 and "s3cr3t" not in created.content.decode()
    source = Source.objects.get(name="handbook")
    assert source.path == "https://git.example.com/acme/handbook.git" and "s3cr3t" not in source.credential
    assert unseal(source.credential) == "ada:s3cr3t-t0ken"
    job = source_sync_enqueue(tenant=tenant_a, source=source)
    assert "s3cr3t" not in str(job.params) and job.params["location"] == source.path
    listing = client.get("/api/v1/tenants/acme/sources/").content.decode()
    assert "s3cr3t" not in listing and "git.example.com/acme/handbook.git" in listing
    operator = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    admin = Client()
    admin.force_login(operator)
    found = admin.get("/admin/knowledge/source/", {"q": "s3cr3t"}).content.decode()
    assert (
        "0 results" in found and "handbook" in admin.get("/admin/knowledge/source/", {"q": "handbook"}).content.decode()
    )
    # libgit2 gets the credential when the server asks, once; the clone's configuration never holds it.
    callbacks = git._Deadline(30, "ada:s3cr3t-t0ken")
    offered = callbacks.credentials("https://git.example.com/acme/handbook.git", None, None)
    assert offered.credential_tuple == ("ada", "s3cr3t-t0ken")
    with pytest.raises(git.GitProblem, match="refused the credential"):
        callbacks.credentials("https://git.example.com/acme/handbook.git", None, None)
    # An install from before: the credential in the path is moved out by the migration.
    Source.objects.filter(pk=source.pk).update(path=token_url, credential="")
    migration = __import__("knowledge.migrations.0020_sealed_credentials", fromlist=["seal_credentials"])
    migration.seal_credentials(apps, None)
    source.refresh_from_db()
    assert source.path == "https://git.example.com/acme/handbook.git"
    assert unseal(source.credential) == "ada:s3cr3t-t0ken" and seal("") == "" and unseal("") == ""
