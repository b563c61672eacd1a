"""Malformed ids in query and form parameters answer 404, never 500."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile


def test_malformed_ids_in_parameters_answer_404_not_500(tenant_a, admin_a, client):  # type: ignore[no-untyped-def]
    client.force_login(admin_a)
    assert client.get("/t/acme/chat/?session=not-a-uuid").status_code == 404
    assert client.post("/t/acme/chat/ask/", {"question": "hi", "session": "x'--"}).status_code == 404
    upload = client.post("/t/acme/upload/", {"files": [SimpleUploadedFile("a.md", b"# A\n")], "source": "../../etc"})
    assert upload.status_code == 404


def test_pages_and_api_answers_carry_security_and_no_store_headers(tenant_a, admin_a, client):  # type: ignore[no-untyped-def]
    client.force_login(admin_a)
    for url in ("/t/acme/sources/", "/api/v1/tenants/acme/"):
        response = client.get(url)
        assert response.status_code == 200
        assert "script-src 'self'" in response["Content-Security-Policy"]
        assert "camera=()" in response["Permissions-Policy"]
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]


def test_huge_offsets_and_deeply_nested_json_answer_4xx_not_500(tenant_a):
    from rest_framework.test import APIClient

    from tenants.services import api_key_issue

    raw_key = api_key_issue(tenant=tenant_a)[1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw_key}")
    assert client.get("/api/v1/tenants/acme/documents/?offset=" + "9" * 21).status_code == 200
    nested = "[" * 100_000 + "]" * 100_000
    for url, auth in (("/api/v1/tenants/acme/retrieve/", f"Api-Key {raw_key}"),
                      ("/api/v1/tenants/acme/dify/retrieval", f"Bearer {raw_key}")):  # fmt: skip
        response = client.generic("POST", url, nested, content_type="application/json", HTTP_AUTHORIZATION=auth)
        assert 400 <= response.status_code < 500, (url, response.status_code)
