"""The feedback loop without a browser: verdicts from the chat page, the curation queue and its one-click fixes
(each through knowledge's real services, the real Qdrant Edge store), the evaluation set, its JSONL export and
`manage.py evaluate` (retrieval here; answers with the real model in test_feedback_browser.py and the API test)."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from chat.models import Verdict
from feedback import runner, services
from feedback.evaluation import evaluation_run
from feedback.models import EvalQuestion, EvalRun, Fix
from inference.embedders import get_embedder
from knowledge.models import Chunk, Document, IngestJob, Status
from knowledge.search.retrieval import retrieve
from tenants.models import Membership
from tenants.principals import Viewer
from tests.factories import CommittingClientMixin, make_answer, make_folder_source, make_member

HANDBOOK = {
    "warranty.md": "# Warranty\n\nEvery product carries a two year warranty. Claims need the original receipt.\n",
    "returns.md": "# Returns\n\nReturns are accepted within thirty days of purchase.\n",
    "old-warranty.md": "# Warranty (2019)\n\nProducts bought before 2020 carry a one year warranty.\n",
}
QUESTION = "How long is the warranty?"


@pytest.fixture
def acme(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=HANDBOOK)
    staff = make_member(tenant_a, role=Membership.Role.STAFF, username="sam")
    return {"tenant": tenant_a, "staff": staff, "answer": make_answer(tenant_a, question=QUESTION, user=staff)}


class CommittingClient(CommittingClientMixin, Client):
    pass


def _client(user) -> Client:  # type: ignore[no-untyped-def]
    client = CommittingClient()
    client.force_login(user)
    return client


def _document(key: str) -> Document:
    return Document.objects.get(tenant__slug="acme", document_key=key)


def _item(acme, **fields) -> Verdict:  # type: ignore[no-untyped-def]
    fields = {"helpful": False, "reason": "wrong_fact", "channel": "chat", "user": acme["staff"], **fields}
    return Verdict.objects.create(tenant=acme["tenant"], answer=acme["answer"], **fields)


def test_staff_judge_their_own_answers_in_the_chat_and_bad_verdicts_are_refused_with_the_reason(acme, tenant_b,
                                                                                                tmp_path):  # fmt: skip
    sam, answer = acme["staff"], acme["answer"]
    url = f"/t/acme/chat/answers/{answer.public_id}/verdict/"
    sue = make_member(acme["tenant"], role=Membership.Role.STAFF, username="sue")
    assert _client(sue).get(url).status_code == 404  # another staff member's answer
    form = _client(sam).get(url)
    assert form.status_code == 200 and b"Send to the admins" in form.content
    assert b"warranty.md" in form.content  # the retrieved documents are offered first
    theirs = make_folder_source(tenant=tenant_b, root=tmp_path / "theirs", files=HANDBOOK)
    other_document = Document.objects.filter(source=theirs).first()
    refused = {
        "reason": ({"helpful": "0", "reason": "it is bad"}, b"One of"),
        "claims": ({"helpful": "0", "claims": "3"}, b"no claims"),
        "document_id": ({"helpful": "0", "document_id": other_document.document_id}, b"No such document"),
    }
    for field, (data, message) in refused.items():
        response = _client(sam).post(url, data)
        assert response.status_code == 400 and message in response.content, field
    assert not Verdict.objects.exists()
    right = _document("warranty.md")
    given = _client(sam).post(url, {"helpful": "0", "reason": "wrong_citation", "correct_answer": "Two years.",
                                     "document_id": right.document_id})  # fmt: skip
    assert given.status_code == 200 and b"curation queue" in given.content
    verdict = Verdict.objects.get()
    assert (verdict.user, verdict.channel, verdict.document, verdict.correct_answer) == (sam, "chat", right,
                                                                                             "Two years.")  # fmt: skip
    assert b"You marked this answer wrong" in _client(sam).get(url).content  # said once, shown as said
    assert b"You marked this answer wrong" in _client(sam).post(url, {"helpful": "1"}).content
    assert Verdict.objects.count() == 1


def test_the_queue_shows_open_items_newest_first_filtered_and_only_to_this_tenants_admins(acme, tenant_b):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    old = _item(acme, reason="outdated")
    Verdict.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=1))
    new = _item(acme, reason="wrong_fact", channel="api", user=None)
    _item(acme, helpful=True, reason="")  # a thumbs-up is counted, never queued
    page = _client(admin).get("/t/acme/curation/").content.decode()
    assert page.index(str(new.public_id)) < page.index(str(old.public_id))
    assert "2 open · 0 closed · 1 marked right" in page
    only_outdated = _client(admin).get("/t/acme/curation/?reason=outdated").content.decode()
    assert str(old.public_id) in only_outdated and str(new.public_id) not in only_outdated
    only_api = _client(admin).get("/t/acme/curation/?channel=api").content.decode()
    assert str(new.public_id) in only_api and str(old.public_id) not in only_api
    source_id = acme["answer"].hits[0]["source_id"]
    assert str(new.public_id) in _client(admin).get(f"/t/acme/curation/?source={source_id}").content.decode()
    assert str(new.public_id) not in _client(admin).get("/t/acme/curation/?source=src:nope").content.decode()
    item = _client(admin).get(f"/t/acme/curation/{new.public_id}/")
    assert item.status_code == 200 and b"What was retrieved" in item.content and b"warranty.md" in item.content
    outsider = make_member(tenant_b, role=Membership.Role.ADMIN, username="gus")
    assert _client(outsider).get(f"/t/acme/curation/{new.public_id}/").status_code == 404
    assert _client(outsider).get(f"/t/globex/curation/{new.public_id}/").status_code == 404  # not via their tenant
    assert (
        _client(outsider)
        .post(f"/t/globex/curation/{new.public_id}/fix/", {"fix": "dismiss", "expected": "x"})
        .status_code
        == 404
    )
    assert not Fix.objects.exists()


def _fix(admin, item: Verdict, **data):  # type: ignore[no-untyped-def]
    return _client(admin).post(f"/t/acme/curation/{item.public_id}/fix/", data)


def test_marking_the_right_chunk_critical_closes_the_item_and_lifts_it_in_retrieval(acme):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    item = _item(acme, document=_document("old-warranty.md"), correct_answer="one year")
    chunk = Chunk.objects.get(document=_document("old-warranty.md"), status=Status.ACTIVE)
    page = _client(admin).get(f"/t/acme/curation/{item.public_id}/").content.decode()
    assert f"critical:{chunk.public_id}" in page  # the named document's best part, one click away
    candidates = page[page.index("the parts that best answer") : page.index("What was retrieved")]
    assert candidates.count('class="chunk candidate') == 1 and str(chunk.public_id) in candidates  # that one only
    response = _fix(admin, item, fix=f"critical:{chunk.public_id}", expected="one year")
    assert response.status_code == 302 and response["Location"] == "/t/acme/curation/"
    fix = Fix.objects.get(verdict=item)
    assert (fix.action, fix.by_name, fix.chunk) == ("critical", "ada", chunk)
    assert Chunk.objects.get(pk=chunk.pk).critical
    first = retrieve(viewer=Viewer.everything(acme["tenant"]), query=QUESTION, top_k=3)[0]
    assert first.chunk.document.display_key == "old-warranty.md" and first.boost > 0  # the vector payload too
    question = EvalQuestion.objects.get()
    assert (question.question, question.relevant_docs, question.answer, question.answerable) == (
        QUESTION, ["old-warranty.md"], "one year", True)  # fmt: skip
    assert _client(admin).get("/t/acme/curation/").content.decode().count("Nothing to curate") == 1


@pytest.mark.parametrize("action", ["retire", "tag", "upload", "not_in_knowledge", "dismiss"])
def test_every_fix_acts_records_who_did_it_closes_the_item_and_adds_its_question(acme, action):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    right, outdated = _document("warranty.md"), _document("old-warranty.md")
    item = _item(acme, document=right, reason="outdated")
    data: dict[str, object] = {"fix": action, "expected": "two year"}
    if action == "retire":
        data["fix"] = f"retire:{outdated.document_id}"
    if action == "tag":
        data.update(document_id=outdated.document_id, tag="Outdated")
    if action == "upload":
        data["upload"] = SimpleUploadedFile("warranty-2024.md", b"# Warranty\n\nSince 2024: a three year warranty.\n")
    response = _fix(admin, item, **data)
    assert response.status_code == 302, response.content.decode()[:500]
    fix = Fix.objects.get(verdict=item)
    assert fix.action == action and fix.by_name == "ada" and fix.by == admin
    question = EvalQuestion.objects.get(fix=fix)
    expected_docs = {
        "retire": ["warranty.md"], "tag": ["warranty.md"], "upload": ["warranty-2024.md"],
        "not_in_knowledge": [], "dismiss": ["warranty.md"],
    }[action]  # fmt: skip
    assert question.relevant_docs == expected_docs
    assert question.answerable == (action != "not_in_knowledge")
    assert question.answer == ("" if action == "not_in_knowledge" else "two year")
    if action == "retire":
        assert Document.objects.get(pk=outdated.pk).status == Status.RETIRED
        hits = retrieve(viewer=Viewer.everything(acme["tenant"]), query=QUESTION)
        assert "old-warranty.md" not in {h.chunk.document.display_key for h in hits}
    if action == "tag":
        assert list(outdated.tags.values_list("name", flat=True)) == ["outdated"]
    if action == "upload":
        job = IngestJob.objects.filter(kind="upload").get()
        assert job.state == "succeeded" and _document("warranty-2024.md").status == Status.ACTIVE


def test_a_refused_fix_says_why_and_changes_nothing(acme, tenant_b, tmp_path):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    item = _item(acme)
    chunk = Chunk.objects.filter(document=_document("warranty.md")).first()
    theirs = make_folder_source(tenant=tenant_b, root=tmp_path / "theirs", files={"secret.md": "# Secret\n\nVault.\n"})
    their_chunk = Chunk.objects.get(document__source=theirs)
    their_document = Document.objects.get(source=theirs)
    refusals = [
        ({"fix": f"critical:{chunk.public_id}"}, "Type the phrase"),
        ({"fix": f"critical:{their_chunk.public_id}", "expected": "x"}, "no longer in the knowledge base"),
        ({"fix": f"retire:{their_document.document_id}", "expected": "x"}, "Choose a document"),
        ({"fix": "tag", "document_id": _document("warranty.md").document_id, "expected": "x"}, "Type the tag"),
        ({"fix": "upload", "expected": "x"}, "Choose the file"),
        ({"fix": "explode", "expected": "x"}, "Choose one of the fixes"),
        ({"fix": "upload", "expected": "x", "upload": SimpleUploadedFile("x.bin", b"\x00\x01\x02" * 100)},
         "not accepted"),
    ]  # fmt: skip
    for data, message in refusals:
        response = _fix(admin, item, **data)
        assert response.status_code == 400 and message in response.content.decode(), (data, message)
    assert not Fix.objects.exists() and not EvalQuestion.objects.exists()
    assert not Chunk.objects.filter(critical=True).exists()
    assert Document.objects.get(pk=their_document.pk).status == Status.ACTIVE
    assert _fix(admin, item, fix="dismiss", expected="two year").status_code == 302
    again = _fix(admin, item, fix="not_in_knowledge")
    assert again.status_code == 400 and "closed already" in again.content.decode()
    assert Fix.objects.count() == 1


def test_the_evaluation_set_exports_as_public_jsonl_and_evaluate_scores_it_and_keeps_each_run(acme, tenant_b):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    with pytest.raises(CommandError, match="no evaluation questions"):
        call_command("evaluate", "acme", "--retrieval-only")
    chunk = Chunk.objects.get(document=_document("warranty.md"), status=Status.ACTIVE)
    services.item_fix(tenant=acme["tenant"], verdict=_item(acme), user=admin,
                      wanted=services.FixRequest(action="critical", chunk_id=str(chunk.public_id),
                                                 expected="two year"))  # fmt: skip
    EvalQuestion.objects.create(tenant=tenant_b, question="Where is the Falcon launch code?", answer="Oslo")
    exported = _client(admin).get("/t/acme/evaluation/export.jsonl")
    assert "Falcon" not in exported.content.decode() and len(exported.content.decode().splitlines()) == 1
    assert exported["Content-Type"] == "application/jsonl"
    row = json.loads(exported.content.decode().splitlines()[0])
    public = {"id", "corpus", "lang", "kind", "question", "relevant_docs", "answer", "evidence", "answerable"}
    assert public <= set(row) and row["relevant_docs"] == ["warranty.md"] and row["answer"] == "two year"
    assert row["corpus"] == "acme" and row["answerable"] is True
    out = io.StringIO()
    call_command("evaluate", "acme", "--retrieval-only", stdout=out)
    run = EvalRun.objects.get()
    assert run.state == "done" and run.trigger == "command" and run.metrics["recall@5"] == 1.0
    assert run.metrics["questions"] == 1 and run.tenant == acme["tenant"]  # another tenant's set is not read
    assert run.metrics["n_recall@5"] == 1 and run.metrics["answered_wrong"] is None  # no answers asked
    assert "1.000 (n=1)" in out.getvalue()
    # A curation later, then a run from the page (the background task runs inline in tests): the plot marks it.
    services.item_fix(tenant=acme["tenant"], verdict=_item(acme, reason="should_refuse"), user=admin,
                      wanted=services.FixRequest(action="not_in_knowledge"))  # fmt: skip
    started = _client(admin).post("/t/acme/evaluation/run/", {"answers": "0"})
    assert started.status_code == 302 and EvalRun.objects.filter(state="queued").count() == 1
    assert "in progress" in _client(admin).get("/t/acme/evaluation/").content.decode()
    assert runner.run_queued() == 1  # what the web server's runner thread does within seconds
    assert EvalRun.objects.filter(state="done").count() == 2
    page = _client(admin).get("/t/acme/evaluation/").content.decode()
    assert 'id="evaluation-plot"' in page and "1 curation" in page  # what changed between the two runs
    assert "unanswerable: a refusal" in page and "Marked the right chunk critical by ada" in page


def test_a_run_whose_runner_died_shows_as_failed_not_running_for_ever(acme):
    run = EvalRun.objects.create(tenant=acme["tenant"], state="running", heartbeat_at=timezone.now())
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    assert "in progress" in _client(admin).get("/t/acme/evaluation/").content.decode()  # alive: still running
    EvalRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=20))
    page = _client(admin).get("/t/acme/evaluation/").content.decode()
    assert "stopped before the run finished" in page
    assert EvalRun.objects.get(pk=run.pk).state == "failed"
    empty = _client(admin).post("/t/acme/evaluation/run/", follow=True).content.decode()
    assert "The evaluation set is empty" in empty and EvalRun.objects.count() == 1


@pytest.mark.embedded_store
def test_a_process_that_cannot_search_leaves_the_run_queued_for_the_store_owner(acme, settings):
    """The CLI or a worker while the web server owns the embedded store: the run goes back to the queue, whole,
    and the owner's runner runs it."""
    from knowledge.index.vectorstore import EdgeStore, reset_store

    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    services.item_fix(tenant=acme["tenant"], verdict=_item(acme, document=_document("warranty.md")), user=admin,
                      wanted=services.FixRequest(action="tag", tag="checked", expected="two year",
                                                 document_id=_document("warranty.md").document_id))  # fmt: skip
    reset_store()  # this process lets go of the store; "the web server" takes it
    owner = EdgeStore(settings.RAG_QDRANT_PATH)
    owner.ensure_collection(get_embedder().identity)
    run = EvalRun.objects.create(tenant=acme["tenant"], answers=False, state="running")
    assert evaluation_run(run).state == "queued" and EvalRun.objects.get(pk=run.pk).results == []
    owner.close()  # the owner's runner is this process again
    assert runner.run_queued() == 1
    run.refresh_from_db()
    assert run.state == "done" and run.metrics["recall@5"] == 1.0 and not run.metrics["errors"]


def _misread_answer(acme):  # type: ignore[no-untyped-def]
    """The answer cited warranty.md's chunk and stated what it does not say (five years, not two)."""
    record = acme["answer"]
    hit = next(h for h in record.hits if h.get("document_key") == "warranty.md")
    record.claims = [{"text": "Every product carries a five year warranty.", "citations": [1], "supported": True,
                      "quotes": [], "relevant": True, "problem": ""}]  # fmt: skip
    record.citations = [{"n": 1, "chunk_id": hit["chunk_id"], "document_key": "warranty.md"}]
    record.status = "answered"
    record.save()
    return hit


def test_a_fix_whose_effect_already_holds_is_not_offered_and_is_refused_if_sent(acme):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    chunk = Chunk.objects.get(document=_document("old-warranty.md"), status=Status.ACTIVE)
    Chunk.objects.filter(pk=chunk.pk).update(critical=True)
    item = _item(acme, document=_document("old-warranty.md"))
    page = _client(admin).get(f"/t/acme/curation/{item.public_id}/").content.decode()
    assert f'value="critical:{chunk.public_id}"' not in page and "critical already" in page
    refused = _fix(admin, item, fix=f"critical:{chunk.public_id}", expected="one year")
    assert refused.status_code == 400 and "critical already" in refused.content.decode()
    outdated = _document("old-warranty.md")
    outdated.tags.add(outdated.tags.model.objects.get_or_create(tenant=acme["tenant"], name="outdated")[0])
    tagged = _fix(admin, item, fix="tag", document_id=outdated.document_id, tag="Outdated", expected="one year")
    assert tagged.status_code == 400 and "has the tag" in tagged.content.decode()
    assert not Fix.objects.exists() and not EvalQuestion.objects.exists()  # the item is still open


def test_the_answer_misread_a_correct_excerpt_becomes_a_question_and_a_verifier_case_that_runs_score(acme):
    from feedback.models import VerifierCase

    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    hit = _misread_answer(acme)
    item = _item(acme, document=_document("warranty.md"), claims=[0])
    page = _client(admin).get(f"/t/acme/curation/{item.public_id}/").content.decode()
    assert 'value="misread"' in page
    assert _fix(admin, item, fix="misread", expected="two year").status_code == 302
    fix = Fix.objects.get(verdict=item)
    assert fix.action == "misread"
    question = EvalQuestion.objects.get(fix=fix)
    assert (question.answer, question.relevant_docs) == ("two year", ["warranty.md"])
    case = VerifierCase.objects.get(fix=fix)
    assert case.claim == "Every product carries a five year warranty." and "two year warranty" in case.excerpt
    assert (case.document_key, case.chunk_id, case.question) == ("warranty.md", hit["chunk_id"], QUESTION)
    run = evaluation_run(EvalRun.objects.create(tenant=acme["tenant"], answers=False))
    assert run.metrics["verifier_cases"] == 1 and run.metrics["verifier_caught"] == 1.0  # the checks refuse it now


def test_misread_is_not_offered_for_an_answer_that_cites_nothing(acme):
    admin = make_member(acme["tenant"], role=Membership.Role.ADMIN, username="ada")
    item = _item(acme)
    assert 'value="misread"' not in _client(admin).get(f"/t/acme/curation/{item.public_id}/").content.decode()
    refused = _fix(admin, item, fix="misread", expected="two year")
    assert refused.status_code == 400 and "cites no excerpt" in refused.content.decode()


def test_an_answer_that_used_the_wrong_version_becomes_a_dated_question_with_the_value_marked(tenant_a, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from time_corpus import TRAVEL_2025, TRAVEL_2026

    from chat import excerpts

    make_folder_source(tenant=tenant_a, root=tmp_path / "policies",
                       files={"travel-2025.md": TRAVEL_2025, "travel-2026.md": TRAVEL_2026})  # fmt: skip
    staff = make_member(tenant_a, role=Membership.Role.STAFF, username="sam")
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    question = "What was the per diem for business travel?"
    item = Verdict.objects.create(
        tenant=tenant_a, answer=make_answer(tenant_a, question=question, user=staff), helpful=False,
        reason="outdated", channel="chat", user=staff,
        correct_answer="It should have said 42 EUR a day, as the 2025 policy did.",
    )  # fmt: skip
    page = _client(admin).get(f"/t/acme/curation/{item.public_id}/").content.decode()
    assert 'value="42 EUR"' in page  # the value the staff member gave, not their sentence
    assert 'value="wrong_version"' in page and 'name="in_force_at"' in page
    future = (timezone.localdate() + timedelta(days=3)).isoformat()
    for day in ("", "not a day", future):  # refused with the reason; the item stays open
        refused = _fix(admin, item, fix="wrong_version", in_force_at=day, expected="42 EUR")
        assert refused.status_code == 400 and "Give the day" in refused.content.decode()
    assert not Fix.objects.filter(verdict=item).exists()
    assert _fix(admin, item, fix="wrong_version", in_force_at="2025-06-01", expected="42 EUR").status_code == 302
    fix = Fix.objects.get(verdict=item)
    assert (fix.action, fix.detail) == ("wrong_version", "in force at 2025-06-01")
    dated = EvalQuestion.objects.get(fix=fix)
    assert dated.question == f"{question} (as of 2025-06-01)" and str(dated.as_of) == "2025-06-01"
    assert (dated.relevant_docs, dated.answer) == (["travel-2025.md"], "42 EUR")  # in force that day
    row = json.loads(services.eval_set_jsonl(tenant=tenant_a).splitlines()[0])
    assert row["as_of"] == "2025-06-01" and row["question"] == dated.question
    # The dated question reads as a time by the answer pipeline: what was in force then comes first.
    sources = excerpts.prepare(viewer=Viewer.everything(tenant_a), question=dated.question,
                                    options=excerpts.AnswerSettings(top_k=4))  # fmt: skip
    assert sources.when is not None and sources.excerpts[0].chunk.document.document_key == "travel-2025.md"


def test_the_expected_phrase_defaults_to_the_value_a_staff_member_gave():
    said = "It should have said 42 EUR a day, as the 2025 policy did."
    assert services.expected_phrase(said, "Per diem?") == "42 EUR"
    assert services.expected_phrase("two years", "How long is the warranty?") == "two years"
    assert services.expected_phrase("In 2025 the limit was `max_items = 40` per order", "What was it in 2025?") == (
        "max_items = 40")  # fmt: skip
    assert services.expected_phrase("The answer should mention the approval of the team lead", "Who?") == (
        "The answer should mention the approval of the team lead"
    )  # no value in it: the whole sentence


def test_an_evaluation_runs_lifecycle_is_claimed_once_and_never_left_running(acme, tenant_b):
    from feedback import runs

    run = runs.queue(tenant=acme["tenant"], answers=False, started_by="ada")
    assert run.state == "queued" and runs.claim(run) and not runs.claim(run)  # one runner takes it
    run.refresh_from_db()
    assert run.state == "running" and run.heartbeat_at is not None
    runs.requeue(run)  # this process could not search: back to the queue, for the store's owner
    assert EvalRun.objects.get(pk=run.pk).state == "queued"
    runs.start(run)
    runs.done(run, results=[], context={}, metrics={"recall@5": 1.0})
    run.refresh_from_db()
    assert run.state == "done" and run.finished_at is not None and run.metrics == {"recall@5": 1.0}
    # A running run whose runner fell silent is failed by the runner's pass, in every tenant, with the reason.
    stale = [runs.queue(tenant=t, answers=False, running=True) for t in (acme["tenant"], tenant_b)]
    EvalRun.objects.filter(pk__in=[r.pk for r in stale]).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    fresh = runs.queue(tenant=acme["tenant"], answers=False, running=True)
    assert runs.fail_silent() == 2
    assert {r.state for r in EvalRun.objects.filter(pk__in=[r.pk for r in stale])} == {"failed"}
    assert EvalRun.objects.get(pk=fresh.pk).state == "running"
    assert "stopped before the run finished" in EvalRun.objects.get(pk=stale[0].pk).error


def test_a_wrong_computation_shows_its_query_and_rows_and_its_fixes_add_the_expected_value(tenant_a, tmp_path):
    """Issue 62: the curation queue shows what a computed answer ran (the table, the query, the result, the rows it
    stood on) and offers the fixes that fit a computation, each adding an evaluation question with the value."""
    from chat import computing
    from chat.models import AnswerRecord
    from chat.records import answer_record
    from chat.services import Answer
    from knowledge.compute import engine, rows_used, run
    from knowledge.models import DocumentTable

    orders = "Order,Customer,Status\nA-1,Acme,Pending\nA-2,Acme,Shipped\nA-3,Globex,Pending\n"
    make_folder_source(tenant=tenant_a, root=tmp_path / "sheets", files={"orders.csv": orders})
    staff = make_member(tenant_a, role=Membership.Role.STAFF, username="sam")
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    question = "How many pending orders does Acme have?"
    viewer = Viewer.everything(tenant_a)
    hits = retrieve(viewer=viewer, query=question, top_k=3)
    table = DocumentTable.objects.get(document__document_key="orders.csv")
    sql = "SELECT COUNT(*) AS orders FROM data WHERE customer = 'Acme'"  # the status filter left out
    with engine(table) as connection:
        result = run(connection, sql)
        used = rows_used(connection, sql, result)
    citation = computing.table_citation(computing.Choice(table, hits[0], 3.0), sql, result, used)
    said = Answer(answer="Acme has 2 pending orders [1].", generated=True, model="test.gguf", status="answered",
                  citations=[citation], hits=hits)  # fmt: skip
    record = answer_record(viewer=viewer, question=question, result=said, channel="chat", user=staff)
    assert isinstance(record, AnswerRecord)
    item = Verdict.objects.create(tenant=tenant_a, answer=record, helpful=False, reason="wrong_fact", channel="chat",
                                  user=staff, correct_answer="1")  # fmt: skip
    page = _client(admin).get(f"/t/acme/curation/{item.public_id}/").content.decode()
    assert "customer = &#x27;Acme&#x27;" in page and 'id="computed-result"' in page
    for action in ("wrong_filter", "wrong_table", "wrong_direction"):
        assert f'value="{action}"' in page
    assert _fix(admin, item, fix="wrong_filter", expected="").status_code == 400  # the value is asked for
    assert _fix(admin, item, fix="wrong_filter", expected="1").status_code == 302
    fix = Fix.objects.get(verdict=item)
    assert fix.action == "wrong_filter" and sql in fix.detail
    added = EvalQuestion.objects.get(fix=fix)
    assert (added.question, added.answer, added.relevant_docs) == (question, "1", ["orders.csv"])
    # an answer that was not computed is not offered them, and refuses them
    plain = _item({"tenant": tenant_a, "staff": staff, "answer": make_answer(tenant_a, question=question)})
    assert 'value="wrong_table"' not in _client(admin).get(f"/t/acme/curation/{plain.public_id}/").content.decode()
    refused = _fix(admin, plain, fix="wrong_table", expected="1")
    assert refused.status_code == 400 and "not computed" in refused.content.decode()
