"""Malformed ids in query and form parameters answer 404, never 500."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile


def test_malformed_ids_in_parameters_answer_404_not_500(tenant_a, admin_a, client):  # type: ignore[no-untyped-def]
    client.force_login(admin_a)
    assert client.get("/t/acme/chat/?session=not-a-uuid").status_code == 404
    assert client.post("/t/acme/chat/ask/", {"question": "hi", "session": "x'--"}).status_code == 404
    upload = client.post("/t/acme/upload/", {"files": [SimpleUploadedFile("a.md", b"# A\n")], "source": "../../etc"})
    assert upload.status_code == 404
