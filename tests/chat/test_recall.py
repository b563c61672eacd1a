"""Recall on change (chat/recall.py) on a real folder source, the real retriever and the real claim verifier (the model
is the only stand-in: its answer text is given), with the agent's session feed through REST and a real HTTP receiver
for the key's webhook: exactly the answers whose evidence changed are flagged, each receiver is told once, the asker
of a restricted document is told nothing but "no longer available"; retention, the digest and the export."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from django.core import mail
from django.test import TestCase
from django.utils import timezone
from rest_framework.test import APIClient

from agent_sessions.models import SessionChange
from agent_sessions.services import session_create
from chat import digests, recall, receipts, retention, webhooks
from chat.citations import citation_of
from chat.models import AnswerGround, AnswerRecord, ChatMessage, ChatSession, DigestChoice, Verdict, WebhookDelivery
from chat.records import answer_record
from chat.services import Answer
from knowledge import services
from knowledge.claims import EvidenceText, Verifier
from knowledge.ingest import pipeline
from knowledge.models import Document
from knowledge.search.retrieval import retrieve
from tenants.models import Membership
from tenants.principals import Viewer
from tenants.services import api_key_issue, group_create, group_member_add, group_member_remove
from tests.factories import make_folder_source, make_member

TRAVEL = "# Travel\n\nThe per diem for travel is 42 EUR a day.\n\nTrains are booked through the travel portal.\n"
LEAVE = "# Leave\n\nEvery employee has 27 days of paid leave a year.\n"


def answer_on(tenant, key: str, question: str, said: str, **who: Any) -> AnswerRecord:  # type: ignore[no-untyped-def]
    """An answer as the answer flow records it: the real hit of `key`, the claim checked by the real verifier."""
    found = retrieve(viewer=Viewer.everything(tenant), query=question, top_k=5, filters=who.pop("filters", None))
    hits = [h for h in found if h.chunk.document.document_key == key][:1]
    assert hits, key
    claims = Verifier([EvidenceText(text=hits[0].chunk.text, units=[])]).check(said)
    assert claims[0].supported and claims[0].quotes
    result = Answer(answer=said, generated=True, model="test", status="answered", citations=[citation_of(1, hits[0])],
                    hits=hits, claims=[c.as_dict() for c in claims])  # fmt: skip
    session = who.pop("session", None)
    return answer_record(viewer=Viewer.everything(tenant), question=question, result=result, channel="api",
                         agent_session=session, **who)  # fmt: skip


def resync(source, root: Path, name: str, text: str | None) -> None:  # type: ignore[no-untyped-def]
    if text is None:
        (root / name).unlink()
    else:
        (root / name).write_text(text)
    with TestCase.captureOnCommitCallbacks(execute=True):
        pipeline.sync_folder(source=source, root=root)


class Receiver:
    """A real HTTP server for a key's webhook: answers each POST with the next status given (hangs on "hang")."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers, self.got = list(answers), []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.got.append((dict(self.headers), body))
                answer = receiver.answers.pop(0) if receiver.answers else 200
                if answer == "hang":
                    time.sleep(4)
                    return
                self.send_response(answer)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/ragsite"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):  # type: ignore[no-untyped-def]
    made: list[Receiver] = []

    def make(answers: list[Any]) -> Receiver:
        made.append(Receiver(answers))
        settings.RAG_ALLOWED_WEB_PREFIXES = [made[-1].url.rsplit("/", 1)[0] + "/"]
        return made[-1]

    yield make
    for one in made:
        one.close()


def _signed(secret: str, headers: dict[str, str], body: bytes) -> bool:
    fields = dict(part.split("=", 1) for part in headers["X-Ragsite-Signature"].split(","))
    expected = hmac.new(secret.encode(), f"{fields['t']}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields["v1"])


def test_exactly_the_answers_whose_evidence_changed_are_flagged_and_each_receiver_is_told(tenant_a, tmp_path, receiver):
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files={"travel.md": TRAVEL, "leave.md": LEAVE})
    hanna = make_member(tenant_a, username="hanna")
    key, raw = api_key_issue(tenant=tenant_a, name="agent", scope="read")
    session = session_create(tenant=tenant_a, api_key=key, purpose="travel desk")
    hook = receiver([200])
    _webhook, secret = webhooks.webhook_set(api_key=key, url=hook.url)
    per_diem = answer_on(tenant_a, "travel.md", "What is the per diem for travel?", "The per diem is 42 EUR a day [1].",
                         user=hanna)  # fmt: skip
    leave = answer_on(tenant_a, "leave.md", "How many days of leave?", "Employees have 27 days of paid leave [1].",
                      user=hanna)  # fmt: skip
    agent = answer_on(tenant_a, "travel.md", "per diem travel", "The per diem is 42 EUR a day [1].", api_key=key,
                      session=session)  # fmt: skip
    assert recall.scan().flagged == 0  # nothing changed

    # Each change brings a scan as it commits (the worker's, run inline here); the minute schedule is the backstop.
    resync(source, root, "travel.md", TRAVEL.replace("travel portal", "new travel portal"))  # an edit elsewhere
    assert AnswerRecord.objects.filter(recalled_at__isnull=False).count() == 0
    assert AnswerGround.objects.filter(document__document_key="travel.md", version=2).count() == 2  # looked at
    assert recall.scan().checked == 0  # checked once: their ground is what it was last checked against

    resync(source, root, "travel.md", TRAVEL.replace("42 EUR", "45 EUR"))
    assert set(AnswerRecord.objects.filter(recall_state="changed")) == {per_diem, agent}
    assert SessionChange.objects.filter(session=session, kind="answer").count() == 1
    assert WebhookDelivery.objects.count() == 1
    per_diem.refresh_from_db()
    leave.refresh_from_db()
    assert per_diem.recall_state == "changed" and leave.recall_state == "" and leave.recalled_at is None
    told = per_diem.recall["claims"][0]
    assert told["now"] == "changed" and "45 EUR" in told["changed_to"] and told["still_holds"] is False
    assert recall.scan().flagged == 0  # told once

    agent_client = APIClient()
    agent_client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    feed = agent_client.get(f"/api/v1/tenants/acme/sessions/{session.public_id}/changes/").json()["changes"]
    answers = [c for c in feed if c["kind"] == "answer"]
    assert len(answers) == 1 and answers[0]["answer_id"] == str(agent.public_id) and answers[0]["now"] == "changed"
    assert WebhookDelivery.objects.get().delivered_at is not None  # sent by its own task, queued by the scan
    headers, body = hook.got[0]
    posted = json.loads(body)
    assert _signed(secret, headers, body) and posted["answer_id"] == str(agent.public_id)
    assert posted["event"] == "answer.recalled" and "45 EUR" in posted["claims"][0]["changed_to"]

    with TestCase.captureOnCommitCallbacks(execute=True):
        services.documents_retire(tenant=tenant_a, documents=Document.objects.filter(document_key="leave.md"))
    leave.refresh_from_db()
    assert leave.recall_state == "retired"

    group_create(tenant=tenant_a, name="board")
    with TestCase.captureOnCommitCallbacks(execute=True):  # hanna is not on the board
        services.source_set_access(tenant=tenant_a, source=source, access=["group:board"])
    per_diem.refresh_from_db()
    assert per_diem.recall_state == "no_longer_available"
    assert per_diem.recall["claims"] == [{"index": 0, "now": "no_longer_available"}]
    assert "EUR" not in json.dumps(recall.notice(per_diem)) and "travel" not in json.dumps(recall.notice(per_diem))
    assert recall.unseen_count(tenant=tenant_a, user=hanna) == 2


def test_someone_who_leaves_the_group_is_told_their_answer_is_no_longer_available(tenant_a, tmp_path):
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files={"travel.md": TRAVEL})
    hanna = make_member(tenant_a, username="hanna")
    travel = group_create(tenant=tenant_a, name="travel")
    group_member_add(tenant=tenant_a, actor=None, group=travel, user=hanna)
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.source_set_access(tenant=tenant_a, source=source, access=["group:travel"])
    record = answer_on(tenant_a, "travel.md", "What is the per diem for travel?", "The per diem is 42 EUR a day [1].",
                       user=hanna)  # fmt: skip
    assert recall.scan().flagged == 0
    with TestCase.captureOnCommitCallbacks(execute=True):
        group_member_remove(tenant=tenant_a, actor=None, group=travel, user=hanna)
    record.refresh_from_db()
    assert record.recall_state == "no_longer_available"


def test_a_webhook_is_retried_with_back_off_a_hanging_one_is_cut_off_and_one_outside_the_prefixes_refused(
    tenant_a, tmp_path, receiver, settings
):
    settings.RAG_WEBHOOK_TIMEOUT_S = 1
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files={"travel.md": TRAVEL})
    key, _raw = api_key_issue(tenant=tenant_a, name="agent", scope="read")
    hook = receiver(["hang", 503, 200])
    webhooks.webhook_set(api_key=key, url=hook.url)
    answer_on(tenant_a, "travel.md", "per diem travel", "The per diem is 42 EUR a day [1].", api_key=key)
    resync(source, root, "travel.md", TRAVEL.replace("42 EUR", "45 EUR"))  # flagged, and its webhook tried
    delivery = WebhookDelivery.objects.get()  # it hung: cut off after RAG_WEBHOOK_TIMEOUT_S, to be tried again
    assert delivery.attempts == 1 and "Timeout" in delivery.last_error and delivery.next_at is not None
    # Each run's clock is given (no test here depends on how long the machine takes).
    assert webhooks.deliver_due(now=delivery.next_at - dt.timedelta(seconds=1)).failed == 0  # not due yet
    later = delivery.next_at
    assert webhooks.deliver_due(now=later).failed == 1  # 503
    delivery.refresh_from_db()
    assert delivery.last_error == "the receiver answered 503"
    assert delivery.next_at == later + dt.timedelta(minutes=2)  # then 2 minutes
    assert webhooks.deliver_due(now=delivery.next_at).delivered == 1
    delivery.refresh_from_db()
    assert delivery.delivered_at is not None and delivery.next_at is None and delivery.attempts == 3

    with pytest.raises(webhooks.WebhookRefused):
        webhooks.webhook_set(api_key=key, url="http://127.0.0.1:9/elsewhere")
    with pytest.raises(webhooks.WebhookRefused):
        webhooks.webhook_set(api_key=key, url="http://169.254.169.254/latest/meta-data/")


def test_retention_deletes_old_chats_and_answers_and_nothing_else(tenant_a, admin_a, tmp_path):
    root = tmp_path / "kb"
    make_folder_source(tenant=tenant_a, root=root, files={"travel.md": TRAVEL})
    hanna = make_member(tenant_a, username="hanna")
    old, held, new = (answer_on(tenant_a, "travel.md", "per diem travel", "The per diem is 42 EUR a day [1].",
                                user=hanna) for _ in range(3))  # fmt: skip
    chat = ChatSession.objects.create(tenant=tenant_a, user=hanna)
    ChatMessage.objects.create(tenant=tenant_a, session=chat, role="user", text="per diem travel")
    Verdict.objects.create(tenant=tenant_a, answer=held, helpful=False, reason="wrong_fact", channel="chat", user=hanna)
    long_ago = timezone.now() - dt.timedelta(days=100)
    AnswerRecord.objects.filter(pk__in=[old.pk, held.pk]).update(created_at=long_ago)
    ChatSession.objects.filter(pk=chat.pk).update(updated_at=long_ago)
    assert retention.due(tenant_a).cutoff is None and retention.apply() == {}  # default: keep

    tenant_a.answers_keep_days = 30
    tenant_a.save()
    due = retention.due(tenant_a)
    assert (due.chats, due.answers, due.kept_open, due.oldest) == (1, 1, 1, old)
    client = APIClient()
    client.force_login(admin_a)
    page = client.get("/t/acme/retention/").content.decode()
    assert "1 chats and 1 answers" in page and "kept while its thumbs-down is open" in page
    assert retention.apply() == {"acme": {"chats": 1, "answers": 1}}
    assert set(AnswerRecord.objects.values_list("pk", flat=True)) == {held.pk, new.pk}
    assert not ChatSession.objects.exists() and Document.objects.filter(document_key="travel.md").exists()
    staff = APIClient()
    staff.force_login(hanna)
    assert staff.get("/t/acme/retention/").status_code == 404  # an admin page, as the others
    assert client.post("/t/acme/retention/", {"keep_days": "0"}).status_code == 400


def test_a_digest_tells_a_member_what_changed_in_what_they_asked_in_sentences_with_citations(tenant_a, tmp_path):
    root = tmp_path / "kb"
    source = make_folder_source(tenant=tenant_a, root=root, files={"travel.md": TRAVEL, "leave.md": LEAVE})
    hanna = make_member(tenant_a, username="hanna")
    hanna.email = "hanna@example.com"
    hanna.save()
    answer_on(tenant_a, "travel.md", "What is the per diem for travel?", "The per diem is 42 EUR a day [1].",
              user=hanna)  # fmt: skip
    DigestChoice.objects.create(tenant=tenant_a, user=hanna, every="daily")
    resync(source, root, "travel.md", TRAVEL.replace("42 EUR", "45 EUR"))
    resync(source, root, "leave.md", LEAVE.replace("27", "30"))  # she never asked about leave
    assert digests.send_due() == 1
    sent = mail.outbox[-1]
    assert sent.to == ["hanna@example.com"] and "1 change" in sent.subject
    assert "travel.md changed (version 2" in sent.body
    assert "“The per diem for travel is 45 EUR a day.” [travel.md v2]" in sent.body
    assert "leave" not in sent.body
    assert digests.send_due() == 0  # not due again for a day
    membership = Membership.objects.get(tenant=tenant_a, user=hanna)
    with TestCase.captureOnCommitCallbacks(execute=True):
        group_create(tenant=tenant_a, name="board")
        services.source_set_access(tenant=tenant_a, source=source, access=["group:board"])
    assert digests.digest(membership, since=timezone.now() - dt.timedelta(days=1)) == []  # no longer hers to read


def test_receipts_export_as_json_lines_each_reader_gets_what_they_may(tenant_a, admin_a, tmp_path):
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"travel.md": TRAVEL})
    hanna, sam = make_member(tenant_a, username="hanna"), make_member(tenant_a, username="sam")
    key, raw = api_key_issue(tenant=tenant_a, name="agent", scope="read")
    said = "The per diem is 42 EUR a day [1]."
    mine = answer_on(tenant_a, "travel.md", "per diem travel", said, user=hanna)
    theirs = answer_on(tenant_a, "travel.md", "per diem travel", said, user=sam)
    by_key = answer_on(tenant_a, "travel.md", "per diem travel", said, api_key=key)

    def ids(client: APIClient, url: str = "/api/v1/tenants/acme/receipts/") -> list[str]:
        response = client.get(url)
        assert response.status_code == 200 and response["Content-Type"].startswith("application/x-ndjson")
        lines = b"".join(response.streaming_content).decode().splitlines()
        return [json.loads(line)["answer_id"] for line in lines]

    clients = {}
    for name, user in (("hanna", hanna), ("admin", admin_a)):
        clients[name] = APIClient()
        clients[name].force_login(user)
    clients["key"] = APIClient()
    clients["key"].credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    assert ids(clients["hanna"]) == [str(mine.public_id)]
    assert ids(clients["key"]) == [str(by_key.public_id)]
    assert ids(clients["admin"]) == [str(r.public_id) for r in (mine, theirs, by_key)]
    assert ids(clients["admin"], "/t/acme/chat/receipts.jsonl") == [str(r.public_id) for r in (mine, theirs, by_key)]
    assert ids(clients["hanna"], "/api/v1/tenants/acme/receipts/?since=2999-01-01") == []
    assert clients["hanna"].get("/api/v1/tenants/acme/receipts/?since=soon").status_code == 400
    line = json.loads(b"".join(clients["hanna"].get("/api/v1/tenants/acme/receipts/").streaming_content))
    assert line["claims"][0]["then"] == {"state": "held"} and "principals" not in line["asked_with"]
    audit = [json.loads(x) for x in b"".join(clients["admin"].get("/api/v1/tenants/acme/receipts/").streaming_content)
             .decode().splitlines()]  # fmt: skip
    assert audit[0]["asked_with"]["principals"] is None  # asked as everything (the test's viewer)


def test_validity_that_ends_overnight_and_a_successor_in_force_flag_with_no_one_touching_the_answer(tenant_a, tmp_path):
    root = tmp_path / "kb"
    today = timezone.localdate()
    source = make_folder_source(tenant=tenant_a, root=root, files={
        "travel.md": f"---\nvalid_until: {today.isoformat()}\n---\n" + TRAVEL, "leave.md": LEAVE})  # fmt: skip
    hanna = make_member(tenant_a, username="hanna")
    travel = answer_on(tenant_a, "travel.md", "What is the per diem for travel?", "The per diem is 42 EUR a day [1].",
                       user=hanna)  # fmt: skip
    leave = answer_on(tenant_a, "leave.md", "How many days of leave?", "Employees have 27 days of paid leave [1].",
                      user=hanna)  # fmt: skip
    assert recall.scan().flagged == 0  # in force all of today
    assert recall.scan(now=timezone.now() + dt.timedelta(days=1)).flagged == 1  # the first scan after midnight
    travel.refresh_from_db()
    assert travel.recall_state == "expired" and travel.recall["claims"][0]["valid_until"] == today.isoformat()

    later = (today + dt.timedelta(days=30)).isoformat()  # a successor that comes into force in 30 days
    resync(source, root, "leave-2027.md", f"---\nsupersedes: leave.md\nvalid_from: {later}\n---\n# Leave\n\n30 days.\n")
    leave.refresh_from_db()
    assert leave.recall_state == ""  # not before it is in force
    assert recall.scan(now=timezone.now() + dt.timedelta(days=31)).flagged == 1
    leave.refresh_from_db()
    assert leave.recall_state == "superseded" and leave.recall["claims"][0]["superseded_by"].endswith("leave-2027.md")


def test_an_answer_about_the_past_citing_what_was_already_superseded_is_not_recalled_for_it(tenant_a, tmp_path):
    """An answer about 2025 cites the 2025 policy, superseded since: that is no change, and recalls nothing. An edit of
    its sentence since still does."""
    from knowledge.search.retrieval import RetrieveFilters

    root = tmp_path / "kb"
    newer = "---\nsupersedes: leave.md\n---\n# Leave\n\n30 days of paid leave.\n"
    source = make_folder_source(tenant=tenant_a, root=root, files={"leave.md": LEAVE, "leave-2027.md": newer})
    hanna = make_member(tenant_a, username="hanna")
    said = "Employees had 27 days of paid leave [1]."
    record = answer_on(tenant_a, "leave.md", "How many days of leave were there?", said, user=hanna,
                       filters=RetrieveFilters(include_expired=True))  # fmt: skip
    assert record.grounds.get().settled is True
    assert recall.scan().flagged == 0  # superseded already when it was given
    claim = receipts.receipt(record, Viewer.everything(tenant_a))["claims"][0]
    assert claim["now"] == "unchanged" and claim["already"] == "superseded"  # the receipt says it, and flags nothing
    resync(source, root, "travel.md", TRAVEL)  # a change elsewhere brings a scan: still nothing to recall
    record.refresh_from_db()
    assert record.recall_state == ""
    resync(source, root, "leave.md", LEAVE.replace("27", "26"))  # its own sentence edited since: recalled
    record.refresh_from_db()
    assert record.recall_state == "changed"
