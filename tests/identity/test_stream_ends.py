"""Deprovisioning during an answer being streamed (issue 63): the answer already running stops at its next
sentence, says in-band that access ended, and is not recorded; the model stops writing. On the staff chat and on
the REST door with a key acting for the person, with the packaged model."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from chat.models import AnswerRecord
from tenants.services import api_key_issue, member_deprovision
from tests.factories import make_folder_source, make_member

QUESTION = "How many days of notice does a resignation need?"


def _events(chunks) -> list[str]:  # type: ignore[no-untyped-def]
    return [block.split("\n")[0].removeprefix("event: ") for block in b"".join(chunks).decode().strip().split("\n\n")]


@pytest.mark.slow
def test_a_leaver_s_answer_stops_at_its_next_sentence_on_every_streaming_door(tenant_a, tmp_path, chat_model):
    make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"handbook.md": (
        "# Handbook\n\nA resignation needs thirty days of notice, given in writing to your manager. "
        "During probation it needs seven days. Notice starts the day after the letter is received.\n")})  # fmt: skip
    dave = make_member(tenant_a, username="dave")
    browser = Client()
    browser.force_login(dave)
    _key, raw = api_key_issue(tenant=tenant_a, scope="read", acts_for=["user:dave"])
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")

    chat = browser.post("/t/acme/chat/ask/", {"question": QUESTION}).streaming_content
    rest = agent.post("/api/v1/tenants/acme/answer/", {"question": QUESTION, "stream": True},
                      format="json").streaming_content  # fmt: skip
    first = [next(chat), next(rest)]  # the sources: retrieval ran while the person was a member
    assert all(chunk.startswith(b"event: sources") for chunk in first)
    member_deprovision(tenant=tenant_a, user=dave, by="scim")
    for stream, head in ((chat, first[0]), (rest, first[1])):
        body = b"".join([head, *stream]).decode()
        assert _events([body.encode()]) == ["sources", "error"], body[-500:]
        assert "access to this workspace ended" in body
    assert not AnswerRecord.objects.filter(tenant=tenant_a).exists()
