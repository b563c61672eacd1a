"""Document-level access inside a tenant: every door × every identity × an open and a restricted document.

The company: `handbook` (open to the tenant) and `hr-files` (open to group:hr only). hanna is staff in hr, sam is
staff outside it, alice is an admin. Keys act for tenant, for group:hr, for user:hanna and for all. A canary
string is planted only in the restricted document (and in the name of a file its job skipped): it must never
appear in anything an identity that may not see the document gets back.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from knowledge import selectors, services
from knowledge.index import indexer
from knowledge.ingest import pipeline
from knowledge.models import Document, IngestJob, Source
from knowledge.search.retrieval import retrieve
from tenants.models import ApiKey, Membership
from tenants.principals import Viewer, viewer_for
from tenants.services import api_key_issue, group_create, group_get, group_member_remove
from tests.company import CANARY, QUESTION, CommittingAPIClient  # the `company` fixture: tests/conftest.py
from tests.factories import make_folder_source, make_member

# identity → may it see the restricted document?
IDENTITIES = {
    "admin": True, "staff-in-group": True, "staff-outside": False,
    "key-tenant": False, "key-group": True, "key-user": True, "key-all": True,
    # People the company's provider sends (tests/company.py): provisioned into hr, deprovisioned (their browser
    # session and a key that acted for them), deprovisioned and provisioned again outside hr.
    "provisioned-in-group": True, "deprovisioned": False, "key-user-deprovisioned": False,
    "reprovisioned-outside": False,
}  # fmt: skip
SESSION_USERS = {"admin": "alice", "staff-in-group": "hanna", "staff-outside": "sam", "provisioned-in-group": "pia",
                 "deprovisioned": "dora", "reprovisioned-outside": "remy"}  # fmt: skip
SIGNED_OUT = {"deprovisioned"}  # the account is off: the session reads as nobody (pages send it to sign in)
GONE = SIGNED_OUT | {"key-user-deprovisioned"}  # not let in at all: 401 where others are told "not found"
PRESENT = [identity for identity in IDENTITIES if identity not in GONE]  # who still reads (the other matrices)


def _client(company: dict[str, Any], identity: str) -> APIClient:
    client = CommittingAPIClient()
    if identity in SESSION_USERS:
        client.force_login(company["users"][SESSION_USERS[identity]])
    else:
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {company['keys'][identity]}")
    return client


def _reads(company: dict[str, Any], client: APIClient, identity: str) -> dict[str, tuple[int, str]]:
    """Every REST door that returns document content or metadata, as (status, body)."""
    base = "/api/v1/tenants/acme"
    secret, hr_source = company["secret"], company["hr_source"]
    calls = {
        "retrieve": client.post(f"{base}/retrieve/", {"query": QUESTION, "top_k": 5}, format="json"),
        "retrieve-specific": client.post(
            f"{base}/retrieve/", {"query": QUESTION, "specific": True, "include_superseded": True}, format="json"
        ),  # fmt: skip
        "bootstrap": client.post(f"{base}/bootstrap/", {"intent": "salary bands"}, format="json"),
        "answer": client.post(f"{base}/answer/", {"question": QUESTION}, format="json"),
        "documents": client.get(f"{base}/documents/?q=salar"),
        "documents-all": client.get(f"{base}/documents/"),
        "document": client.get(f"{base}/documents/{secret.public_id}/"),
        "sources": client.get(f"{base}/sources/"),
        "source": client.get(f"{base}/sources/{hr_source.public_id}/"),
        "jobs": client.get(f"{base}/jobs/"),
        "retrieve-every-version": client.post(
            f"{base}/retrieve/", {"query": QUESTION, "include_expired": True, "as_of": "2999-01-01"}, format="json"
        ),  # fmt: skip
        "changes": client.get(f"{base}/changes/?since=2000-01-01"),
        "review": client.get(f"{base}/review/"),
        # The page a citation opens (sessions only: a key is sent to sign in), the cited chunk asked for.
        "read": client.get(f"/t/acme/read/{secret.document_id}/?chunk={secret.chunks.first().chunk_id}"),
    }
    # The OpenAI-compatible door: keys only (a session gets 401); no model here, so the answer is the excerpts.
    openai_client = APIClient()
    if identity not in SESSION_USERS:
        openai_client.credentials(HTTP_AUTHORIZATION=f"Bearer {company['keys'][identity]}")
    question = {"model": "acme", "messages": [{"role": "user", "content": QUESTION}]}
    calls["openai"] = openai_client.post("/v1/chat/completions", question, format="json")
    calls["openai-stream"] = openai_client.post("/v1/chat/completions", {**question, "stream": True}, format="json")
    calls["openai-models"] = openai_client.get("/v1/models")
    if identity not in SESSION_USERS:  # Dify speaks with keys only
        key, setting = company["keys"][identity], {"top_k": 5}
        for door, knowledge_id in (("dify", "hr-files"), ("dify-open", "handbook")):
            calls[door] = APIClient().post(
                f"{base}/dify/retrieval",
                {"knowledge_id": knowledge_id, "query": QUESTION, "retrieval_setting": setting},
                format="json", HTTP_AUTHORIZATION=f"Bearer {key}",
            )  # fmt: skip
    return {name: (response.status_code, _body(response)) for name, response in calls.items()}


def _body(response) -> str:  # type: ignore[no-untyped-def]
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


@pytest.mark.parametrize("identity", list(IDENTITIES))
def test_every_rest_door_shows_the_restricted_document_exactly_to_those_who_may_see_it(company, identity, caplog):
    caplog.set_level(logging.DEBUG)
    sees = IDENTITIES[identity]
    got = _reads(company, _client(company, identity), identity)
    for door, (status, body) in got.items():
        assert status < 500, (door, status, body[:300])
        if not sees:
            assert CANARY not in body, door
            assert "salaries.md" not in body and "hr-files" not in body, (door, body[:300])
    assert ("salaries.md" in got["retrieve"][1]) is sees
    assert (CANARY in got["answer"][1]) is sees  # no model here: the answer is the best excerpts, verbatim
    assert ("salaries.md" in got["bootstrap"][1]) is sees
    assert ("salaries.md" in got["documents"][1]) is sees
    hidden = 401 if identity in GONE else 404
    assert got["document"][0] == (200 if sees else hidden)  # hidden is "not found", never "forbidden"
    assert got["source"][0] == (200 if sees else hidden)
    assert ("hr-files" in got["sources"][1]) is sees
    assert (CANARY in got["jobs"][1]) is sees  # the skipped file's name is in the hr job's report
    assert ("salaries.md" in got["changes"][1]) is sees  # its "added" change
    assert ("salaries.md" in got["retrieve-every-version"][1]) is sees
    if "dify" in got:  # Dify's own shape: a key it does not know is a 403
        assert got["dify"][0] == (200 if sees else 403 if identity in GONE else 404)
    if identity in SESSION_USERS:
        expected = 302 if identity in SIGNED_OUT else 200 if sees else 404
        assert got["read"][0] == expected and (CANARY in got["read"][1]) is sees
    if identity in SESSION_USERS:
        assert got["openai"][0] == got["openai-stream"][0] == got["openai-models"][0] == 401
    else:
        assert (CANARY in got["openai"][1]) is sees and (CANARY in got["openai-stream"][1]) is sees
    # The open document is there for everyone, and a restricted corpus costs the others no recall: five hits
    # when five exist... here the open handbook is the best hit left.
    if not sees:
        assert CANARY not in caplog.text  # nor in any log line written while serving this identity
    if identity in GONE:
        assert got["retrieve"][0] == got["bootstrap"][0] == 401
        return
    hits = json.loads(got["retrieve"][1])["hits"]
    assert hits and ("handbook.md" in {h["document_key"] for h in hits})
    assert json.loads(got["bootstrap"][1])["scope"]["documents"] == (2 if sees else 1)


def test_top_k_counts_only_visible_hits_so_a_restricted_corpus_costs_others_no_recall(tenant_a, tmp_path):
    group_create(tenant=tenant_a, name="board")
    open_files = {f"open-{n}.md": f"# Topic {n}\n\nThe quarterly revenue note number {n} for the team.\n"
                  for n in range(6)}  # fmt: skip
    secret_files = {f"secret-{n}.md": f"# Board {n}\n\nThe quarterly revenue note number {n} for the board.\n"
                    for n in range(20)}  # fmt: skip
    make_folder_source(tenant=tenant_a, root=tmp_path / "open", files=open_files, name="open")
    board = make_folder_source(tenant=tenant_a, root=tmp_path / "board", files=secret_files, name="board")
    services.source_set_access(tenant=tenant_a, source=board, access=["group:board"])
    indexer.drain()
    staff = Membership.objects.get(user=make_member(tenant_a, username="sam"))
    hits = retrieve(viewer=viewer_for(tenant=tenant_a, membership=staff), query="quarterly revenue note", top_k=5)
    assert len(hits) == 5 and all(h.chunk.document.document_key.startswith("open-") for h in hits)


def test_the_restriction_is_in_the_vector_query_itself(company):
    """Both legs of the store's own query, not a filter after it: a restricted viewer's scope finds no point
    of the hidden document, though the same query for an unrestricted one ranks it first."""
    from inference.embedders import get_embedder
    from knowledge.index.lexical import query_vector
    from knowledge.index.vectorstore import get_store
    from knowledge.search.retrieval import RetrieveFilters
    from knowledge.search.scopes import viewer_scope

    tenant = company["tenant"]
    embedder = get_embedder()
    dense = embedder.embed([QUESTION])[0].tolist()
    outside = viewer_for(tenant=tenant, membership=Membership.objects.get(user=company["users"]["sam"]))
    for viewer, expected in ((outside, False), (Viewer.everything(tenant), True)):
        legs = get_store().hybrid(embedder.identity, viewer_scope(viewer, RetrieveFilters()), dense=dense,
                                  sparse=query_vector(QUESTION), limit=50)  # fmt: skip
        found = {hit.payload["document_id"] for hit in legs.fused}
        assert (company["secret"].document_id in found) is expected


def test_a_document_list_of_its_own_replaces_the_sources_and_null_inherits_again(company):
    tenant, open_doc = company["tenant"], company["open"]
    admin = CommittingAPIClient()
    admin.force_login(company["users"]["alice"])
    url = f"/api/v1/tenants/acme/documents/{open_doc.public_id}/"
    response = admin.patch(url, {"access": ["user:hanna"]}, format="json")
    assert response.status_code == 200 and response.json()["access"] == ["user:hanna"]
    assert response.json()["restricted"] is True
    indexer.drain()
    sam = viewer_for(tenant=tenant, membership=Membership.objects.get(user=company["users"]["sam"]))
    hanna = viewer_for(tenant=tenant, membership=Membership.objects.get(user=company["users"]["hanna"]))
    assert selectors.document_get(viewer=sam, document_id=open_doc.document_id) is None
    assert "handbook.md" not in {h.chunk.document.document_key for h in retrieve(viewer=sam, query="ticket support")}
    assert "handbook.md" in {h.chunk.document.document_key for h in retrieve(viewer=hanna, query="ticket support")}
    back = admin.patch(url, {"access": None}, format="json")
    assert back.status_code == 200 and back.json()["access"] is None and back.json()["effective_access"] == ["tenant"]
    indexer.drain()
    assert "handbook.md" in {h.chunk.document.document_key for h in retrieve(viewer=sam, query="ticket support")}


def test_access_changes_are_refused_without_an_admin_or_a_write_key_for_all(company):
    tenant, secret = company["tenant"], company["secret"]
    url = f"/api/v1/tenants/acme/documents/{secret.public_id}/"
    write_tenant = CommittingAPIClient()
    write_tenant.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant, scope='write')[1]}")
    other = api_key_issue(tenant=tenant, scope="write", acts_for=["group:hr"])[1]
    write_group = CommittingAPIClient()
    write_group.credentials(HTTP_AUTHORIZATION=f"Api-Key {other}")
    read_all = _client(company, "key-all")
    assert write_tenant.patch(url, {"access": ["tenant"]}, format="json").status_code == 404  # cannot see it
    assert write_group.patch(url, {"access": ["tenant"]}, format="json").status_code == 403  # sees it, may not
    assert read_all.patch(url, {"access": ["tenant"]}, format="json").status_code == 403  # read scope
    source_url = f"/api/v1/tenants/acme/sources/{company['handbook'].public_id}/"
    assert write_tenant.patch(source_url, {"access": ["group:hr"]}, format="json").status_code == 403
    staff = CommittingAPIClient()
    staff.force_login(company["users"]["hanna"])
    assert staff.patch(url, {"access": ["tenant"]}, format="json").status_code == 404
    assert Document.objects.get(pk=secret.pk).access is None and Source.objects.get(name="hr-files").access == [
        "group:hr"
    ]
    # Who may change it sees the lists; others never do.
    assert "access" not in _client(company, "key-group").get(url).json()
    everything = CommittingAPIClient()
    everything.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant, acts_for=['all'])[1]}")
    assert everything.get(url).json()["effective_access"] == ["group:hr"]


def test_unknown_principals_are_a_400_that_names_them(company):
    admin = CommittingAPIClient()
    admin.force_login(company["users"]["alice"])
    response = admin.patch(f"/api/v1/tenants/acme/sources/{company['handbook'].public_id}/",
                           {"access": ["group:legal", "user:ghost", "group:hr"]}, format="json")  # fmt: skip
    assert response.status_code == 400
    message = json.dumps(response.json())
    assert "'legal'" in message and "'ghost'" in message and "'hr'" not in message
    assert Source.objects.get(name="handbook").access == ["tenant"]  # nothing changed


def test_a_membership_change_applies_to_the_next_request(company):
    """Keys and sessions are resolved at each request: removing hanna from hr hides the document from her and
    from the key acting for her at once; adding sam shows it to him."""
    tenant, hr = company["tenant"], company["hr"]
    hanna, key_user = _client(company, "staff-in-group"), _client(company, "key-user")
    url = f"/api/v1/tenants/acme/documents/{company['secret'].public_id}/"
    assert hanna.get(url).status_code == 200 and key_user.get(url).status_code == 200
    admin = CommittingAPIClient()
    admin.force_login(company["users"]["alice"])
    removed = admin.delete("/api/v1/tenants/acme/groups/hr/members/hanna/")
    assert removed.status_code == 204
    assert hanna.get(url).status_code == 404 and key_user.get(url).status_code == 404
    added = admin.post("/api/v1/tenants/acme/groups/hr/members/", {"username": "sam"}, format="json")
    assert added.status_code == 201 and added.json()["members"] == ["pia", "sam"]  # pia: from the directory
    assert _client(company, "staff-outside").get(url).status_code == 200
    assert (
        admin.post("/api/v1/tenants/acme/groups/hr/members/", {"username": "nobody"}, format="json").status_code == 400
    )
    groups = admin.get("/api/v1/tenants/acme/groups/").json()
    assert groups == [{"name": "hr", "principal": "group:hr", "members": ["pia", "sam"]}]
    group_member_remove(tenant=tenant, actor=None, group=hr, user=company["users"]["sam"])


def test_a_key_acting_for_a_principal_follows_what_it_holds_now(company):
    tenant = company["tenant"]
    key = ApiKey.objects.get(name="key-tenant")
    client = _client(company, "key-tenant")
    url = f"/api/v1/tenants/acme/documents/{company['secret'].public_id}/"
    assert client.get(url).status_code == 404
    key.acts_for = ["group:hr"]
    key.save(update_fields=["acts_for"])
    assert client.get(url).status_code == 200  # its principals are read at each request
    group_get(tenant=tenant, name="hr").delete()
    assert client.get(url).status_code == 404  # the group is gone: what it opened closes


def test_a_permission_change_is_a_payload_update_and_the_stricter_list_holds_until_it_lands(company):
    """No re-extraction, no re-embedding, no new version; until the indexer has updated the points, the old and
    the new list are both enforced, so nobody sees a document early."""
    tenant, secret = company["tenant"], company["secret"]
    version_before = secret.version
    vectors_before = list(secret.chunks.values_list("point_id", "dense"))
    sam = viewer_for(tenant=tenant, membership=Membership.objects.get(user=company["users"]["sam"]))
    services.source_set_access(tenant=tenant, source=company["hr_source"], access=["group:hr", "user:sam"])
    pending = Document.objects.get(pk=secret.pk)
    assert pending.access_pending and pending.reader_list == ["group:hr"]  # the stricter of old and new
    assert selectors.document_get(viewer=sam, document_id=secret.document_id) is None
    assert "salaries.md" not in {h.chunk.document.document_key for h in retrieve(viewer=sam, query=QUESTION)}
    indexer.drain()
    applied = Document.objects.get(pk=secret.pk)
    assert not applied.access_pending and applied.reader_list == ["group:hr", "user:sam"]
    assert "salaries.md" in {h.chunk.document.document_key for h in retrieve(viewer=sam, query=QUESTION)}
    assert applied.version == version_before and applied.versions.count() == 1
    assert list(applied.chunks.values_list("point_id", "dense")) == vectors_before  # the same points and vectors
    # A revocation is enforced in SQL at once, before the payloads change.
    services.source_set_access(tenant=tenant, source=company["hr_source"], access=["group:hr"])
    assert selectors.document_get(viewer=sam, document_id=secret.document_id) is None
    assert "salaries.md" not in {h.chunk.document.document_key for h in retrieve(viewer=sam, query=QUESTION)}


def test_old_chat_answers_that_cited_a_now_hidden_document_say_not_available(company, client):
    from chat import records
    from chat.models import ChatMessage, ChatSession

    tenant, hanna = company["tenant"], company["users"]["hanna"]
    session = ChatSession.objects.create(tenant=tenant, user=hanna)
    citation = {"n": 1, **company["secret"].chunks.first().location(), "label": "salaries.md"}
    ChatMessage.objects.create(
        tenant=tenant, session=session, role="assistant", status="answered",
        text=f"The band is 92,000 euros ({CANARY}) [1].", citations=[citation],
        claims=[{"text": f"The band is 92,000 euros ({CANARY}).", "citations": [1], "supported": True,
                 "quotes": [{"n": 1, "text": f"Reference {CANARY}."}]}],
    )  # fmt: skip
    client.force_login(hanna)
    page = client.get(f"/t/acme/chat/?session={session.public_id}").content.decode()
    assert CANARY in page  # she may see it today
    group_member_remove(tenant=tenant, actor=None, group=company["hr"], user=hanna)
    page = client.get(f"/t/acme/chat/?session={session.public_id}").content.decode()
    assert CANARY not in page and "salaries.md" not in page
    assert records.NOT_AVAILABLE in page


def test_the_cli_creates_groups_members_restricted_sources_and_keys_and_names_what_it_does_not_know(
    tenant_a, tmp_path, capsys
):
    from tests.factories import make_user

    make_user(username="bob")
    call_command("create_group", "acme", "legal")
    call_command("add_member", "acme", "bob", "--groups", "legal")
    bob = Membership.objects.get(user__username="bob")
    assert bob.role == "staff" and group_get(tenant=tenant_a, name="legal").members.filter(username="bob").exists()
    call_command("add_member", "acme", "bob", "--role", "admin")
    call_command("add_member", "acme", "bob", "--groups", "legal")  # keeps the role it has
    assert Membership.objects.get(user__username="bob").role == "admin"
    with pytest.raises(CommandError, match="'nope'"):
        call_command("add_member", "acme", "bob", "--groups", "legal,nope")
    with pytest.raises(CommandError, match="already has"):
        call_command("create_group", "acme", "legal")
    folder = tmp_path / "contracts"
    folder.mkdir()
    (folder / "nda.md").write_text("# NDA\n\nThe NDA with Initech runs until 2029.\n")
    with pytest.raises(CommandError, match="'ghost'"):
        call_command("ingest", "acme", str(folder), "--source", "contracts", "--access", "group:legal,user:ghost")
    with pytest.raises(CommandError, match="--access needs"):
        call_command("ingest", "acme", str(folder), "--source", "contracts", "--access", " ")
    assert not Source.objects.filter(name="contracts").exists()  # refused before anything was made
    call_command("ingest", "acme", str(folder), "--source", "contracts", "--access", "group:legal,user:bob")
    source = Source.objects.get(name="contracts")
    assert source.access == ["group:legal", "user:bob"]
    assert Document.objects.get(source=source).reader_list == ["group:legal", "user:bob"]
    call_command("ingest", "acme", str(folder), "--source", "contracts")  # a re-sync keeps the list
    assert Source.objects.get(name="contracts").access == ["group:legal", "user:bob"]
    call_command("create_api_key", "acme", "--scope", "read", "--acts-for", "group:legal", "--name", "legal-bot")
    assert ApiKey.objects.get(name="legal-bot").acts_for == ["group:legal"]
    call_command("create_api_key", "acme", "--acts-for", "all", "--name", "ops")
    assert ApiKey.objects.get(name="ops").acts_for_all
    with pytest.raises(CommandError, match="'finance'"):
        call_command("create_api_key", "acme", "--acts-for", "group:finance")
    assert ApiKey.objects.get(name="legal-bot").scope == "read"
    call_command("create_api_key", "acme", "--name", "plain")
    assert ApiKey.objects.get(name="plain").acts_for == ["tenant"]  # the default, and what existing keys became


def test_only_a_tenant_admin_issues_a_key_for_all_and_nobody_a_key_that_sees_more_than_they_do(tenant_a):
    from tenants.principals import UnknownPrincipal

    staff = make_member(tenant_a, username="sam")
    group_create(tenant=tenant_a, name="board")
    with pytest.raises(UnknownPrincipal, match="Only a tenant admin"):
        api_key_issue(tenant=tenant_a, created_by=staff, acts_for=["all"])
    with pytest.raises(UnknownPrincipal, match="group:board"):
        api_key_issue(tenant=tenant_a, created_by=staff, acts_for=["group:board"])
    assert api_key_issue(tenant=tenant_a, created_by=staff, acts_for=["user:sam"])[0].acts_for == ["user:sam"]
    admin = make_member(tenant_a, username="ada", role="admin")
    assert api_key_issue(tenant=tenant_a, created_by=admin, acts_for=["all"])[0].acts_for == ["all"]


def test_a_removed_member_leaves_their_groups(company):
    from tenants.services import member_remove

    tenant = company["tenant"]
    member_remove(tenant=tenant, actor=None, membership=Membership.objects.get(user=company["users"]["hanna"]))
    assert not company["hr"].members.filter(username="hanna").exists()


def test_a_job_report_leaves_out_the_files_of_documents_the_reader_may_not_see(company, tmp_path):
    """A document with its own, stricter list in an open source: a later sync that skips its file names it only
    to those who may see it."""
    tenant, handbook = company["tenant"], company["handbook"]
    root = Path(handbook.path)
    (root / "board-minutes.md").write_text("# Board minutes\n\nThe board met in March.\n")
    pipeline.sync_folder(source=handbook, root=root)
    minutes = Document.objects.get(document_key="board-minutes.md")
    services.document_set_access(tenant=tenant, document=minutes, access=["user:alice"])
    indexer.drain()
    (root / "board-minutes.md").write_bytes(b"\x00\xff not text any more")
    job = pipeline.sync_folder(source=handbook, root=root)
    assert "board-minutes.md" in json.dumps(job.skips + job.errors)
    url = f"/api/v1/tenants/acme/jobs/{job.public_id}/"
    assert "board-minutes.md" not in _client(company, "key-tenant").get(url).content.decode()
    assert "board-minutes.md" not in _client(company, "key-tenant").get("/api/v1/tenants/acme/jobs/").content.decode()
    assert "board-minutes.md" in _client(company, "key-all").get(url).content.decode()
    assert job.skips == IngestJob.objects.get(pk=job.pk).skips  # the stored report is whole


def test_a_viewer_the_tenant_hides_nothing_from_queries_without_a_filter_and_sql_still_guards_every_hit(
    company, monkeypatch
):
    """hanna holds a principal of every list acme uses (tenant, group:hr): her queries need no access filter. sam
    does not: his carry one. Were the filter ever dropped wrongly, each hit is still checked against its document's
    enforced list in SQL, so a hidden document costs recall, never shows."""
    from knowledge.search import retrieval

    tenant = company["tenant"]
    hanna = viewer_for(tenant=tenant, membership=Membership.objects.get(user=company["users"]["hanna"]))
    sam = viewer_for(tenant=tenant, membership=Membership.objects.get(user=company["users"]["sam"]))
    assert selectors.query_principals(hanna) is None
    assert selectors.query_principals(sam) == ["tenant", "user:sam"]
    services.document_set_access(tenant=tenant, document=company["open"], access=["user:alice"])
    assert selectors.query_principals(hanna) == ["group:hr", "tenant", "user:hanna"]  # now one list she lacks
    monkeypatch.setattr(retrieval, "query_principals", lambda viewer: None)  # a filter dropped by mistake
    hits = retrieve(viewer=sam, query=QUESTION, top_k=5)
    assert "salaries.md" not in {h.chunk.document.document_key for h in hits}


def test_the_verdict_form_offers_only_documents_the_member_sees(company, client):
    """An answer kept from when sam could read the HR files (its hits name them): his 👎 form lists neither them
    nor any of their text now."""
    from tests.factories import make_answer

    record = make_answer(company["tenant"], question=QUESTION, user=company["users"]["sam"])
    assert "salaries.md" in json.dumps(record.hits)
    client.force_login(company["users"]["sam"])
    form = client.get(f"/t/acme/chat/answers/{record.public_id}/verdict/").content.decode()
    assert "handbook.md" in form and "salaries.md" not in form and CANARY not in form
    wrong = {"helpful": "0", "reason": "wrong_fact", "document_id": company["secret"].document_id}
    refused = client.post(f"/t/acme/chat/answers/{record.public_id}/verdict/", wrong)
    assert refused.status_code == 400 and "No such document" in refused.content.decode()


def test_a_key_can_ask_whom_it_acts_for(company):
    assert _client(company, "key-group").get("/api/v1/tenants/acme/").json()["acts_for"] == ["group:hr"]
    assert _client(company, "key-all").get("/api/v1/tenants/acme/").json()["sees_everything"] is True
    assert _client(company, "key-tenant").get("/api/v1/tenants/acme/").json()["sees_everything"] is False
    assert _client(company, "admin").get("/api/v1/tenants/acme/").json()["acts_for"] is None


def test_a_long_access_list_is_kept_whole(company):
    """A hundred groups with long names (the API's limit): thousands of characters of principals, on either DB."""
    tenant = company["tenant"]
    names = [f"department-{n:03d}-" + "x" * 30 for n in range(100)]
    for name in names:
        group_create(tenant=tenant, name=name)
    admin = CommittingAPIClient()
    admin.force_login(company["users"]["alice"])
    access = [f"group:{name}" for name in names]
    response = admin.patch(f"/api/v1/tenants/acme/documents/{company['secret'].public_id}/", {"access": access},
                           format="json")  # fmt: skip
    assert response.status_code == 200, response.content
    indexer.drain()
    assert Document.objects.get(pk=company["secret"].pk).reader_list == sorted(access)
