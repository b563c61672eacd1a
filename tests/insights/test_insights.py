"""The insights (insights/usage.py, the page) over real answer records of a real folder source, and the content gaps
(insights/gaps.py) made by the real packaged embedder from refused questions: planted topics become gaps, a new
question joins its gap, each gap goes to the owner of the nearest document, its draft is made of sentences that
exist; the owner's text becomes a document and evaluation questions, and an evaluation run that answers them closes
the gap."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client, TestCase
from django.utils import timezone

from chat.models import AnswerRecord
from chat.records import answer_record
from chat.services import Answer
from feedback.models import EvalQuestion, EvalRun
from insights import gaps, owners, usage
from insights.models import Gap
from knowledge import selectors
from knowledge.models import Document, IngestJob
from knowledge.search.retrieval import retrieve
from tenants.models import Membership
from tenants.principals import Viewer, viewer_for
from tenants.services import group_create, group_member_add
from tests.factories import make_folder_source, make_member

FILES = {
    "travel.md": "# Travel\n\nThe per diem for travel is 42 EUR a day. Trains are booked through the travel portal.\n",
    "leave.md": "# Leave\n\nEvery employee has 27 days of paid leave a year. Leave is asked for in the HR portal.\n",
    "old-policy.md": "---\nreview_by: 2025-12-31\n---\n# Old policy\n\nThe office opens at 8.\n",
}
PARKING = ["Where can I park my car at the office?", "Is there parking for employees?",
           "Do we have a car park at headquarters?", "Can staff park in the office garage?",
           "Where do employees leave their cars?"]  # fmt: skip
DENTAL = ["Does our health insurance cover the dentist?", "Is dental care included in the insurance?",
          "Are dental treatments covered by the company insurance?", "Who pays for a dentist visit?"]  # fmt: skip
ALONE = ["What is the wifi password in the lobby?", "When is the summer party?"]


def ask(tenant, question: str, *, status: str = "not_found", who: Any = None, channel: str = "chat",
        cite: str | None = None, ms: float = 900.0, viewer: Viewer | None = None) -> AnswerRecord:  # fmt: skip
    """An answer as the answer flow records it, on a real retrieval (the model's words are the only stand-in)."""
    hits = retrieve(viewer=Viewer.everything(tenant), query=question, top_k=5)
    citations = []
    if cite:
        from chat.citations import citation_of

        hit = next(h for h in hits if h.chunk.document.document_key == cite)
        citations = [citation_of(1, hit)]
    result = Answer(answer="…", generated=True, model="test", status=status, citations=citations, hits=hits,
                    total_ms=ms)  # fmt: skip
    return answer_record(viewer=viewer or Viewer.everything(tenant), question=question, result=result,
                         channel=channel, user=who)  # fmt: skip


def test_the_figures_count_doors_outcomes_latency_citations_and_stale_documents_and_filter_by_group(
    tenant_a, admin_a, tmp_path
):
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=FILES)
    hr = group_create(tenant=tenant_a, name="hr")
    hanna = make_member(tenant_a, username="hanna")
    group_member_add(tenant=tenant_a, actor=None, group=hr, user=hanna)
    as_hanna = viewer_for(tenant=tenant_a, membership=Membership.objects.get(user=hanna))
    ask(tenant_a, "What is the per diem?", status="answered", cite="travel.md", ms=500, who=hanna, viewer=as_hanna)
    ask(tenant_a, "How many days of leave?", status="answered", cite="leave.md", ms=700, channel="api")
    ask(tenant_a, "When does the office open?", status="answered", cite="old-policy.md", ms=1500, channel="mcp")
    ask(tenant_a, "Where can I park?", ms=300)
    AnswerRecord.objects.filter(question="Where can I park?").update(asked={"assistant": None})  # as a door keeps it
    old = ask(tenant_a, "Per diem again?", status="partial", cite="travel.md", ms=100)
    AnswerRecord.objects.filter(pk=old.pk).update(created_at=timezone.now() - dt.timedelta(days=40))

    shown = usage.figures(tenant_a, usage.date_range())
    today = timezone.localdate()
    assert shown.total == 4 and shown.by_day == {today: {"chat": 2, "api": 1, "mcp": 1}}
    assert shown.outcomes == {"answered": 3, "computed": 0, "partial": 0, "refused": 1}
    assert (shown.p50_ms, shown.p95_ms, shown.timed) == (500, 700, 4)  # 300, 500, 700, 1500: nearest-rank
    assert {row["document"].document_key for row in shown.cited} == {"travel.md", "leave.md", "old-policy.md"}
    assert [(row["document"].document_key, row["why"]) for row in shown.stale_cited] == [
        ("old-policy.md", ["review_overdue"])
    ]
    assert shown.never_cited == 0 and shown.by_group == [("hr", 1)] and shown.by_assistant == [("", 4)]
    assert usage.figures(tenant_a, usage.date_range(), "hr").total == 1
    wide = usage.figures(tenant_a, usage.date_range((today - dt.timedelta(days=60)).isoformat()))
    assert wide.total == 5 and wide.outcomes["partial"] == 1

    client = Client()
    client.force_login(admin_a)
    page = client.get("/t/acme/insights/")
    assert page.status_code == 200 and page.content.count(b"<rect") == 3 + 2  # today's three doors; two outcomes
    assert f"<title>{today}: 2 chat</title>".encode() in page.content and b"refused: 1 (25%)" in page.content
    assert b"old-policy.md" in page.content and b"Where can I park?" not in page.content  # no gap yet: no question
    by_group = client.get("/t/acme/insights/?by=group").content.decode()
    assert f"<title>{today}: 1 hr</title>" in by_group and "Questions per day, by group" in by_group
    by_assistant = client.get("/t/acme/insights/?by=assistant").content.decode()
    assert f"<title>{today}: 4 </title>" in by_assistant and "the default" in by_assistant  # no assistant named
    for bad in ("?start=2026-13-01", "?start=2026-02-01&end=2026-01-01", "?start=2020-01-01&end=2026-01-01",
                "?group=nobody", "?by=colour"):  # fmt: skip
        response = client.get("/t/acme/insights/" + bad)
        assert response.status_code == 400 and b'id="insights-problem"' in response.content, bad
    operator = get_user_model().objects.create_superuser("root", password="pw-for-tests-123")
    client.force_login(operator)
    across = client.get("/operator/insights/")
    assert across.status_code == 200 and b'data-tenant="acme"' in across.content
    assert b"per diem" not in across.content and b"park" not in across.content  # figures only


def test_refused_questions_become_gaps_by_meaning_each_sent_to_the_owner_of_the_nearest_document(tenant_a, tmp_path):
    owner = make_member(tenant_a, username="olga")
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={
        **FILES, "facilities.md": "# Facilities\n\nVisitors park in the street. Employees cycle: the office has a "
                                  "bicycle room in the basement.\n"})  # fmt: skip
    source.owner = owner
    source.save()
    for question in PARKING + DENTAL + ALONE:
        ask(tenant_a, question)
    ask(tenant_a, "What is the per diem?", status="answered", cite="travel.md")  # answered: no gap
    done = gaps.refresh(tenant_a)
    assert done.questions == len(PARKING + DENTAL + ALONE) and done.gaps_made == 2
    found = {frozenset(q.question for q in gap.questions.all()): gap for gap in Gap.objects.all()}
    assert set(found) == {frozenset(PARKING), frozenset(DENTAL)}
    parking = found[frozenset(PARKING)]
    assert parking.asked == 5 and parking.representative in PARKING and parking.doors == {"chat": 5}
    assert parking.draft["sentences"][0]["document_key"] == "facilities.md" and parking.owner == owner  # its source's
    dental = found[frozenset(DENTAL)]
    assert dental.draft["none"] is True and dental.owner is None  # nothing here bears on it: the admins

    ask(tenant_a, "Is there a parking garage for the staff?")
    ask(tenant_a, "¿Dónde pueden aparcar los empleados?")  # the same gap, asked in Spanish
    again = gaps.refresh(tenant_a)
    assert again.joined == 2 and again.gaps_made == 0
    parking.refresh_from_db()
    assert parking.asked == 7 and Gap.objects.count() == 2

    # The tenant's retention deletes old answers: their questions leave the gaps, and a gap left empty goes.
    AnswerRecord.objects.filter(question__in=DENTAL).delete()
    AnswerRecord.objects.filter(question__in=PARKING[:2]).delete()
    gaps.refresh(tenant_a)
    parking.refresh_from_db()
    assert parking.asked == 5 and list(Gap.objects.all()) == [parking]


def test_an_owner_writes_the_missing_text_its_questions_join_the_evaluation_set_and_a_run_closes_the_gap(
    tenant_a, admin_a, tmp_path
):
    owner = make_member(tenant_a, username="olga")
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=FILES)
    for question in PARKING[:3]:
        ask(tenant_a, question)
    gaps.refresh(tenant_a)
    gap = Gap.objects.get()
    assert gap.draft.get("none") is True  # nothing here is about parking: "no source says this"
    gap.owner = owner
    gap.save()

    client = Client()
    client.force_login(owner)
    mine = client.get("/t/acme/gaps/")
    assert mine.status_code == 200 and gap.representative.encode() in mine.content
    page = client.get(f"/t/acme/gaps/{gap.public_id}/").content.decode()
    assert "No source says this." in page and PARKING[1] not in page.replace(gap.representative, "")  # no list
    refused = client.post(f"/t/acme/gaps/{gap.public_id}/", {"text": "Staff park in garage B.", "expected": "level 2"})
    assert refused.status_code == 400 and "must be in the text" in refused.content.decode()
    with TestCase.captureOnCommitCallbacks(execute=True):
        done = client.post(
            f"/t/acme/gaps/{gap.public_id}/",
            {"text": "Employees park in garage B, level 2, with their badge.", "expected": "garage B"},
        )
    assert done.status_code == 302
    gap.refresh_from_db()
    assert gap.state == "written" and gap.written_by == "olga"
    assert Document.objects.filter(document_key__startswith="gap-answer-").count() == 1
    assert IngestJob.objects.filter(source__is_default=True, state="succeeded").exists()  # ingested like an upload
    asked = EvalQuestion.objects.filter(answer="garage B")
    assert set(asked.values_list("question", flat=True)) == set(PARKING[:3])
    assert {tuple(q.relevant_docs) for q in asked} == {
        (Document.objects.get(document_key__startswith="gap-answer-").document_key,)
    }

    rows = [{"uuid": str(q.public_id), "ans_phrase": 1.0, "refused": False} for q in asked]
    EvalRun.objects.create(tenant=tenant_a, state="done", answers=True, results=rows[:2])  # one not answered yet
    gap.refresh_from_db()
    assert gap.state == "written"
    EvalRun.objects.create(tenant=tenant_a, state="done", answers=True, results=rows)
    gap.refresh_from_db()
    assert gap.state == "closed" and gap.closed_at is not None

    # An admin gives one document an owner of its own (its gaps go to them, not to its source's owner).
    admin = Client()
    admin.force_login(admin_a)
    travel = Document.objects.get(document_key="travel.md")
    admin.post("/t/acme/insights/owners/", {"document": str(travel.public_id), "owner": "olga"})
    travel.refresh_from_db()
    assert travel.owner == owner and "travel.md" in admin.get("/t/acme/insights/owners/").content.decode()
    assert admin.post("/t/acme/insights/owners/", {"document": str(travel.public_id), "owner": "nobody"},
                      follow=True).content.decode().count("Choose a source or a document")  # fmt: skip

    other = make_member(tenant_a, username="sam")
    client.force_login(other)
    assert client.get(f"/t/acme/gaps/{gap.public_id}/").status_code == 404  # not theirs
    assert b"garage" not in client.get("/t/acme/gaps/?state=closed").content


def test_a_gap_never_carries_a_restricted_documents_text_to_its_owner_or_its_draft(tenant_a, tmp_path):
    """The asker (here an admin) saw a board-only note; the gap goes to an owner who may not read it, and its draft
    becomes a document open to all: neither shows a sentence of it (decided by the one resolver, for `tenant`)."""
    from knowledge import services as knowledge

    secret = "Board members park in the reserved bay C7 behind the building."
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=FILES)
    board = make_folder_source(tenant=tenant_a, root=tmp_path / "board", files={"board.md": f"# Board\n\n{secret}\n"})
    group_create(tenant=tenant_a, name="board")
    with TestCase.captureOnCommitCallbacks(execute=True):
        knowledge.source_set_access(tenant=tenant_a, source=board, access=["group:board"])
    for question in PARKING[:3]:
        record = ask(tenant_a, question)
        assert any("board.md" in str(hit.get("document_key")) for hit in record.hits)  # the asker saw it
    gaps.refresh(tenant_a)
    gap = Gap.objects.get()
    assert "C7" not in str(gap.draft) and "C7" not in str(gap.nearest) and gap.owner is None
    to = owners.destinations(gap)  # nor what the owner is offered to edit
    assert (to.document is None or to.document.document_key != "board.md") and "C7" not in to.current
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    client = Client()
    client.force_login(admin)
    assert "C7" not in client.get(f"/t/acme/gaps/{gap.public_id}/").content.decode()


FACILITIES = ("# Facilities\n\nVisitors park in the street. Employees cycle: the office has a bicycle room in the "
              "basement.\n")  # fmt: skip


def test_an_owner_edits_the_nearest_document_here_or_says_it_was_edited_where_it_lives(tenant_a, tmp_path, settings):
    """Where ragsite holds the nearest document's text (a text file uploaded), the owner edits it and it becomes the
    next version; where it lives elsewhere (a folder), the owner edits it there and says so: a sync is queued. Either
    way the gap's questions join the evaluation set with that document as the one to cite."""
    from knowledge import services as knowledge

    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]  # where the admin may point a folder source
    olga = make_member(tenant_a, username="olga")
    with TestCase.captureOnCommitCallbacks(execute=True):
        knowledge.upload_enqueue(tenant=tenant_a, source=None, uploads=[("facilities.md", FACILITIES.encode())])
    facilities = Document.objects.get(document_key="facilities.md")
    facilities.owner = olga
    facilities.save()
    for question in PARKING[:3]:
        ask(tenant_a, question)
    gaps.refresh(tenant_a)
    gap = Gap.objects.get()
    assert gap.owner == olga and gap.draft["sentences"][0]["document_key"] == "facilities.md"

    board = knowledge.source_create(tenant=tenant_a, kind="upload", name="board-minutes")
    with TestCase.captureOnCommitCallbacks(execute=True):
        knowledge.source_set_access(tenant=tenant_a, source=board, access=["user:olga"])
    client = Client()
    client.force_login(olga)
    page = client.get(f"/t/acme/gaps/{gap.public_id}/").content.decode()
    assert "Or as an edit of facilities.md" in page and "bicycle room in the basement" in page  # its text, to edit
    assert "board-minutes" not in page  # a source not all may read is not offered: the answer is for all who asked
    restricted = {"where": "new", "text": "Garage B.", "expected": "Garage B", "source": str(board.public_id)}
    assert client.post(f"/t/acme/gaps/{gap.public_id}/", restricted).status_code == 400
    current = owners.destinations(gap).current
    assert current.startswith("# Facilities") and "bicycle room" in current
    url = f"/t/acme/gaps/{gap.public_id}/"
    unchanged = client.post(url, {"where": "edit", "text": current, "expected": "street", "version": "1"})
    assert unchanged.status_code == 400 and "Nothing was changed" in unchanged.content.decode()
    edited = current + "\nEmployees park in garage B, level 2, with their badge.\n"
    stale = client.post(url, {"where": "edit", "text": edited, "expected": "garage B", "version": "0"})
    assert stale.status_code == 400 and "changed while you edited" in stale.content.decode()  # nothing overwritten
    with TestCase.captureOnCommitCallbacks(execute=True):
        done = client.post(url, {"where": "edit", "text": edited, "expected": "garage B", "version": "1"})
    assert done.status_code == 302
    again = client.post(url, {"where": "new", "text": "Garage B.", "expected": "Garage B"})
    assert again.status_code == 400 and "already written" in again.content.decode()  # no second document
    facilities.refresh_from_db()
    assert facilities.version == 2 and facilities.owner == olga  # the same document, its next version
    text = selectors.version_text(viewer=Viewer.everything(tenant_a), version=facilities.versions.get(version=2))
    assert "garage B" in text and "bicycle room" in text
    gap.refresh_from_db()
    assert gap.state == "written" and gap.document == facilities
    asked = EvalQuestion.objects.filter(answer="garage B")
    assert asked.count() == 3 and {tuple(q.relevant_docs) for q in asked} == {("facilities.md",)}
    assert gap.checked == {"after": 1}  # its text is in the versions after the one it was written on
    hits = retrieve(viewer=Viewer.everything(tenant_a), query=PARKING[0], top_k=3)
    assert "garage B" in hits[0].chunk.text  # the next question finds it

    # The same gap in another workspace whose facilities note is a file of a server folder: not written here.
    Gap.objects.all().delete()
    AnswerRecord.objects.all().delete()
    EvalQuestion.objects.all().delete()
    knowledge.documents_retire(tenant=tenant_a, documents=Document.objects.filter(pk=facilities.pk))
    folder = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"facilities.md": FACILITIES})
    folder.owner = olga
    folder.save()
    for question in PARKING[:3]:
        ask(tenant_a, question)
    gaps.refresh(tenant_a)
    gap = Gap.objects.get()
    page = client.get(f"/t/acme/gaps/{gap.public_id}/").content.decode()
    assert "Or edit facilities.md where it lives" in page and "Or as an edit of" not in page
    here = client.post(f"/t/acme/gaps/{gap.public_id}/", {"where": "edit", "text": edited, "expected": "garage B",
                                                          "version": "1"})  # fmt: skip
    assert here.status_code == 400 and "is not kept here" in here.content.decode()
    wrong_source = {"where": "new", "text": "Garage B.", "expected": "Garage B", "source": str(folder.public_id)}
    foreign = client.post(f"/t/acme/gaps/{gap.public_id}/", wrong_source)
    assert foreign.status_code == 400 and "Choose a source of uploaded files" in foreign.content.decode()
    (tmp_path / "kb" / "facilities.md").write_text(FACILITIES + "\nEmployees park in garage B.\n")  # edited there
    with TestCase.captureOnCommitCallbacks(execute=True):
        said = client.post(f"/t/acme/gaps/{gap.public_id}/", {"where": "there", "text": "", "expected": "garage B"})
    assert said.status_code == 302
    gap.refresh_from_db()
    assert gap.state == "written" and gap.document.source == folder
    assert IngestJob.objects.filter(source=folder, params__trigger="gap", state="succeeded").exists()
    assert Document.objects.get(source=folder, document_key="facilities.md").version == 2  # the sync brought it in
    assert {tuple(q.relevant_docs) for q in EvalQuestion.objects.filter(answer="garage B")} == {("facilities.md",)}


def test_a_written_gap_is_asked_again_once_its_text_is_indexed_and_closes_when_answered(tenant_a, tmp_path,
                                                                                        chat_model):  # fmt: skip
    """No evaluation run needed: the worker's gap task asks a written gap's questions again (the real packaged model)
    as soon as a version of its document is served, once per version, and closes it when all are answered with the
    phrase."""
    from insights.tasks import gaps_task

    olga = make_member(tenant_a, username="olga")
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=FILES)
    for question in (PARKING[0], PARKING[4]):
        ask(tenant_a, question)
    gaps.refresh(tenant_a)
    gap = Gap.objects.get()
    assert owners.check_written(tenant_a) == 0  # nothing written yet
    gap.owner = olga  # an admin gave it to her
    gap.save()
    text = "Employees park their cars in garage B, on level 2, with their badge. Visitors park in the street."
    with TestCase.captureOnCommitCallbacks(execute=False) as queued:  # the upload's job not run yet
        owners.gap_write(gap=gap, text=text, expected="garage B", user=olga)
    gaps_task()
    gap.refresh_from_db()
    assert gap.state == "written" and gap.checked.get("at") is None  # its text is not indexed yet: not asked
    with TestCase.captureOnCommitCallbacks(execute=True):
        for callback in queued:
            callback()  # the worker ingests the upload
    gaps_task()
    gap.refresh_from_db()
    assert gap.checked["of"] == 2 and gap.checked["version"] == 1 and gap.document.document_key.startswith("gap-")
    assert gap.checked["passed"] == 2 and gap.state == "closed" and gap.closed_at is not None, gap.checked
    client = Client()
    client.force_login(olga)
    page = client.get(f"/t/acme/gaps/{gap.public_id}/")
    assert b'class="checked" data-passed="2" data-of="2"' in page.content


def test_each_open_gap_is_e_mailed_once_to_whoever_closes_it(tenant_a, admin_a, tmp_path, mailoutbox, settings):
    """Its owner (the nearest document's), else the tenant's admins; a gap given to someone else tells them too; the
    e-mail links the gap and carries no other question than its representative one."""
    from insights.tasks import gaps_task

    settings.RAG_PUBLIC_URL = "https://kb.example.com"
    olga, sam = make_member(tenant_a, username="olga"), make_member(tenant_a, username="sam")
    for person, address in ((olga, "olga@example.com"), (sam, "sam@example.com"), (admin_a, "alice@example.com")):
        person.email = address
        person.save()
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={
        **FILES, "facilities.md": "# Facilities\n\nVisitors park in the street. Employees cycle: the office has a "
                                  "bicycle room in the basement.\n"})  # fmt: skip
    source.owner = olga
    source.save()
    for question in PARKING[:3] + DENTAL[:2]:
        ask(tenant_a, question)
    gaps_task()
    parking = Gap.objects.get(owner=olga)
    dental = Gap.objects.get(owner=None)
    sent = {message.to[0]: message for message in mailoutbox}
    assert set(sent) == {"olga@example.com", "alice@example.com"}  # the dental gap has no owner: the admins
    body = sent["olga@example.com"].body
    assert parking.representative in body and "Asked 3 times" in body
    assert f"https://kb.example.com/t/acme/gaps/{parking.public_id}/" in body
    assert not any(q in body for q in PARKING[:3] if q != parking.representative)  # one question, no list
    assert dental.representative in sent["alice@example.com"].body
    gaps_task()
    assert len(mailoutbox) == 2  # told once

    parking.owner = sam  # an admin gives it to sam
    parking.save()
    gaps_task()
    assert [m.to for m in mailoutbox[2:]] == [["sam@example.com"]]

    from tenants.services import member_remove

    leaving = Membership.objects.get(tenant=tenant_a, user=sam)
    member_remove(tenant=tenant_a, actor=admin_a, membership=leaving)  # the gap goes back to the admins, never to him
    parking.told = []
    parking.save()
    gaps_task()
    assert [m.to for m in mailoutbox[3:]] == [["alice@example.com"]]


def test_a_document_ragsite_cannot_give_back_exactly_is_not_edited_here(tenant_a):
    """Its front matter (a review date) is not in its chunks: rewriting it from them would lose it. The owner is told
    to add a new document instead, and neither an edit here nor "edited where it lives" is taken."""
    from knowledge import services as knowledge

    olga = make_member(tenant_a, username="olga")
    with TestCase.captureOnCommitCallbacks(execute=True):
        knowledge.upload_enqueue(tenant=tenant_a, source=None, uploads=[
            ("facilities.md", ("---\nreview_by: 2027-06-30\n---\n" + FACILITIES).encode())])  # fmt: skip
    for question in PARKING[:3]:
        ask(tenant_a, question)
    gaps.refresh(tenant_a)
    gap = Gap.objects.get()
    gap.owner = olga
    gap.save()
    to = owners.destinations(gap)
    assert to.document.document_key == "facilities.md" and not to.editable and not to.elsewhere
    client = Client()
    client.force_login(olga)
    page = client.get(f"/t/acme/gaps/{gap.public_id}/").content.decode()
    assert "facilities.md cannot be edited here" in page and 'data-where="edit"' not in page
    assert 'data-where="there"' not in page
    for where in ("edit", "there"):
        posted = {"where": where, "text": "Employees park in garage B.", "expected": "garage B", "version": "1"}
        assert client.post(f"/t/acme/gaps/{gap.public_id}/", posted).status_code == 400
    assert Document.objects.get(document_key="facilities.md").review_by.isoformat() == "2027-06-30"
