"""Staff chat pages: membership required, 404 for other tenants, answers streamed and saved."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from chat.models import ChatMessage, ChatSession
from tests.factories import make_document, make_folder_source, make_member


@pytest.fixture
def handbook(tenant_a, tmp_path):  # type: ignore[no-untyped-def]
    files = {"warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n"}
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=files)
    return source


def test_the_chat_page_needs_a_login(tenant_a):
    response = Client().get("/t/acme/chat/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_member_of_another_tenant_gets_404_everywhere(tenant_a, tenant_b):
    client = Client()
    client.force_login(make_member(tenant_b))
    assert client.get("/t/acme/chat/").status_code == 404
    assert client.get("/t/acme/chat/sessions/").status_code == 404
    assert client.post("/t/acme/chat/ask/", {"question": "hi"}).status_code == 404
    assert client.get("/t/nobody/chat/").status_code == 404


def test_another_users_session_is_404(tenant_a):
    owner, other = make_member(tenant_a), make_member(tenant_a)
    session = ChatSession.objects.create(tenant=tenant_a, user=owner, title="private")
    client = Client()
    client.force_login(other)
    assert client.get(f"/t/acme/chat/?session={session.public_id}").status_code == 404
    assert client.post("/t/acme/chat/ask/", {"question": "x", "session": str(session.public_id)}).status_code == 404


def test_an_empty_question_is_refused(tenant_a):
    client = Client()
    client.force_login(make_member(tenant_a))
    assert client.post("/t/acme/chat/ask/", {"question": "  "}).status_code == 400


@pytest.mark.slow
def test_asking_streams_and_saves_the_users_own_words_not_the_prompt(handbook, tenant_a, chat_model):
    user = make_member(tenant_a)
    client = Client()
    client.force_login(user)
    page = client.get("/t/acme/chat/")
    assert page.status_code == 200 and b"Ask a question" in page.content
    response = client.post("/t/acme/chat/ask/", {"question": "How long is the warranty?"})
    body = b"".join(response.streaming_content).decode()
    events = [block.split("\n", 1) for block in body.strip().split("\n\n")]
    assert [e[0] for e in events[:2]] == ["event: sources", "event: sentence"] and events[-1][0] == "event: done"
    done = json.loads(events[-1][1].removeprefix("data: "))
    session = ChatSession.objects.get(public_id=done["session"])
    assert session.user == user and session.title == "How long is the warranty?"
    question, answer = session.messages.all()
    assert (question.role, question.text) == ("user", "How long is the warranty?")
    assert "Excerpts" not in question.text and "Only use facts" not in answer.text
    assert answer.role == "assistant" and answer.model and answer.ttft_ms > 0 and answer.text == done["answer"]
    sessions = client.get("/t/acme/chat/sessions/")
    assert b"How long is the warranty?" in sessions.content
    again = client.get(f"/t/acme/chat/?session={session.public_id}")
    assert again.content.count(b'class="message') == 2
    assert ChatMessage.objects.for_tenant(tenant_a).count() == 2


def test_a_failed_answer_reports_the_error_in_the_stream_and_saves_nothing(tenant_a):
    """A real mismatch: the tenant's active version was embedded by another model than the configured one."""
    from knowledge.models import DocumentVersion

    document = make_document(tenant=tenant_a, key="old.md", text="Embedded long ago by another model.")
    DocumentVersion.objects.filter(document=document).update(embedding_provider="openai", embedding_model="old-embed",
                                                             embedding_dims=1536)  # fmt: skip
    client = Client()
    client.force_login(make_member(tenant_a))
    body = b"".join(client.post("/t/acme/chat/ask/", {"question": "anything?"}).streaming_content).decode()
    assert body.startswith("event: error") and "manage.py reindex acme" in body
    assert not ChatSession.objects.exists() and not ChatMessage.objects.exists()


def test_health_is_public_and_shows_the_chat_model_state_without_paths_or_keys(client, tenant_a):
    body = client.get("/healthz").json()
    assert body == {"status": "ok", "chat_model": {"state": "stopped", "model": ""}}  # no model server here
    assert client.post("/healthz").status_code == 405
    staff = make_member(tenant_a)
    client.force_login(staff)
    page = client.get("/t/acme/chat/").content.decode()
    assert 'id="model-status" data-state="stopped"' in page and "answers show the most relevant excerpts" in page
    assert "llm_serve" not in page  # staff see what it means for them; the operator's remedy is for admins
    client.force_login(make_member(tenant_a, role="admin"))
    assert "llm_serve" in client.get("/t/acme/chat/").content.decode()  # admins see why and what to do


def test_a_saved_answer_shows_code_as_code_and_the_model_only_to_admins(tenant_a):
    """Answers render inline code as <code>, never raw backticks, and nothing else as HTML; the model's file name
    sits behind "Details" for tenant admins only."""
    staff = make_member(tenant_a)
    session = ChatSession.objects.create(tenant=tenant_a, user=staff, title="flags")
    claims = [{"text": "Set `FLASK_DEBUG` to <b>1</b>.", "citations": [1], "supported": True, "relevant": True,
               "quotes": [{"n": 1, "text": "FLASK_DEBUG enables the debugger."}]}]  # fmt: skip
    model = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    ChatMessage.objects.create(tenant=tenant_a, session=session, role="assistant", text="Set `FLASK_DEBUG` to 1.",
                               model=model, status="answered", claims=claims)  # fmt: skip
    ChatMessage.objects.create(tenant=tenant_a, session=session, role="assistant", model="qwen.gguf",
                               text="Run `flask run`.", status="not_found")  # fmt: skip
    client = Client()
    client.force_login(staff)
    page = client.get(f"/t/acme/chat/?session={session.public_id}").content.decode()
    page = re.sub(r'<script id="answer-[^"]+" type="application/json">.*?</script>', "", page)  # the script's data
    assert (
        "<code>FLASK_DEBUG</code>" in page and "<code>flask run</code>" in page and "`" not in page.split("<main")[-1]
    )
    assert "&lt;b&gt;1&lt;/b&gt;" in page and "<b>1</b>" not in page  # the model's text is escaped
    assert "not found" in page and "not_found" not in page.split('data-status="not_found"')[-1]
    assert "gguf" not in page  # staff do not see model internals
    admin = make_member(tenant_a, role="admin")
    client.force_login(admin)
    own = ChatSession.objects.create(tenant=tenant_a, user=admin, title="mine")
    ChatMessage.objects.create(tenant=tenant_a, session=own, role="assistant", text="Yes.", model="qwen.gguf",
                               status="answered")  # fmt: skip
    page = client.get(f"/t/acme/chat/?session={own.public_id}").content.decode()
    assert '<details class="internals"><summary>Details</summary><p>Model: qwen.gguf</p></details>' in page


def test_staff_read_a_cited_document_with_the_passage_highlighted_and_never_one_hidden_from_them(tenant_a, tenant_b,
                                                                                                 tmp_path):  # fmt: skip
    """Issue 50: staff could not open what an answer cites (no link, the documents pages are the admins')."""
    from knowledge import services as knowledge_services
    from knowledge.models import Chunk, Document
    from tenants.services import group_create
    from tests.factories import make_folder_source

    files = {"warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n\n## Claims\n\n"
                            "Claims need the original receipt.\n",
             "salaries.md": "# Salaries\n\nThe salary bands are reviewed every March.\n"}  # fmt: skip
    root = tmp_path / "kb"
    make_folder_source(tenant=tenant_a, root=root, files=files)
    group_create(tenant=tenant_a, name="hr")
    salaries = Document.objects.get(document_key="salaries.md")
    knowledge_services.document_set_access(tenant=tenant_a, document=salaries, access=["group:hr"])
    warranty = Document.objects.get(document_key="warranty.md")
    cited = Chunk.objects.filter(document=warranty, text__contains="receipt").first()
    staff = make_member(tenant_a)
    client = Client()
    client.force_login(staff)
    page = client.get(f"/t/acme/read/{warranty.document_id}/", {"chunk": cited.chunk_id, "version": 1})
    html = page.content.decode()
    assert page.status_code == 200 and "two year warranty" in html and "version 1 of 1" in html
    assert re.search(r'id="cited"[^>]*>.*<mark>[^<]*Claims need the original receipt', html, re.S)
    assert "In force" in html and 'id="not-current"' not in html
    assert client.get(f"/t/acme/read/{salaries.document_id}/").status_code == 404  # hidden: like a missing one
    assert client.get("/t/acme/read/doc:src:acme:folder:kb:nothing.md/").status_code == 404
    (root / "warranty.md").write_text(files["warranty.md"].replace("two year", "three year"))
    make_folder_source(tenant=tenant_a, root=root, files={})
    old = client.get(f"/t/acme/read/{warranty.document_id}/", {"version": 1}).content.decode()
    assert 'id="not-current"' in old and "two year warranty" in old and "version 1 of 2" in old
    outsider = make_member(tenant_b)
    client.force_login(outsider)
    assert client.get(f"/t/acme/read/{warranty.document_id}/").status_code == 404


def test_a_follow_up_in_the_staff_chat_is_read_in_the_conversations_context(handbook, tenant_a):
    """ "Where is that written?" after a question is read with it, as the OpenAI door reads the same messages; a
    question of its own in the same conversation stands alone, and another user's conversation is never read."""
    from chat.models import AnswerRecord

    client = Client()
    client.force_login(make_member(tenant_a))

    def ask(question: str, session: str = "") -> dict:
        response = client.post("/t/acme/chat/ask/", {"question": question, "session": session})
        body = b"".join(response.streaming_content).decode()
        return json.loads(body.strip().split("\n\n")[-1].split("\n", 1)[1].removeprefix("data: "))

    first = ask("How long is the warranty?")
    follow = ask("Where is that written?", first["session"])
    assert follow["session"] == first["session"]
    asked = AnswerRecord.objects.get(public_id=follow["answer_id"]).question
    assert asked == "How long is the warranty? Where is that written?"
    assert "warranty.md" in json.dumps(follow["citations"])
    alone = ask("What does the handbook say about returns?", first["session"])
    assert (
        AnswerRecord.objects.get(public_id=alone["answer_id"]).question == "What does the handbook say about returns?"
    )
    session = ChatSession.objects.get(public_id=first["session"])
    assert [m.text for m in session.messages.filter(role="user").order_by("pk")] == [
        "How long is the warranty?", "Where is that written?", "What does the handbook say about returns?"]  # fmt: skip
