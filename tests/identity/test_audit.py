"""The audit stream (issue 63): sign-ins (password or provider, succeeded or refused), provisioning and membership
changes, key use and refusal, and every "see as", one JSON object per line in the file RAG_AUDIT_LOG names —
never a password, a key or a token."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.test import Client

from core.audit import handler_config
from identity import people
from identity.models import Provider
from tenants.services import api_key_issue
from tests.factories import make_folder_source, make_member


def _lines(since: int) -> list[dict[str, object]]:
    path = Path(settings.RAG_AUDIT_LOG)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[since:]]


def _count() -> int:
    path = Path(settings.RAG_AUDIT_LOG)
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def test_sign_ins_provisioning_key_use_access_changes_and_see_as_are_json_lines_without_secrets(tenant_a, tmp_path):
    before = _count()
    admin = make_member(tenant_a, role="admin", username="ana")
    Client().post("/accounts/login/", {"username": "ana", "password": "not-her-password"})
    Client().post("/accounts/login/", {"username": "ana", "password": "pw-for-tests-123"})
    _key, raw = api_key_issue(tenant=tenant_a, name="bot")
    Client().get("/api/v1/tenants/acme/sources/", HTTP_AUTHORIZATION=f"Api-Key {raw}")
    Client().get("/api/v1/tenants/acme/sources/", HTTP_AUTHORIZATION="Api-Key rag_wrongwrongwrong")
    provider = Provider.objects.create(tenant=tenant_a, name="Okta", slug="okta", issuer="https://idp.example",
                                       client_id="c", allowed_domains="acme.example")  # fmt: skip
    people.admit(provider, people.Person(subject="00u1", username="ben", email="ben@acme.example"))
    try:
        people.admit(provider, people.Person(subject="00u2", username="eve", email="eve@evil.example"))
    except people.Refused:
        pass
    browser = Client()
    browser.force_login(admin)
    browser.get("/t/acme/see-as/", {"as": "user:ben", "q": "holidays"})
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files={"a.md": "# A\n\nAlpha.\n"})
    saved = browser.post(f"/t/acme/sources/{source.public_id}/access/", {"access": "user:ben"})
    assert saved.status_code == 200 and "applying to 1 document" in saved.content.decode()  # the payload update waits

    lines = _lines(before)
    events = [(line["event"], line["outcome"]) for line in lines]
    for expected in [("sign_in", "refused"), ("sign_in", "ok"), ("key.used", "ok"), ("key.refused", "refused"),
                     ("member.provisioned", "ok"), ("member.sign_in_refused", "refused"), ("see_as", "ok"),
                     ("member.see_as", "ok"), ("access.changed", "ok")]:  # fmt: skip
        assert expected in events, (expected, events)
    used = next(line for line in lines if line["event"] == "key.used")
    assert used["tenant"] == "acme" and used["actor"].startswith("key:") and raw.startswith(used["actor"][4:])
    assert used["path"] == "/api/v1/tenants/acme/sources/"
    seen = next(line for line in lines if line["event"] == "see_as")
    assert seen["actor"] == "ana" and seen["seen_as"] == "user:ben" and seen["question"] == "holidays"
    changed = next(line for line in lines if line["event"] == "access.changed")
    assert changed["actor"] == "ana" and changed["before"] == ["tenant"] and changed["after"] == ["user:ben"]
    text = Path(settings.RAG_AUDIT_LOG).read_text(encoding="utf-8")
    assert raw not in text and "pw-for-tests-123" not in text and "not-her-password" not in text


def test_the_stream_goes_to_a_file_to_stdout_or_nowhere():
    assert handler_config("/var/log/ragsite/audit.jsonl")["filename"] == "/var/log/ragsite/audit.jsonl"
    assert handler_config("-")["stream"] == "ext://sys.stdout"
    assert handler_config("off")["class"] == "logging.NullHandler"
