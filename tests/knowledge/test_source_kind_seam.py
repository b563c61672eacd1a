"""A new source kind is its producer and one registry line: a throwaway kind that reads a dict of files, added here
with no other production change, is created, synced, re-synced and retired, refuses uploads, and is read through
REST, the pages and the operator's command line like any built-in kind."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from knowledge.ingest import sources
from knowledge.ingest.producer import Done, Event, Failed, Item, Planned, Reading, SourceProblem, Unchanged
from knowledge.models import Document, IngestJob, Source
from knowledge.search.retrieval import retrieve
from tenants.principals import Viewer
from tenants.services import api_key_issue
from tests.factories import make_member

SHELVES: dict[str, dict[str, str]] = {}  # a shelf's name → its files (key → text): the "system" this kind reads


def produce_shelf(reading: Reading) -> Iterator[Event]:
    """Every file of the shelf the location names; one whose text is None cannot be read (the version it had is
    kept); a file whose text is what the last sync read is unchanged."""
    name = reading.location.removeprefix("shelf://")
    if name not in SHELVES:
        raise SourceProblem(f"There is no shelf {name!r}.")
    files = SHELVES[name]
    seen = dict(reading.state.get("seen") or {})
    yield Planned(len(files))
    for number, (key, text) in enumerate(sorted(files.items())):
        if text is None:
            yield Failed(key, "the shelf would not hand it over", position=number)
        elif seen.get(key) == text:
            yield Unchanged(key)
        else:
            yield Item(key, data=text.encode("utf-8"), position=number, location=f"shelf://{name}/{key}")
    yield Done(state={"seen": {key: text for key, text in files.items() if text is not None}})


def _check(location: str, tenant_slug: str) -> str:
    if not location.startswith("shelf://"):
        raise SourceProblem("A shelf's address starts with shelf://.")
    return location


@pytest.fixture
def shelf_kind():
    remove = sources.register(sources.SourceKind("shelf", "Shelf", check=_check, produce=produce_shelf, what="a shelf"))
    SHELVES.clear()
    SHELVES["handbook"] = {
        "leave.md": "# Leave\n\nEvery employee has 27 days of paid leave a year.\n",
        "expenses.md": "# Expenses\n\nThe per diem for travel is 42 EUR.\n",
    }
    yield
    remove()


def _documents(source: Source) -> dict[str, str]:
    return dict(Document.objects.filter(source=source).values_list("document_key", "status"))


def test_a_throwaway_kind_syncs_resyncs_retires_and_refuses_uploads_through_rest(
    tenant_a, shelf_kind, django_capture_on_commit_callbacks
):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant_a, name='w')[1]}")
    url = "/api/v1/tenants/acme/sources/"
    refused = api.post(url, {"kind": "shelf", "name": "bad", "path": "ftp://handbook"}, format="json")
    assert refused.status_code == 400 and "shelf://" in refused.json()["path"][0]
    with django_capture_on_commit_callbacks(execute=True):  # its first sync is queued with it
        created = api.post(url, {"kind": "shelf", "name": "handbook", "path": "shelf://handbook"}, format="json")
    assert created.status_code == 201, created.content
    source = Source.objects.get(tenant=tenant_a, kind="shelf")
    first = IngestJob.objects.get(source=source)
    assert first.state == IngestJob.State.SUCCEEDED and first.added == 2, first.errors
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="What is the per diem for travel?", top_k=3)
    assert hits and hits[0].chunk.document.document_key == "expenses.md"

    SHELVES["handbook"]["leave.md"] = "# Leave\n\nEvery employee has 30 days of paid leave a year.\n"
    del SHELVES["handbook"]["expenses.md"]
    SHELVES["handbook"]["broken.md"] = None  # type: ignore[assignment]
    SHELVES["handbook"]["travel.md"] = "# Travel\n\nBook trains for trips under 600 km.\n"
    with django_capture_on_commit_callbacks(execute=True):
        synced = api.post(f"{url}{source.public_id}/sync/")
    assert synced.status_code == 202
    again = IngestJob.objects.get(public_id=synced.json()["id"])
    assert (again.added, again.updated, again.retired, again.failed) == (1, 1, 1, 1), again.errors
    assert _documents(source) == {"leave.md": "active", "travel.md": "active", "expenses.md": "retired"}
    assert again.errors[0]["key"] == "broken.md" and "would not hand it over" in again.errors[0]["error"]

    with django_capture_on_commit_callbacks(execute=True):
        quiet = api.post(f"{url}{source.public_id}/sync/")
    unchanged = IngestJob.objects.get(public_id=quiet.json()["id"])
    assert (unchanged.added, unchanged.updated, unchanged.unchanged, unchanged.retired) == (0, 0, 2, 0)

    sent = io.BytesIO(b"# A\n\nText.\n")
    sent.name = "a.md"
    upload = api.post(f"{url}{source.public_id}/upload/", {"files": [sent]}, format="multipart")
    assert upload.status_code == 400 and "read from a shelf" in upload.json()["source"][0]


def test_a_throwaway_kind_is_offered_created_and_refused_uploads_on_the_pages(
    tenant_a, shelf_kind, django_capture_on_commit_callbacks
):
    admin = Client()
    admin.force_login(make_member(tenant_a, role="admin"))
    page = admin.get("/t/acme/sources/").content.decode()
    assert '<option value="shelf">Shelf</option>' in page
    with django_capture_on_commit_callbacks(execute=True):
        done = admin.post(
            "/t/acme/sources/", {"kind": "shelf", "name": "handbook", "path": "shelf://handbook"}, follow=True
        )
    assert "Created src:acme:shelf:handbook" in done.content.decode()
    source = Source.objects.get(tenant=tenant_a, kind="shelf")
    assert _documents(source) == {"leave.md": "active", "expenses.md": "active"}
    listing = admin.get("/t/acme/sources/").content.decode()
    assert f"/t/acme/sources/{source.public_id}/sync/" in listing  # it syncs: the page offers a re-sync
    assert str(source.public_id) not in admin.get("/t/acme/upload/").content.decode()  # takes no upload
    sent = io.BytesIO(b"# A\n\nText.\n")
    sent.name = "a.md"
    refused = admin.post("/t/acme/upload/", {"files": [sent], "source": str(source.public_id)}, follow=True)
    assert "read from a shelf" in refused.content.decode()


def test_a_throwaway_kind_is_synced_by_the_operators_command_line_and_says_why_it_cannot(tenant_a, shelf_kind, capsys):
    call_command("ingest", "acme", "shelf://handbook", "--kind", "shelf", "--source", "handbook")
    assert "2 added" in capsys.readouterr().out
    source = Source.objects.get(tenant=tenant_a, kind="shelf")
    assert _documents(source) == {"leave.md": "active", "expenses.md": "active"}
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="There is no shelf 'archive'"):
        call_command("ingest", "acme", "shelf://archive", "--kind", "shelf", "--source", "archive")
    failed = IngestJob.objects.filter(source__label="archive").get()
    assert failed.state == IngestJob.State.FAILED and "no shelf" in failed.message
