"""A shared mailbox against a real IMAP server (Debian's Dovecot with its ACL plugins, tests/mail_server.py): its
conversations come in without quoted history or signatures, attachments through the normal extraction, and each
folder's conversations reach exactly the members its ACL admits — checked against what Dovecot itself lets each of
them open — before and after the mailbox's owner changes an ACL.

The mail users: hanna and c.lopez in the mail group `hr` (carla here, by the people map), sam in none. The folders:
INBOX open to anyone; Escalations to hanna (the group only sees the folder listed, `l`); Payroll to the group with
c.lopez's `r` taken away by a negative entry; Legal to the mailbox's owner and a lawyer who is no one here."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from knowledge import tasks
from knowledge.models import Document, DocumentVersion, IngestJob, Source
from tenants.services import api_key_issue
from tests import mail_server
from tests.connectors.doors import sees
from tests.factories import make_member
from tests.mail_server import Dovecot

pytestmark = pytest.mark.skipif(not mail_server.available(), reason="needs Debian's dovecot-imapd")

OWNER = ("support", "support-secret-1")
CANARY = "okapi6620finch"
PAYROLL_CANARY = "tapir1187gull"
BASE = "/api/v1/tenants/acme"
LOGINS = {"hanna": "hanna", "carla": "c.lopez", "sam": "sam"}


@pytest.fixture
def dovecot():  # type: ignore[no-untyped-def]
    users = {"hanna": ("pw-hanna", ["hr"]), "c.lopez": ("pw-carla", ["hr"]), "sam": ("pw-sam", []),
             "lawyer": ("pw-lawyer", [])}  # fmt: skip
    served = Dovecot(users, OWNER).start()
    served.deliver("INBOX", "VPN token reset", "My VPN token stopped working this morning. What do I do?",
                   message_id="<vpn-1@example.com>", when="Mon, 07 Dec 2026 09:00:00 +0000")  # fmt: skip
    served.deliver(
        "INBOX", "Re: VPN token reset",
        "Open a ticket with the code VPN-RESET and we reissue it within the hour.\n\n-- \nAna, Support desk\n"
        "Acme Ltd, +34 600 000 000\n\nOn Mon, 7 Dec 2026 at 09:00, customer wrote:\n> My VPN token stopped working.",
        sender="ana@acme.test", message_id="<vpn-2@acme.test>", replying_to=["<vpn-1@example.com>"],
        when="Mon, 07 Dec 2026 10:00:00 +0000", attachment=("reset-steps.txt", b"Step 1: open the portal VPN-RESET."),
    )  # fmt: skip
    served.deliver("Escalations", "Refund for order 5512",
                   f"The customer is owed a refund of 1,240 EUR for order 5512. Reference {CANARY}.",
                   message_id="<refund-1@example.com>")  # fmt: skip
    served.deliver("Payroll", "Bonus schedule", f"Bonuses are paid on 15 March. Reference {PAYROLL_CANARY}.",
                   message_id="<bonus-1@acme.test>")  # fmt: skip
    served.deliver("Legal", "NDA with Globex", "The mutual NDA with Globex runs until 2028.",
                   message_id="<nda-1@acme.test>")  # fmt: skip
    served.share("INBOX", "anyone", "lr")
    served.share("Escalations", "hanna", "lr")
    served.share("Escalations", "$hr", "l")
    served.share("Payroll", "$hr", "lr")
    served.share("Payroll", "-c.lopez", "r")
    served.share("Legal", "lawyer", "lr")  # a mail user who is no one here
    yield served
    served.remove()


@pytest.fixture
def company(tenant_a, admin_a, dovecot, settings):  # type: ignore[no-untyped-def]
    settings.RAG_ALLOWED_MAIL_SERVERS = [f"127.0.0.1:{dovecot.port}"]
    people = {name: make_member(tenant_a, username=name) for name in ("hanna", "sam", "carla", "dave")}
    from tenants.services import group_create, group_member_add

    group = group_create(tenant=tenant_a, name="hr")
    for name in ("hanna", "carla"):
        group_member_add(tenant=tenant_a, actor=admin_a, group=group, user=people[name])
    people["alice"] = admin_a
    key = api_key_issue(tenant=tenant_a, name="h", scope="read", acts_for=["user:hanna"])
    return {"tenant": tenant_a, "people": people, "key-hanna": key}


def _location(dovecot: Dovecot, password: str = OWNER[1]) -> str:
    return f"imap://{OWNER[0]}:{password}@127.0.0.1:{dovecot.port}/"


def _create(company: dict[str, Any], dovecot: Dovecot, capture) -> Source:  # type: ignore[no-untyped-def]
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    body = {"kind": "mailbox", "name": "support", "path": _location(dovecot), "people": "carla=c.lopez"}
    with capture(execute=True):
        created = admin.post(f"{BASE}/sources/", body, format="json")
    assert created.status_code == 201, created.content
    assert OWNER[1] not in created.content.decode()
    return Source.objects.get(kind="mailbox")


def _by_folder(source: Source) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for document in Document.objects.filter(source=source, status="active"):
        found.setdefault(document.document_key.split("/", 1)[0], sorted(document.effective_access))
    return found


def _matches_dovecot(dovecot: Dovecot, access: dict[str, list[str]]) -> None:
    """Each member with a mail account reads a folder's conversations here exactly when Dovecot lets them open it."""
    for member, login in LOGINS.items():
        for folder, readers in access.items():
            if folder == "INBOX":
                continue  # the owner's INBOX is not offered through the shared namespace; anyone-lr is checked below
            here = "tenant" in readers or f"user:{member}" in readers
            assert here == dovecot.may_read(login, folder), (member, folder, readers)


def _sees(company: dict[str, Any], who: str, folder: str, question: str, canary: str) -> bool:
    """The folder's one conversation for this identity, through every door (tests/connectors/doors.py)."""
    identity = company["key-hanna"] if who == "key-hanna" else company["people"][who]
    document = Document.objects.get(document_key__startswith=f"{folder}/", document_key__endswith=".md")
    return sees(identity, question, document, canary)


def test_conversations_come_in_with_their_own_words_and_each_folders_acl_as_dovecot_applies_it(
    company, dovecot, django_capture_on_commit_callbacks
):
    source = _create(company, dovecot, django_capture_on_commit_callbacks)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.SYNC)
    assert job.state == IngestJob.State.SUCCEEDED, (job.message, job.errors)
    access = _by_folder(source)
    assert access == {
        "INBOX": ["tenant"],
        "Escalations": ["user:hanna"],  # her own entry; the group only sees it listed
        "Payroll": ["user:hanna"],  # the group, less c.lopez's negative entry
        "Legal": [],  # the owner and a lawyer who is no one here: the admins here
    }
    assert job.params["unmapped"] == [{"principal": "lawyer", "documents": 1}]
    _matches_dovecot(dovecot, access)

    vpn = Document.objects.get(
        source=source, document_key__startswith="INBOX/vpn-token-reset-", document_key__endswith=".md"
    )
    text = vpn.versions.get(status="active").chunks.first().text
    assert "Open a ticket with the code VPN-RESET" in text and "My VPN token stopped working this morning" in text
    assert "Support desk" not in text and "+34 600" not in text and "> My VPN" not in text  # signature, quote
    assert vpn.versions.count() == 2  # one version a message
    steps = Document.objects.get(source=source, document_key=vpn.document_key.removesuffix(".md") + "/reset-steps.txt")
    assert sorted(steps.effective_access) == ["tenant"]
    assert "inbox" in set(vpn.tags.values_list("name", flat=True))  # tags are lower case

    question, who = "How much is the refund for order 5512?", ("hanna", "key-hanna", "carla", "sam", "dave")
    assert [_sees(company, w, "Escalations", question, CANARY) for w in who] == [True, True, False, False, False]
    payroll = [_sees(company, w, "Payroll", "When are bonuses paid?", PAYROLL_CANARY) for w in ("hanna", "carla")]
    assert payroll == [True, False]


def test_an_acl_changed_by_the_mailboxs_owner_is_applied_by_the_permission_sync(
    company, dovecot, django_capture_on_commit_callbacks
):
    source = _create(company, dovecot, django_capture_on_commit_callbacks)
    before = set(DocumentVersion.objects.filter(document__source=source).values_list("pk", flat=True))
    dovecot.share("Escalations", "sam", "lr")
    dovecot.share("Escalations", "hanna", "")  # her entry removed: the group's `l` is all she has left
    dovecot.share("Payroll", "-c.lopez", "")  # the negative entry removed: the group reads again
    with django_capture_on_commit_callbacks(execute=True):
        tasks.scheduled_permissions_task(source.pk)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.PERMISSIONS)
    assert job.state == IngestJob.State.SUCCEEDED, job.message
    access = _by_folder(source)
    assert access["Escalations"] == ["user:sam"] and access["Payroll"] == ["user:carla", "user:hanna"]
    _matches_dovecot(dovecot, access)
    assert set(DocumentVersion.objects.filter(document__source=source).values_list("pk", flat=True)) == before
    question = "How much is the refund for order 5512?"
    assert _sees(company, "sam", "Escalations", question, CANARY)
    assert not _sees(company, "hanna", "Escalations", question, CANARY)


def test_a_resync_fetches_only_new_messages_and_retires_conversations_whose_messages_are_gone(
    company, dovecot, django_capture_on_commit_callbacks
):
    source = _create(company, dovecot, django_capture_on_commit_callbacks)
    thread = ["<vpn-1@example.com>", "<vpn-2@acme.test>"]
    when = "Mon, 07 Dec 2026 11:00:00 +0000"
    dovecot.deliver("INBOX", "Re: VPN token reset", "Thanks, the new token works.", message_id="<vpn-3@example.com>",
                    replying_to=thread, when=when)  # fmt: skip
    owner = dovecot.session(*OWNER)
    owner.select_folder("Legal")
    owner.delete_messages(owner.search(["ALL"]))
    owner.expunge()
    owner.logout()
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    with django_capture_on_commit_callbacks(execute=True):
        synced = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
    job = IngestJob.objects.get(public_id=synced.json()["id"])
    assert job.state == IngestJob.State.SUCCEEDED, (job.message, job.errors)
    assert (job.updated, job.retired) == (1, 1), (job.updated, job.retired, job.unchanged)
    vpn = Document.objects.get(
        source=source, document_key__startswith="INBOX/vpn-token-reset-", document_key__endswith=".md"
    )
    assert vpn.versions.count() == 3 and "the new token works" in vpn.versions.get(status="active").chunks.first().text
    assert not Document.objects.filter(source=source, document_key__startswith="Legal/", status="active").exists()


def test_a_mailbox_that_fails_or_is_not_allowed_changes_nothing_and_says_why(
    company, dovecot, django_capture_on_commit_callbacks, settings
):
    admin = APIClient()
    admin.force_login(company["people"]["alice"])
    other = {"kind": "mailbox", "name": "other", "path": "imap://x:y@mail.example.com/"}
    refused = admin.post(f"{BASE}/sources/", other, format="json")
    assert refused.status_code == 400 and "RAG_ALLOWED_MAIL_SERVERS" in refused.content.decode()

    source = _create(company, dovecot, django_capture_on_commit_callbacks)
    before = _by_folder(source)

    def sync(password: str) -> IngestJob:
        source.set_location(_location(dovecot, password))
        source.save()
        with django_capture_on_commit_callbacks(execute=True):
            response = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
        return IngestJob.objects.get(public_id=response.json()["id"])

    assert "refused the connector's login support" in sync("wrong").message
    source.set_location(f"imap://127.0.0.1:{dovecot.port}/")
    source.credential = ""
    source.save()
    with django_capture_on_commit_callbacks(execute=True):
        nameless = admin.post(f"{BASE}/sources/{source.public_id}/sync/")
    assert "names no login" in IngestJob.objects.get(public_id=nameless.json()["id"]).message
    dovecot.stop()
    down = sync(OWNER[1])
    assert down.state == IngestJob.State.FAILED and "cannot be reached" in down.message
    assert _by_folder(source) == before


def test_a_huge_attachment_is_listed_skipped_and_a_hostile_file_name_stays_inside_its_conversation(
    company, dovecot, django_capture_on_commit_callbacks, settings
):
    settings.RAG_MAX_FILE_BYTES = 4000
    dovecot.deliver("INBOX", "Logs for the outage", "The full server log is attached.", message_id="<log-1@x.test>",
                    attachment=("server.log", b"GET /health 200\n" * 1000))  # fmt: skip
    dovecot.deliver("INBOX", "Invoice copy", "The invoice is attached.", message_id="<inv-1@x.test>",
                    attachment=("../../../etc/passwd", b"Invoice 7781: 312 EUR, due 31 January."))  # fmt: skip
    source = _create(company, dovecot, django_capture_on_commit_callbacks)
    job = IngestJob.objects.get(source=source, kind=IngestJob.Kind.SYNC)
    assert job.state == IngestJob.State.SUCCEEDED, (job.message, job.errors)
    skipped = [s for s in job.skips if s["key"].endswith("/server.log")]
    assert skipped and "over RAG_MAX_FILE_BYTES" in skipped[0]["reason"]
    invoice = Document.objects.get(
        source=source, document_key__startswith="INBOX/invoice-copy-", document_key__endswith=".md"
    )
    attached = Document.objects.get(source=source, document_key=invoice.document_key.removesuffix(".md") + "/passwd")
    assert "Invoice 7781" in attached.versions.get(status="active").chunks.first().text
    assert not Document.objects.filter(source=source, document_key__contains="..").exists()
