"""The REST API: every endpoint, every error status, and no route leaks across tenants."""

from __future__ import annotations

import io
import zipfile

import pytest
from rest_framework.test import APIClient

from knowledge.models import Document, IngestJob, Source, Status
from tenants.services import api_key_issue
from tests.factories import CommittingClientMixin, make_folder_source, make_member


@pytest.fixture
def corpus_a(tenant_a, tmp_path, settings):  # type: ignore[no-untyped-def]
    files = {
        "install.md": "# Install\n\nRun the installer, then set the X-Api-Key header on every request.\n\n"
        "## Proxies\n\nBehind a proxy, export HTTPS_PROXY before installing.\n",
        "faq.md": "# FAQ\n\n## Passwords\n\nTo recover a forgotten password, open the account page.\n",
        "README.md": "# Acme agent\n\nThe Acme agent ships logs to the Acme cloud.\n\n## TODO\n\n- [ ] rotate keys\n",
        "src/auth.py": "def validate_token_signature(token, secret):\n"
        "    '''Check the HMAC of a token.'''\n    return token.sig == secret\n",
    }
    settings.RAG_ALLOWED_FOLDER_ROOTS = [(tmp_path / "allowed").resolve()]
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "allowed" / "handbook", files=files)
    return source


@pytest.fixture
def corpus_b(tenant_b, tmp_path):  # type: ignore[no-untyped-def]
    files = {"payroll.md": "# Payroll\n\nSalaries are paid on the 25th. Set the X-Api-Key header.\n"}
    source = make_folder_source(tenant=tenant_b, root=tmp_path / "globex", files=files, name="payroll")
    return source


@pytest.fixture
def key_a(tenant_a) -> str:  # type: ignore[no-untyped-def]
    return api_key_issue(tenant=tenant_a)[1]


@pytest.fixture
def key_b(tenant_b) -> str:  # type: ignore[no-untyped-def]
    return api_key_issue(tenant=tenant_b)[1]


class CommittingClient(CommittingClientMixin, APIClient):
    pass


def api(key: str | None) -> APIClient:
    client = CommittingClient()
    if key:
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {key}")
    return client


def test_retrieve_returns_located_hits_with_signals(corpus_a, key_a):
    response = api(key_a).post(
        "/api/v1/tenants/acme/retrieve/", {"query": "X-Api-Key header", "top_k": 3}, format="json"
    )
    assert response.status_code == 200
    body = response.json()
    assert body["query"] == "X-Api-Key header"
    hit = body["hits"][0]
    assert hit["document_key"] == "install.md" and hit["source_id"] == "src:acme:folder:handbook"
    assert set(hit) == {
        "chunk_id", "document_id", "source_id", "document_key", "title", "heading", "text", "score", "mode",
        "line_start", "line_end", "page", "page_start", "page_end", "page_label", "url", "tags", "critical", "version",
        "freshness", "signals", "table",
    }  # fmt: skip
    assert hit["freshness"]["status"] == "current" and hit["freshness"]["changed_at"]
    assert hit["chunk_id"].startswith("chk:doc:src:acme:folder:handbook:install.md:documental:")
    assert hit["signals"]["lexical_rank"] == 1
    assert set(hit["signals"]) - {"multilingual_rank"} == {"dense_rank", "lexical_rank", "boost"}
    assert hit["line_start"] >= 1 and hit["version"] == 1


def test_an_exact_identifier_wins_even_where_the_dense_leg_misses_it(corpus_a, key_a):
    response = api(key_a).post("/api/v1/tenants/acme/retrieve/", {"query": "validate_token_signature"}, format="json")
    top = response.json()["hits"][0]
    assert top["document_key"] == "src/auth.py" and top["signals"]["lexical_rank"] == 1


def test_a_paraphrase_finds_a_chunk_that_shares_no_words(corpus_a, key_a):
    query = {"query": "I can't remember what I type when I sign in"}
    top = api(key_a).post("/api/v1/tenants/acme/retrieve/", query, format="json").json()["hits"][0]
    assert top["document_key"] == "faq.md"
    assert top["signals"]["dense_rank"] == 1 and top["signals"]["lexical_rank"] is None


def test_retrieve_filters_by_mode_scope_and_tags(corpus_a, key_a, tenant_a):
    client = api(key_a)
    code = client.post("/api/v1/tenants/acme/retrieve/", {"query": "token", "mode": "code"}, format="json").json()
    assert {h["mode"] for h in code["hits"]} == {"code"}
    scoped = client.post(
        "/api/v1/tenants/acme/retrieve/",
        {"query": "install", "scope": {"source_ids": ["src:acme:folder:other"]}},
        format="json",
    ).json()
    assert scoped["hits"] == []
    document = Document.objects.get(document_key="faq.md")
    client.patch(f"/api/v1/tenants/acme/documents/{document.public_id}/", {"tags": ["Support"]}, format="json")
    tagged = client.post(
        "/api/v1/tenants/acme/retrieve/", {"query": "install", "scope": {"tags": ["support"]}}, format="json"
    )
    assert {h["document_key"] for h in tagged.json()["hits"]} == {"faq.md"}
    assert tagged.json()["hits"][0]["tags"] == ["support"]


def test_a_critical_chunk_gets_the_documented_boost(corpus_a, key_a, settings):
    client = api(key_a)
    before = client.post("/api/v1/tenants/acme/retrieve/", {"query": "proxy installer"}, format="json").json()["hits"]
    document = Document.objects.get(document_key="README.md")
    client.patch(f"/api/v1/tenants/acme/documents/{document.public_id}/", {"critical": True}, format="json")
    after = client.post("/api/v1/tenants/acme/retrieve/", {"query": "proxy installer"}, format="json").json()["hits"]
    readme_before = next(h for h in before if h["document_key"] == "README.md")
    readme_after = next(h for h in after if h["document_key"] == "README.md")
    assert readme_after["critical"] and readme_after["signals"]["boost"] == settings.RAG_CRITICAL_BOOST
    assert readme_after["score"] == pytest.approx(readme_before["score"] + settings.RAG_CRITICAL_BOOST, abs=1e-5)


def test_a_critical_mark_lifts_a_chunk_among_relevant_ones_never_an_unrelated_one_above_them(tenant_a, key_a,
                                                                                               tmp_path):  # fmt: skip
    files = {f"threads-{n}.md": f"# Threads, part {n}\n\nThe library is thread safe when each thread uses its own "
             f"context object; note {n} explains locking around shared handles.\n" for n in range(12)}  # fmt: skip
    files["mime.md"] = "# MIME databases\n\nThe MIME type table maps file extensions to content types.\n"
    source = make_folder_source(tenant=tenant_a, root=tmp_path / "kb", files=files)
    client = api(key_a)
    for key in ("mime.md", "threads-7.md"):
        document = Document.objects.get(source=source, document_key=key)
        client.patch(f"/api/v1/tenants/acme/documents/{document.public_id}/", {"critical": True}, format="json")
    hits = client.post("/api/v1/tenants/acme/retrieve/", {"query": "Is the library thread safe?", "top_k": 20},
                       format="json").json()["hits"]  # fmt: skip
    by_key = {hit["document_key"]: hit for hit in hits}
    assert hits[0]["document_key"] == "threads-7.md" and by_key["threads-7.md"]["signals"]["boost"] > 0
    if "mime.md" in by_key:  # the unrelated critical page may be listed, never lifted above a relevant page
        mime = by_key["mime.md"]
        assert mime["signals"]["boost"] == 0
        assert all(hits.index(hit) < hits.index(mime) for hit in hits if hit["document_key"].startswith("threads"))


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": 51}, "top_k"),
        ({"query": "x" * 2001}, "query"),
        ({"query": "x", "mode": "poetry"}, "mode"),
        ({"query": "x", "scope": {"tags": "not-a-list"}}, "scope"),
    ],
)
def test_malformed_retrieve_requests_get_400_with_field_messages(tenant_a, key_a, body, field):
    response = api(key_a).post("/api/v1/tenants/acme/retrieve/", body, format="json")
    assert response.status_code == 400 and field in response.json()


def test_bootstrap_returns_a_traceable_map_with_critical_points_first(corpus_a, key_a):
    client = api(key_a)
    document = Document.objects.get(document_key="install.md")
    client.patch(f"/api/v1/tenants/acme/documents/{document.public_id}/", {"critical": True}, format="json")
    response = client.post("/api/v1/tenants/acme/bootstrap/", {"intent": "set up the agent"}, format="json")
    assert response.status_code == 200
    pack = response.json()
    assert set(pack) >= {"mode", "intent", "summary", "topics", "critical_points", "items", "follow_up_refs", "scope"}
    assert pack["critical_points"] and {c["document_key"] for c in pack["critical_points"]} == {"install.md"}
    assert "Acme agent ships logs" in pack["summary"]
    kinds = {i["kind"] for i in pack["items"]} | {k for i in pack["items"] + pack["critical_points"] for k in i["also"]}
    assert kinds >= {"intent", "overview", "pending"}
    assert all(i["chunk_id"].startswith("chk:") for i in pack["items"])
    assert any(t["topic"] == "Install" for t in pack["topics"])
    assert pack["scope"]["documents"] == 4 and pack["mode"] in ("documental", "mixed")


def test_sources_crud_upload_sync_and_jobs(corpus_a, key_a, tmp_path):
    client = api(key_a)
    listing = client.get("/api/v1/tenants/acme/sources/").json()
    assert [s["source_id"] for s in listing] == ["src:acme:folder:handbook"]
    created = client.post(
        "/api/v1/tenants/acme/sources/", {"kind": "upload", "name": "Product Sheets", "tags": ["Sales"]}, format="json"
    )
    assert created.status_code == 201 and created.json()["source_id"] == "src:acme:upload:product-sheets"
    assert created.json()["ocr_languages"] == "spa+eng"  # scanned pages: Spanish first keeps its accents
    source_id = created.json()["id"]
    hostile = client.patch(
        f"/api/v1/tenants/acme/sources/{source_id}/", {"ocr_languages": "eng;rm -rf /"}, format="json"
    )
    assert hostile.status_code == 400 and "ocr_languages" in hostile.json()
    french = client.patch(f"/api/v1/tenants/acme/sources/{source_id}/", {"ocr_languages": "fra+eng"}, format="json")
    assert french.status_code == 200 and Source.objects.get(public_id=source_id).ocr_languages == "fra+eng"
    duplicate = client.post(
        "/api/v1/tenants/acme/sources/", {"kind": "upload", "name": "product sheets"}, format="json"
    )
    assert duplicate.status_code == 400 and "name" in duplicate.json()
    external = client.post("/api/v1/tenants/acme/sources/", {"kind": "external", "name": "links"}, format="json")
    assert external.status_code == 400 and "kind" in external.json()  # only the registry's creatable kinds
    outside = client.post(
        "/api/v1/tenants/acme/sources/", {"kind": "folder", "name": "etc", "path": "/etc"}, format="json"
    )
    assert outside.status_code == 400 and "outside" in outside.json()["path"][0]

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("sheets/widget.md", "# Widget\n\nThe widget costs 40 euros and has a 3 year warranty.\n")
    buffer.seek(0)
    buffer.name = "sheets.zip"
    upload = client.post(f"/api/v1/tenants/acme/sources/{source_id}/upload/", {"files": [buffer]}, format="multipart")
    assert upload.status_code == 202
    job = client.get(f"/api/v1/tenants/acme/jobs/{upload.json()['id']}/").json()
    assert job["status"] == "succeeded" and job["counts"]["added"] == 1 and job["progress"]["percent"] == 100.0
    hits = client.post("/api/v1/tenants/acme/retrieve/", {"query": "widget warranty"}, format="json").json()["hits"]
    assert hits[0]["document_key"] == "sheets/widget.md" and hits[0]["tags"] == ["sales"]

    handbook = Source.objects.get(source_id="src:acme:folder:handbook")
    sync = client.post(f"/api/v1/tenants/acme/sources/{handbook.public_id}/sync/")
    assert sync.status_code == 202
    assert client.get(f"/api/v1/tenants/acme/jobs/{sync.json()['id']}/").json()["counts"]["unchanged"] == 4
    not_folder = client.post(f"/api/v1/tenants/acme/sources/{source_id}/sync/")
    assert not_folder.status_code == 400
    assert len(client.get("/api/v1/tenants/acme/jobs/").json()) == 3  # the fixture sync, the upload, the re-sync

    patched = client.patch(f"/api/v1/tenants/acme/sources/{source_id}/", {"tags": ["pricing"]}, format="json")
    assert patched.json()["tags"] == ["pricing"]
    assert client.delete(f"/api/v1/tenants/acme/sources/{source_id}/").status_code == 204
    hits = client.post("/api/v1/tenants/acme/retrieve/", {"query": "widget warranty"}, format="json").json()["hits"]
    assert all(h["document_key"] != "sheets/widget.md" for h in hits)


def test_upload_errors(corpus_a, key_a, settings):
    client = api(key_a)
    source = Source.objects.get(source_id="src:acme:folder:handbook")
    url = f"/api/v1/tenants/acme/sources/{source.public_id}/upload/"
    assert client.post(url, {}, format="multipart").status_code == 400
    settings.RAG_MAX_UPLOAD_BYTES = 10
    big = io.BytesIO(b"x" * 100)
    big.name = "big.md"
    response = client.post(url, {"files": [big]}, format="multipart")
    assert response.status_code == 400 and "upload limit" in response.json()["files"][0]


def test_documents_list_detail_retire_and_curation(corpus_a, key_a):
    client = api(key_a)
    listing = client.get("/api/v1/tenants/acme/documents/", {"mode": "code"}).json()
    assert listing["count"] == 1 and listing["results"][0]["document_key"] == "src/auth.py"
    document = Document.objects.get(document_key="faq.md")
    detail = client.get(f"/api/v1/tenants/acme/documents/{document.public_id}/").json()
    assert detail["versions"][0]["status"] == "active" and detail["document_id"] == document.document_id
    retired = client.post(f"/api/v1/tenants/acme/documents/{document.public_id}/retire/").json()
    assert retired["status"] == "retired"
    hits = client.post("/api/v1/tenants/acme/retrieve/", {"query": "forgotten password"}, format="json").json()["hits"]
    assert all(h["document_key"] != "faq.md" for h in hits)
    assert client.get("/api/v1/tenants/acme/documents/", {"status": "retired"}).json()["count"] == 1
    assert client.get("/api/v1/tenants/acme/documents/", {"limit": "x"}).status_code == 400


def test_schema_and_interactive_docs_are_served(client, admin_a):
    schema = client.get("/api/v1/schema/")
    assert schema.status_code == 200 and b"/api/v1/tenants/{tenant_slug}/retrieve/" in schema.content
    client.force_login(admin_a)
    docs = client.get("/api/v1/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


# --- nothing leaks across tenants ------------------------------------------------------------
def _routes(tenant_slug: str, source: Source, document: Document, job: IngestJob) -> list[tuple[str, str, dict]]:
    base = f"/api/v1/tenants/{tenant_slug}"
    return [
        ("get", f"{base}/", {}),
        ("post", f"{base}/retrieve/", {"query": "payroll salaries"}),
        ("post", f"{base}/bootstrap/", {}),
        ("get", f"{base}/sources/", {}),
        ("post", f"{base}/sources/", {"kind": "upload", "name": "x"}),
        ("get", f"{base}/sources/{source.public_id}/", {}),
        ("patch", f"{base}/sources/{source.public_id}/", {"tags": ["x"]}),
        ("delete", f"{base}/sources/{source.public_id}/", {}),
        ("post", f"{base}/sources/{source.public_id}/sync/", {}),
        ("post", f"{base}/sources/{source.public_id}/upload/", {}),
        ("get", f"{base}/jobs/", {}),
        ("get", f"{base}/jobs/{job.public_id}/", {}),
        ("post", f"{base}/jobs/{job.public_id}/cancel/", {}),
        ("post", f"{base}/jobs/{job.public_id}/retry/", {}),
        ("get", f"{base}/documents/", {}),
        ("get", f"{base}/documents/{document.public_id}/", {}),
        ("patch", f"{base}/documents/{document.public_id}/", {"critical": True}),
        ("post", f"{base}/documents/{document.public_id}/retire/", {}),
    ]


@pytest.fixture
def globex_objects(corpus_b, tenant_b):  # type: ignore[no-untyped-def]
    document = Document.objects.for_tenant(tenant_b).get()
    job = IngestJob.objects.for_tenant(tenant_b).get()
    return corpus_b, document, job


def _call(client: APIClient, method: str, url: str, body: dict):  # type: ignore[no-untyped-def]
    return getattr(client, method)(url, body, format="json") if body else getattr(client, method)(url)


def test_another_tenants_key_gets_404_on_every_route_and_changes_nothing(corpus_a, globex_objects, key_a, tenant_b):
    source, document, job = globex_objects
    for method, url, body in _routes("globex", source, document, job):
        response = _call(api(key_a), method, url, body)
        assert response.status_code == 404, (method, url, response.status_code)
        assert b"payroll" not in response.content.lower() and b"globex" not in response.content.lower()
    # acme's key naming globex objects under acme's own slug: still 404 (objects are looked up in acme)
    for method, url, body in _routes("acme", source, document, job)[5:]:
        if "/sources/" in url and url.endswith("/sources/") or url.endswith("/jobs/") or url.endswith("/documents/"):
            continue
        assert _call(api(key_a), method, url, body).status_code == 404, (method, url)
    document.refresh_from_db()
    assert document.status == Status.ACTIVE and not document.critical
    assert Source.objects.filter(pk=source.pk).exists()


def test_no_key_a_wrong_key_and_a_revoked_key_are_refused_everywhere(globex_objects, tenant_b, settings):
    settings.RAG_API_KEY_FAILURE_LIMIT = 10_000  # every route, twice: far more than guessing is allowed
    source, document, job = globex_objects
    api_key, revoked = api_key_issue(tenant=tenant_b)
    api_key.revoke()
    for key, expected in ((None, {401, 403}), ("rag_not-a-key", {401}), (revoked, {401})):
        for method, url, body in _routes("globex", source, document, job):
            response = _call(api(key), method, url, body)
            assert response.status_code in expected, (key, method, url, response.status_code)


def test_an_unknown_slug_answers_like_a_foreign_one(globex_objects, key_b):
    source, document, job = globex_objects
    for method, url, body in _routes("nobody", source, document, job):
        assert _call(api(key_b), method, url, body).status_code == 404


def test_session_users_need_a_membership(corpus_a, tenant_a, tenant_b):
    member, stranger = APIClient(), APIClient()
    member.force_login(make_member(tenant_a))
    stranger.force_login(make_member(tenant_b))
    assert member.post("/api/v1/tenants/acme/retrieve/", {"query": "install"}, format="json").status_code == 200
    assert stranger.post("/api/v1/tenants/acme/retrieve/", {"query": "install"}, format="json").status_code == 404


def test_throttling_is_per_api_key(corpus_a, key_a, tenant_a, settings):
    from rest_framework.settings import api_settings

    from tenants import counters
    from tenants.throttling import ApiKeyRateThrottle

    counters.reset()
    ApiKeyRateThrottle.THROTTLE_RATES = {**api_settings.DEFAULT_THROTTLE_RATES, "api_key": "3/min"}
    try:
        other_key = api_key_issue(tenant=tenant_a)[1]
        codes = [api(key_a).get("/api/v1/tenants/acme/").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        assert api(other_key).get("/api/v1/tenants/acme/").status_code == 200
    finally:
        ApiKeyRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
        counters.reset()


# --- Dify External Knowledge API -------------------------------------------------------------
def dify(key: str | None, slug: str, body: dict, scheme: str = "Bearer"):  # type: ignore[no-untyped-def]
    client = APIClient()
    if key is not None:
        client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    return client.post(f"/api/v1/tenants/{slug}/dify/retrieval", body, format="json")


DIFY_BODY = {
    "knowledge_id": "handbook",
    "query": "X-Api-Key header",
    "retrieval_setting": {"top_k": 3, "score_threshold": 0.0},
}


def test_dify_retrieval_returns_records(corpus_a, key_a):
    response = dify(key_a, "acme", DIFY_BODY)
    assert response.status_code == 200
    record = response.json()["records"][0]
    assert set(record) == {"content", "score", "title", "metadata"}
    assert 0 < record["score"] <= 1 and record["metadata"]["path"] == "install.md"
    by_id = dify(key_a, "acme", {**DIFY_BODY, "knowledge_id": "src:acme:folder:handbook"}).json()["records"]
    assert by_id[0]["metadata"]["path"] == "install.md"
    strict = dify(key_a, "acme", {**DIFY_BODY, "retrieval_setting": {"top_k": 3, "score_threshold": 0.99}})
    assert all(r["score"] >= 0.99 for r in strict.json()["records"])


def test_dify_errors_use_difys_shape(corpus_a, corpus_b, key_a, key_b):
    assert dify(None, "acme", DIFY_BODY).json()["error_code"] == 1001
    assert dify(key_a, "acme", DIFY_BODY, scheme="Api-Key").json()["error_code"] == 1001
    assert dify("rag_wrong", "acme", DIFY_BODY).json() == {"error_code": 1002, "error_msg": "Authorization failed."}
    assert dify(key_b, "acme", DIFY_BODY).status_code == 403  # globex's key on acme
    missing = dify(key_a, "acme", {**DIFY_BODY, "knowledge_id": "payroll"})  # globex's source name
    assert missing.status_code == 404 and missing.json()["error_code"] == 2001
    bad = dify(key_a, "acme", {"knowledge_id": "handbook", "query": "x"})
    assert bad.status_code == 400 and "error_msg" in bad.json()


def test_an_oversized_upload_request_is_refused_before_it_is_read(corpus_a, key_a, settings):
    settings.RAG_MAX_REQUEST_BYTES = 1000
    source = Source.objects.get(source_id="src:acme:folder:handbook")
    big = io.BytesIO(b"x" * 5000)
    big.name = "big.md"
    response = api(key_a).post(
        f"/api/v1/tenants/acme/sources/{source.public_id}/upload/", {"files": [big]}, format="multipart"
    )
    assert response.status_code == 413 and "at most" in response.json()["detail"]
    assert not IngestJob.objects.filter(kind="upload").exists()


def test_guessing_api_keys_is_throttled_and_logged_on_every_endpoint(tenant_a, settings, caplog):
    """After RAG_API_KEY_FAILURE_LIMIT wrong keys from one address, that address's wrong keys get 429 with
    Retry-After until the window ends, while a right key still works; Dify's Bearer endpoint counts the same
    guesses."""
    settings.RAG_API_KEY_FAILURE_LIMIT = 5
    good = api_key_issue(tenant=tenant_a)[1]
    for n in range(3):
        assert api(f"rag_guess-{n}").get("/api/v1/tenants/acme/").status_code == 401
    for n in range(2):
        assert dify(f"rag_guess-bearer-{n}", "acme", DIFY_BODY).json()["error_code"] == 1002
    locked = api("rag_guess-one-more").get("/api/v1/tenants/acme/")
    assert locked.status_code == 429 and int(locked["Retry-After"]) > 0
    assert dify("rag_guess-bearer-more", "acme", DIFY_BODY).status_code == 429
    # The address's wrong keys never lock out a valid key (the same NAT, a spoofed header).
    assert api(good).get("/api/v1/tenants/acme/").status_code == 200
    assert dify(good, "acme", DIFY_BODY).status_code != 429
    assert "Wrong or revoked API key" in caplog.text and "rag_gues" in caplog.text

    from tenants import counters

    counters.reset()  # the window has passed
    assert api("rag_guess-after").get("/api/v1/tenants/acme/").status_code == 401


def test_the_dify_endpoint_is_rate_limited_per_key_like_the_rest(tenant_a):
    from rest_framework.settings import api_settings

    from tenants.throttling import ApiKeyRateThrottle

    ApiKeyRateThrottle.THROTTLE_RATES = {**api_settings.DEFAULT_THROTTLE_RATES, "api_key": "3/min"}
    try:
        good = api_key_issue(tenant=tenant_a)[1]
        codes = [dify(good, "acme", {**DIFY_BODY, "knowledge_id": "no-such-kb"}).status_code for _ in range(4)]
        assert codes == [404, 404, 404, 429]
    finally:
        ApiKeyRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES


def test_specific_retrieval_finds_the_code_and_the_open_items_a_question_asks_for(corpus_a, key_a):
    """`specific`: "where is X implemented" searches the code on its own and lifts code chunks; a question about
    pending work lifts list items; the question's own ranks stay in the signals."""
    client = api(key_a)
    question = {"query": "Where is the token signature checked?", "top_k": 2, "specific": True}
    where = client.post("/api/v1/tenants/acme/retrieve/", question, format="json").json()
    first = where["hits"][0]
    assert first["document_key"] == "src/auth.py" and first["mode"] == "code"
    assert first["signals"]["boost"] > 0 and first["signals"]["dense_rank"] is not None
    question = {"query": "What pending tasks remain?", "top_k": 1, "specific": True}
    pending = client.post("/api/v1/tenants/acme/retrieve/", question, format="json").json()
    assert pending["hits"][0]["document_key"] == "README.md" and "rotate keys" in pending["hits"][0]["text"]


def test_rest_takes_a_bearer_key_too_and_a_wrong_key_is_told_it_was_wrong(corpus_a, key_a):
    """Issue 50: the keys page named only Api-Key while the OpenAI door takes Bearer; a wrong Bearer key on REST
    answered "Authentication credentials were not provided"."""
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {key_a}")
    assert bearer.post("/api/v1/tenants/acme/retrieve/", {"query": "install"}, format="json").status_code == 200
    for scheme in ("Bearer", "Api-Key"):
        wrong = APIClient()
        wrong.credentials(HTTP_AUTHORIZATION=f"{scheme} rag_not-a-key")
        response = wrong.post("/api/v1/tenants/acme/retrieve/", {"query": "install"}, format="json")
        assert response.status_code == 401 and response.json() == {"detail": "Invalid or revoked API key."}, scheme
    nothing = APIClient().post("/api/v1/tenants/acme/retrieve/", {"query": "install"}, format="json")
    assert nothing.status_code in (401, 403) and "not provided" in nothing.json()["detail"]
