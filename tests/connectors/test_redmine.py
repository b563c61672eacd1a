"""A Redmine source against a real Redmine (Debian's package on SQLite under WEBrick, tests/redmine_server.py): its
issues come in with their journals as versions, and each issue — and an issue's private notes apart — reaches exactly
the members Redmine itself shows it to, through every door, before and after a membership changes in Redmine.

Redmine's people: hanna (Manager of the private project `hr`), clopez (Reporter there: no private issues of others,
no private notes; carla here, matched by her e-mail address), sam (Reporter of the public project `support` only) and
outsider (Developer in `hr`: not private issues of others; no one here). dave here has no Redmine account and reads
what an anonymous visitor does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from knowledge import tasks
from knowledge.models import Document, DocumentVersion, IngestJob, Source
from tenants.services import api_key_issue
from tests import redmine_server
from tests.connectors.doors import sees
from tests.factories import make_member
from tests.redmine_server import Redmine

pytestmark = pytest.mark.skipif(not redmine_server.available(), reason="needs Debian's redmine and redmine-sqlite")

CANARY = "pangolin2284lark"
NOTE_CANARY = "axolotl7710wren"
CASE_CANARY = "narwhal3391kite"
BASE = "/api/v1/tenants/acme"
CLOSED = 5  # Redmine's default status "Closed"


@pytest.fixture(scope="session")
def redmine_template(tmp_path_factory):  # type: ignore[no-untyped-def]
    return redmine_server.template(tmp_path_factory.mktemp("redmine-template"))


@pytest.fixture
def redmine(redmine_template, tmp_path):  # type: ignore[no-untyped-def]
    served = Redmine(redmine_template, tmp_path / "redmine").start()
    people = {name: served.user(name, mail) for name, mail in (
        ("hanna", "hanna@acme.test"), ("clopez", "carla@acme.test"), ("sam", "sam@acme.test"),
        ("outsider", "outsider@elsewhere.test"))}  # fmt: skip
    served.project("support", "Support", public=True)
    served.project("hr", "Human resources", public=False)
    served.member("support", people["sam"], "Reporter")
    served.member("hr", people["hanna"], "Manager")
    served.member("hr", people["clopez"], "Reporter")
    served.member("hr", people["outsider"], "Developer")
    vpn = served.issue("support", "VPN token reset", "To reset a VPN token, open a ticket with the code VPN-RESET.")
    served.update(vpn, notes="Fixed by reissuing the token from the admin console.", status_id=CLOSED)
    text = f"The salary bands for engineers run from 58,000 to 91,000 EUR. Reference {CANARY}."
    bands = served.issue("hr", "Salary bands for engineers", text)
    served.update(bands, notes=f"The CEO band is 180,000 EUR. Reference {NOTE_CANARY}.", private_notes=True)
    served.update(bands, notes="Bands reviewed by the works council.")
    case = served.issue("hr", "Disciplinary case 14", f"Kept private. Reference {CASE_CANARY}.", is_private=True)
    served.ids = {"vpn": vpn, "bands": bands, "case": case, **people}  # type: ignore[attr-defined]
    yield served
    served.stop()


@pytest.fixture
def company(tenant_a, admin_a, redmine, settings):  # type: ignore[no-untyped-def]
    settings.RAG_ALLOWED_WEB_PREFIXES = [redmine.base]
    people = {name: make_member(tenant_a, username=name) for name in ("hanna", "sam", "carla", "dave")}
    people["carla"].email = "carla@acme.test"
    people["carla"].save()
    people["alice"] = admin_a
    key = api_key_issue(tenant=tenant_a, name="h", scope="read", acts_for=["user:hanna"])
    return {"tenant": tenant_a, "people": people, "key-hanna": key}


def _create(company: dict[str, Any], redmine: Redmine, capture, key: str = "") -> Source:  # type: ignore[no-untyped-def]
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    location = redmine.base.replace("http://", f"http://{key or redmine.key}@")
    with capture(execute=True):
        created = admin.post(
            f"{BASE}/sources/", {"kind": "redmine", "name": "tracker", "path": location}, format="json"
        )
    assert created.status_code == 201, created.content
    assert redmine.key not in created.content.decode()
    return Source.objects.get(kind="redmine")


def _access(source: Source) -> dict[str, list[str]]:
    return {d.document_key: sorted(d.effective_access) for d in Document.objects.filter(source=source, status="active")}


def _sees(company: dict[str, Any], who: str, key: str, question: str, canary: str) -> bool:
    """The document `key` for this identity, through every door (tests/connectors/doors.py), all agreeing."""
    identity = company["key-hanna"] if who == "key-hanna" else company["people"][who]
    return sees(identity, question, Document.objects.get(document_key=key), canary)


def test_issues_come_in_with_their_journals_and_exactly_the_visibility_redmine_gives_each_member(
    company, redmine, django_capture_on_commit_callbacks
):
    source = _create(company, redmine, django_capture_on_commit_callbacks)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.SYNC)
    assert job.state == IngestJob.State.SUCCEEDED, (job.message, job.errors)
    ids = redmine.ids
    assert _access(source) == {
        f"support/{ids['vpn']}.md": ["tenant"],  # a public project: every member, and anonymous visitors
        f"hr/{ids['bands']}.md": ["user:carla", "user:hanna"],  # carla is clopez (her e-mail address)
        f"hr/{ids['bands']}-private-notes.md": ["user:hanna"],  # a Reporter is not shown private notes
        f"hr/{ids['case']}.md": ["user:hanna"],  # a private issue: not to a Reporter who did not write it
    }
    assert job.params["unmapped"] == [{"principal": "outsider", "documents": 2}]  # a Developer: not the private case
    bands = Document.objects.get(source=source, document_key=f"hr/{ids['bands']}.md")
    assert NOTE_CANARY not in "".join(bands.chunks.values_list("text", flat=True))  # private notes kept apart
    vpn = Document.objects.get(source=source, document_key=f"support/{ids['vpn']}.md")
    versions = list(vpn.versions.order_by("version").values_list("commit", flat=True))
    assert [v["message"] for v in versions] == ["created", "Fixed by reissuing the token from the admin console."]
    assert {"support", "closed"} <= set(vpn.tags.values_list("name", flat=True))
    assert "Status: New → Closed." in vpn.versions.get(status="active").chunks.first().text

    question = "What are the salary bands for engineers and the CEO band?"
    who = ("hanna", "key-hanna", "carla", "sam", "dave")
    bands_key, notes_key = f"hr/{ids['bands']}.md", f"hr/{ids['bands']}-private-notes.md"
    assert [_sees(company, w, bands_key, question, CANARY) for w in who] == [True, True, True, False, False]
    assert [_sees(company, w, notes_key, question, NOTE_CANARY) for w in who] == [True, True, False, False, False]
    case = "Which disciplinary case is kept private?"
    assert [_sees(company, w, f"hr/{ids['case']}.md", case, CASE_CANARY) for w in ("hanna", "carla", "sam")] == [
        True, False, False]  # fmt: skip


def test_a_membership_changed_in_redmine_is_applied_by_the_permission_sync(
    company, redmine, django_capture_on_commit_callbacks
):
    source = _create(company, redmine, django_capture_on_commit_callbacks)
    ids = redmine.ids
    before = set(DocumentVersion.objects.filter(document__source=source).values_list("pk", flat=True))
    redmine.member("hr", ids["sam"], "Manager")  # sam joins hr as a Manager: the bands, the notes, the case
    membership = next(m for m in redmine.admin("GET", "projects/hr/memberships.json")["memberships"]
                      if m.get("user", {}).get("id") == ids["clopez"])  # fmt: skip
    redmine.admin("DELETE", f"memberships/{membership['id']}.json")  # clopez leaves hr
    with django_capture_on_commit_callbacks(execute=True):
        tasks.scheduled_permissions_task(source.pk)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.PERMISSIONS)
    assert job.state == IngestJob.State.SUCCEEDED, job.message
    assert _access(source) == {
        f"support/{ids['vpn']}.md": ["tenant"],
        f"hr/{ids['bands']}.md": ["user:hanna", "user:sam"],
        f"hr/{ids['bands']}-private-notes.md": ["user:hanna", "user:sam"],
        f"hr/{ids['case']}.md": ["user:hanna", "user:sam"],
    }
    report = job.params["access"]
    assert (report["opened"], report["closed"]) == (3, 1)
    assert job.params["unmapped"] == [{"principal": "outsider", "documents": 2}]  # the latest job says it too
    assert set(DocumentVersion.objects.filter(document__source=source).values_list("pk", flat=True)) == before
    question, bands = "What are the salary bands for engineers?", f"hr/{ids['bands']}.md"
    assert _sees(company, "sam", bands, question, CANARY) and not _sees(company, "carla", bands, question, CANARY)


def test_a_resync_reads_new_journal_entries_follows_a_moved_issue_and_retires_a_deleted_one(
    company, redmine, django_capture_on_commit_callbacks
):
    source = _create(company, redmine, django_capture_on_commit_callbacks)
    ids = redmine.ids
    redmine.update(ids["vpn"], notes="Reopened: the console is gone; use the self-service portal.", status_id=2)
    redmine.update(ids["vpn"], notes="Portal link added to the intranet.")
    redmine.update(ids["case"], project_id="support")  # moved to the public project, still private
    redmine.admin("DELETE", f"issues/{ids['bands']}.json")
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        synced = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
    job = IngestJob.objects.get(public_id=synced.json()["id"])
    assert job.state == IngestJob.State.SUCCEEDED, (job.message, job.errors)
    assert set(_access(source)) == {f"support/{ids['vpn']}.md", f"support/{ids['case']}.md"}
    # Still private, now in a project where no one here may see others' private issues: the admins only.
    assert _access(source)[f"support/{ids['case']}.md"] == []
    vpn = Document.objects.get(source=source, document_key=f"support/{ids['vpn']}.md")
    messages = [v["message"] for v in vpn.versions.order_by("version").values_list("commit", flat=True)]
    assert messages[-2:] == ["Reopened: the console is gone; use the self-service portal.",
                             "Portal link added to the intranet."]  # fmt: skip
    case = Document.objects.get(source=source, document_key=f"support/{ids['case']}.md")
    assert case.versions.count() >= 2  # its history came with it
    assert Document.objects.get(source=source, document_key=f"hr/{ids['bands']}.md").status == "retired"


def test_a_redmine_that_fails_or_refuses_keeps_what_was_read_and_says_why(
    company, redmine, django_capture_on_commit_callbacks
):
    source = _create(company, redmine, django_capture_on_commit_callbacks)
    before = _access(source)
    admin = APIClient()
    admin.force_login(company["people"]["alice"])

    def sync(key: str) -> IngestJob:
        source.set_location(redmine.base.replace("http://", f"http://{key}@"))
        source.save()
        with django_capture_on_commit_callbacks(execute=True):
            response = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
        return IngestJob.objects.get(public_id=response.json()["id"])

    assert "refused the connector's key" in sync("0" * 40).message
    sam_key = redmine.admin("GET", f"users/{redmine.ids['sam']}.json")["user"].get("api_key")
    if sam_key:  # a key that is not an administrator's cannot ask what each person may read
        assert "an administrator's key is needed" in sync(sam_key).message
    redmine.stop()
    down = sync(redmine.key)
    assert down.state == IngestJob.State.FAILED and "cannot be reached" in down.message
    assert _access(source) == before


def test_the_job_page_names_the_people_there_who_are_no_one_here(company, redmine, django_capture_on_commit_callbacks):
    source = _create(company, redmine, django_capture_on_commit_callbacks)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.SYNC)
    admin = Client()
    admin.force_login(company["people"]["alice"])
    page = admin.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    assert "People there who are no one here" in page and "outsider" in page
    assert json.dumps(job.params["redmine"]) == json.dumps({"issues": 3, "members": 5})
