"""A DokuWiki source against a real DokuWiki (Debian's package under PHP's server, tests/wiki_server.py): its pages,
revisions and links come in, and each page reaches exactly the members the wiki itself admits — through every door,
before and after its administrator changes a rule, and fail-closed where the wiki admits no one here.

The wiki's people: hanna and c.lopez in its group `hr`, sam a plain user; here carla is mapped to c.lopez, dave
has no wiki account and alice (an admin here) none either. Its rules: everything readable by everyone, except `hr`
(its group only) and, inside it, `salaries`, which the page's own rules close to the group and open to hanna alone
(a page rule over a namespace rule, a user rule beside a group rule: the wiki's own resolution decides), and `legal`
(no one here)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client
from django_q.models import Schedule
from rest_framework.test import APIClient

from knowledge import tasks
from knowledge.models import Document, DocumentVersion, IngestJob, Source
from knowledge.schedules import permission_schedule_name
from tenants.services import api_key_issue
from tests import wiki_server
from tests.connectors.doors import sees
from tests.factories import make_member
from tests.wiki_server import CONNECTOR, DokuWiki

pytestmark = pytest.mark.skipif(not wiki_server.available(), reason="needs Debian's dokuwiki and php-cli")

CANARY = "quokka5519heron"
QUESTION = "What are the salary bands for engineers?"
BASE = "/api/v1/tenants/acme"
RULES = [
    ("*", "@ALL", 1), ("*", "@user", 8),
    ("hr:*", "@ALL", 0), ("hr:*", "@hr", 1), ("hr:*", "@reader", 1),
    ("hr:salaries", "@hr", 0), ("hr:salaries", "hanna", 1), ("hr:salaries", "@reader", 1),
    ("legal:*", "@ALL", 0), ("legal:*", "@reader", 1),
]  # fmt: skip
PAGES = {
    "start": "====== Welcome ======\nStart with the [[support:vpn|VPN guide]] and the [[hr:policy]].\n",
    "support:vpn": "====== VPN ======\nTo reset a VPN token, open a ticket with the code VPN-RESET.\n",
    "hr:policy": "====== Travel policy ======\nThe per diem for travel is 42 EUR a day.\n",
    "hr:salaries": f"====== Salary bands ======\nThe salary bands for engineers run from 58,000 to 91,000 EUR. "
    f"Reference {CANARY}.\n",
    "legal:nda": "====== NDA ======\nEvery contractor signs the mutual NDA before the first meeting.\n",
}


@pytest.fixture
def dokuwiki(tmp_path):  # type: ignore[no-untyped-def]
    served = DokuWiki(
        tmp_path,
        users={"hanna": ("pw-hanna", ["hr", "user"]), "c.lopez": ("pw-carla", ["hr", "user"]),
               "sam": ("pw-sam", ["user"])},
        rules=RULES,
    ).start()  # fmt: skip
    for page, text in PAGES.items():
        served.edit(page, text, f"created {page}", wait=False)
    time.sleep(1.05)  # the next save of hr:policy is a revision of its own (DokuWiki numbers them by the second)
    served.edit("hr:policy", PAGES["hr:policy"].replace("42 EUR", "45 EUR"), "per diem raised from March")
    yield served
    served.stop()


@pytest.fixture
def company(tenant_a, admin_a, dokuwiki, settings):  # type: ignore[no-untyped-def]
    wiki = dokuwiki
    settings.RAG_ALLOWED_WEB_PREFIXES = [wiki.base]  # loopback, named explicitly by the operator
    people = {name: make_member(tenant_a, username=name) for name in ("hanna", "sam", "carla", "dave")}
    people["alice"] = admin_a
    keys = {
        "key-hanna": api_key_issue(tenant=tenant_a, name="h", scope="read", acts_for=["user:hanna"]),
        "key-tenant": api_key_issue(tenant=tenant_a, name="t", scope="read"),
    }
    return {"tenant": tenant_a, "people": people, "keys": keys}


def _location(wiki: DokuWiki, credential: tuple[str, str] = CONNECTOR) -> str:
    return wiki.base.replace("http://", f"http://{credential[0]}:{credential[1]}@")


def _create(company: dict[str, Any], wiki: DokuWiki, capture, **options: Any) -> Source:  # type: ignore[no-untyped-def]
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    body = {"kind": "dokuwiki", "name": "wiki", "path": _location(wiki), "people": "carla=c.lopez", **options}
    with capture(execute=True):
        created = admin.post(f"{BASE}/sources/", body, format="json")
    assert created.status_code == 201, created.content
    assert "reader-secret" not in created.content.decode()  # the credential is sealed, never shown
    return Source.objects.get(kind="dokuwiki")


def _access(source: Source) -> dict[str, list[str]]:
    return {d.document_key: sorted(d.effective_access) for d in Document.objects.filter(source=source)}


def _sees(company: dict[str, Any], who: str) -> bool:
    """The salaries page for this identity, through every door (tests/connectors/doors.py), all agreeing."""
    identity = company["keys"][who] if who.startswith("key-") else company["people"][who]
    return sees(identity, QUESTION, Document.objects.get(document_key="hr/salaries.md"), CANARY)


def test_a_wiki_comes_in_with_its_revisions_links_and_the_read_rights_the_wiki_itself_resolves(
    company, dokuwiki, django_capture_on_commit_callbacks
):
    wiki = dokuwiki
    source = _create(company, dokuwiki, django_capture_on_commit_callbacks)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.SYNC)
    assert job.state == IngestJob.State.SUCCEEDED and job.added == 5, (job.message, job.errors)
    assert _access(source) == {
        "start.md": ["tenant"],
        "support/vpn.md": ["tenant"],
        "hr/policy.md": ["user:carla", "user:hanna"],  # carla through the people map (c.lopez)
        "hr/salaries.md": ["user:hanna"],  # the page's rules over the namespace's
        "legal/nda.md": [],  # the wiki admits no one here: the tenant's admins only
    }
    assert job.params["access"]["admins_only"] == 1 and job.params["access"]["admins_only_keys"] == ["legal/nda.md"]

    policy = Document.objects.get(source=source, document_key="hr/policy.md")
    versions = list(policy.versions.order_by("version").values_list("commit", flat=True))
    assert [(v["author"], v["message"]) for v in versions] == [
        ("wikiadmin", "created hr:policy"),
        ("wikiadmin", "per diem raised from March"),
    ]
    assert set(policy.tags.values_list("name", flat=True)) >= {"hr"}
    assert policy.source_path == f"{wiki.base}doku.php?id=hr:policy"
    start = Document.objects.get(source=source, document_key="start.md")
    assert set(start.links_out.values_list("target", flat=True)) == {"support/vpn", "hr/policy"}

    expected = {"hanna": True, "key-hanna": True, "sam": False, "carla": False, "dave": False, "key-tenant": False}
    assert {who: _sees(company, who) for who in expected} == expected
    assert _sees(company, "alice")  # an admin sees every document


def test_a_rule_changed_in_the_wiki_is_applied_by_the_permission_sync_as_a_payload_change(
    company, dokuwiki, django_capture_on_commit_callbacks
):
    wiki = dokuwiki
    source = _create(company, dokuwiki, django_capture_on_commit_callbacks)
    schedule = Schedule.objects.get(name=permission_schedule_name(source))
    assert schedule.minutes == 5 and schedule.func == "knowledge.tasks.scheduled_permissions_task"
    versions_before = set(DocumentVersion.objects.filter(document__source=source).values_list("pk", "content_hash"))

    wiki.grant("hr:salaries", "sam", 1)  # a user rule on the page: sam in
    wiki.revoke("hr:salaries", "hanna")  # hanna now meets the page's rule for her group: out
    with django_capture_on_commit_callbacks(execute=True):
        tasks.scheduled_permissions_task(source.pk)
    job = IngestJob.objects.filter(source=source, kind=IngestJob.Kind.PERMISSIONS).get()
    assert job.state == IngestJob.State.SUCCEEDED, job.message
    report = job.params["access"]
    assert (report["documents"], report["opened"], report["closed"]) == (5, 1, 1)
    assert report["changes"] == [{"key": "hr/salaries.md", "opened": ["user:sam"], "closed": ["user:hanna"]}]
    assert set(DocumentVersion.objects.filter(document__source=source).values_list("pk", "content_hash")) == (
        versions_before
    )  # nothing re-read, nothing re-embedded
    assert not Document.objects.filter(source=source, access_pending=True).exists()  # the payloads caught up
    assert (_sees(company, "sam"), _sees(company, "hanna"), _sees(company, "key-hanna")) == (True, False, False)

    wiki.grant("legal:*", "@ALL", 1)  # the legal namespace opened to everyone
    with django_capture_on_commit_callbacks(execute=True):
        tasks.scheduled_permissions_task(source.pk)
    assert _access(source)["legal/nda.md"] == ["tenant"]


def test_a_resync_reads_only_what_changed_with_every_revision_since_and_retires_what_the_wiki_deleted(
    company, dokuwiki, django_capture_on_commit_callbacks
):
    wiki = dokuwiki
    source = _create(company, dokuwiki, django_capture_on_commit_callbacks)
    wiki.edit("hr:policy", PAGES["hr:policy"].replace("42 EUR", "47 EUR"), "per diem for 2027", wait=False)
    wiki.edit("support:vpn", "", "the VPN was replaced")  # an empty save deletes a DokuWiki page
    wiki.edit("hr:policy", PAGES["hr:policy"].replace("42 EUR", "48 EUR"), "per diem corrected")
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        synced = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
    job = IngestJob.objects.get(public_id=synced.json()["id"])
    assert (job.added, job.updated, job.unchanged, job.retired, job.failed) == (0, 1, 3, 1, 0), job.errors
    policy = Document.objects.get(source=source, document_key="hr/policy.md")
    messages = [v["message"] for v in policy.versions.order_by("version").values_list("commit", flat=True)]
    assert messages == ["created hr:policy", "per diem raised from March", "per diem for 2027", "per diem corrected"]
    assert "48 EUR" in policy.versions.get(status="active").chunks.first().text
    assert Document.objects.get(source=source, document_key="support/vpn.md").status == "retired"


def test_a_wiki_that_fails_keeps_what_was_read_and_says_why(
    company, dokuwiki, django_capture_on_commit_callbacks, settings
):
    wiki = dokuwiki
    source = _create(company, dokuwiki, django_capture_on_commit_callbacks)
    before = _access(source)
    admin = APIClient()
    admin.force_login(company["people"]["alice"])

    def sync() -> IngestJob:
        with django_capture_on_commit_callbacks(execute=True):
            response = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
        assert response.status_code == 202, response.content
        return IngestJob.objects.get(public_id=response.json()["id"])

    source.set_location(_location(wiki, (CONNECTOR[0], "revoked")))  # the connector's password changed
    source.save()
    failed = sync()
    assert failed.state == IngestJob.State.FAILED and "refused the connector's user name or password" in failed.message
    source.set_location(_location(wiki))
    source.save()

    (wiki.root / "broken" / "lib" / "exe").mkdir(parents=True)
    (wiki.root / "broken" / "lib" / "exe" / "xmlrpc.php").write_text("<html><body>Maintenance</body></html>")
    source.set_location(_location(wiki).rstrip("/") + "/broken/")
    source.save()
    assert "did not answer wiki.getAllPages with XML-RPC" in sync().message
    source.set_location(_location(wiki))
    source.save()

    wiki.stop()
    down = sync()
    assert down.state == IngestJob.State.FAILED and "cannot be reached" in down.message
    with django_capture_on_commit_callbacks(execute=True):
        tasks.scheduled_permissions_task(source.pk)  # the permission sync fails the same way, and changes nothing
    rights = IngestJob.objects.filter(source=source, kind=IngestJob.Kind.PERMISSIONS).get()
    assert rights.state == IngestJob.State.FAILED and "cannot be reached" in rights.message
    assert _access(source) == before
    assert Document.objects.filter(source=source, status="active").count() == 5  # nothing lost


def test_a_wiki_location_is_checked_like_a_website_and_its_options_are_checked(company, dokuwiki, settings):
    wiki = dokuwiki
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    body = {"kind": "dokuwiki", "name": "other", "path": "http://ragsite:x@10.1.2.3/wiki/"}
    refused = admin.post(f"{BASE}/sources/", body, format="json")
    assert refused.status_code == 400 and "this server allows" in json.dumps(refused.json())
    bad = admin.post(f"{BASE}/sources/", {**body, "path": _location(wiki), "people": "carla"}, format="json")
    assert bad.status_code == 400 and "member=login" in json.dumps(bad.json())
    staff = APIClient()
    staff.force_login(company["people"]["sam"])
    assert staff.post(f"{BASE}/sources/", {**body, "path": _location(wiki)}, format="json").status_code in (403, 404)
    assert not Source.objects.filter(kind="dokuwiki").exists()


def test_the_job_page_lists_what_opened_closed_and_what_the_wiki_admits_no_one_here_to(
    company, dokuwiki, django_capture_on_commit_callbacks
):
    source = _create(company, dokuwiki, django_capture_on_commit_callbacks)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.SYNC)
    admin = Client()
    admin.force_login(company["people"]["alice"])
    page = admin.get(f"/t/acme/jobs/{job.public_id}/").content.decode()
    assert "legal/nda.md" in page and "admins only" in page
    listing = admin.get("/t/acme/sources/").content.decode()
    assert "1 document for admins only" in listing  # the source's row says so, linking to the job
    staff = Client()
    staff.force_login(company["people"]["sam"])
    assert staff.get(f"/t/acme/jobs/{job.public_id}/").status_code in (403, 404)
    listed = APIClient()
    listed.force_login(company["people"]["alice"])
    shown = listed.get(f"{BASE}/jobs/{job.public_id}/").json()
    assert shown["access"] == {"documents": 5, "opened": 0, "closed": 0, "admins_only": 1}


def test_a_wiki_that_goes_down_in_the_middle_of_a_sync_loses_nothing_and_the_next_sync_finishes(
    company, dokuwiki, django_capture_on_commit_callbacks, monkeypatch
):
    wiki = dokuwiki
    source = _create(company, wiki, django_capture_on_commit_callbacks)
    state = dict(Source.objects.get(pk=source.pk).sync_state)
    for page in ("hr:policy", "start", "support:vpn"):
        wiki.edit(page, PAGES[page] + "\nRevised for 2027.\n", "revised for 2027", wait=False)
    from knowledge.ingest import dokuwiki as connector

    real_call, pages_read = connector.WikiClient.call, []

    def goes_down_after_one_page(self, method, *params):  # type: ignore[no-untyped-def]
        if method == "wiki.getPage":
            pages_read.append(params[0])
            if len(pages_read) == 2:
                wiki.stop()  # the real server stops between two pages
        return real_call(self, method, *params)

    monkeypatch.setattr(connector.WikiClient, "call", goes_down_after_one_page)
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
    failed = IngestJob.objects.get(public_id=response.json()["id"])
    assert failed.state == IngestJob.State.FAILED and "cannot be reached" in failed.message
    assert Document.objects.filter(source=source, status="active").count() == 5  # nothing retired
    assert Source.objects.get(pk=source.pk).sync_state == state  # the next sync reads again what this one missed

    monkeypatch.setattr(connector.WikiClient, "call", real_call)
    wiki.start()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
    again = IngestJob.objects.get(public_id=response.json()["id"])
    assert again.state == IngestJob.State.SUCCEEDED and again.retired == 0, (again.message, again.errors)
    assert again.updated + again.unchanged == 5 and again.updated >= 2
    for key in ("hr/policy.md", "start.md", "support/vpn.md"):
        active = Document.objects.get(source=source, document_key=key).versions.get(status="active")
        assert "Revised for 2027" in active.chunks.first().text, key
