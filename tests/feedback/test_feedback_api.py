"""Agents report verdicts too: every /answer (JSON or streamed) is kept under an answer_id, and a write-scoped key
of the same tenant may judge it; the real packaged model answers, in its own process."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from chat.models import AnswerRecord, Verdict
from tenants.models import Membership
from tenants.services import api_key_issue
from tests.factories import make_folder_source, make_member

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("chat_model")]


def _client(tenant, scope: str = "write") -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {api_key_issue(tenant=tenant, scope=scope)[1]}")
    return client


def test_an_agent_reports_a_verdict_on_an_answer_id_with_a_write_key_of_its_tenant(tenant_a, tenant_b, tmp_path):
    files = {"returns.md": "# Returns\n\nReturns are accepted within thirty days of purchase.\n"}
    make_folder_source(tenant=tenant_a, root=tmp_path / "handbook", files=files)
    writer = _client(tenant_a)
    answered = writer.post("/api/v1/tenants/acme/answer/", {"question": "Within how many days are returns accepted?"},
                           format="json").json()  # fmt: skip
    record = AnswerRecord.objects.get(public_id=answered["answer_id"])
    assert record.channel == "api" and record.api_key is not None and record.answer == answered["answer"]
    assert [hit["rank"] for hit in record.hits] == list(range(1, len(record.hits) + 1))
    assert record.hits[0]["document_key"] == "returns.md" and record.index_state["documents"]
    streamed = writer.post("/api/v1/tenants/acme/answer/", {"question": "How are returns handled?", "stream": True},
                           format="json")  # fmt: skip
    done = b"".join(streamed.streaming_content).decode().strip().split("\n\n")[-1]
    assert done.startswith("event: done") and AnswerRecord.objects.filter(
        public_id=json.loads(done.split("data: ", 1)[1])["answer_id"]).exists()  # fmt: skip

    url = f"/api/v1/tenants/acme/answers/{answered['answer_id']}/verdicts/"
    wrong = {"helpful": False, "reason": "wrong_fact", "claims": [0], "correct_answer": "Thirty days."}
    read_only = _client(tenant_a, "read").post(url, wrong, format="json")
    assert read_only.status_code == 403 and "scope write" in read_only.json()["detail"]
    assert _client(tenant_b).post(url, wrong, format="json").status_code == 404
    assert _client(tenant_b).post(url.replace("acme", "globex"), wrong, format="json").status_code == 404
    bad = writer.post(url, {**wrong, "claims": [42]}, format="json")
    assert bad.status_code == 400 and "claims" in bad.json()
    unknown = writer.post(url, {**wrong, "reason": "meh"}, format="json")
    assert unknown.status_code == 400 and "reason" in unknown.json()
    malformed = writer.post(url, "{not json", content_type="application/json")
    assert malformed.status_code == 400
    assert writer.post("/api/v1/tenants/acme/answers/not-an-id/verdicts/", wrong, format="json").status_code == 404
    assert not Verdict.objects.exists()
    given = writer.post(url, {**wrong, "document_id": record.hits[0]["document_id"]}, format="json")
    assert given.status_code == 201, given.content
    body = given.json()
    assert body["queued_for_curation"] and body["claims"] == [0]
    assert body["document_id"] == record.hits[0]["document_id"]
    verdict = Verdict.objects.get()
    assert verdict.channel == "api" and verdict.api_key is not None and verdict.user is None
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    browser = APIClient()
    browser.force_login(admin)
    queue = browser.get("/t/acme/curation/").content.decode()
    assert f"API key {verdict.api_key.prefix}" in queue and "REST API" in queue
