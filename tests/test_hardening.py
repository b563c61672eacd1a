"""The surfaces a probe of issue 61 broke, each case against real servers on loopback (the allowed site on one port,
a forbidden one holding a canary on another): website reads that left their prefix, website faults (a compressed
bomb, a dripping page, hostile links, a page of links, robots.txt), page keys that flipped between syncs, a nested
YAML header that stopped a vault, a failed job the queue ran again, a deleted person's name reused, sessions without
a quota, a ledger offset past the end, and printf in a computed answer. Each failed on the code before the fix."""

from __future__ import annotations

import gzip
import posixpath
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote

import pytest
from django.core.management import call_command
from django.test import TestCase
from rest_framework.test import APIClient

from agent_sessions import services as sessions
from knowledge import compute, services, tasks
from knowledge.index import indexer
from knowledge.ingest import pipeline, sources
from knowledge.models import Document, IngestJob, JobFile, Source, Status
from knowledge.options import IngestOptions
from knowledge.search.retrieval import retrieve
from tenants.models import ApiKey, Membership
from tenants.principals import Viewer, viewer_for
from tenants.services import api_key_issue
from tests.factories import make_member
from tests.knowledge.test_obsidian import _write

CANARY = "quokka7731ember"
Answer = tuple[int, dict[str, str], bytes]


def _html(title: str, body: str) -> str:
    return f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1><p>{body}</p></main></body></html>"


def _as_servers_read(target: str) -> str:
    """The path a request names as common servers read it (nginx, most frameworks): percent-decoded, backslashes as
    slashes, dot segments resolved; then encoded again the one way the routes are written."""
    path = unquote(target.split("?", 1)[0]).replace("\\", "/")
    resolved = posixpath.normpath(path) + ("/" if path.endswith("/") and path != "/" else "")
    return quote(resolved if resolved.startswith("/") else "/" + resolved, safe="/")


class Server:
    """A site on 127.0.0.1: each path answers (status, headers, body), or a callable writes its own answer."""

    def __init__(self, routes: dict[str, Answer | Callable[[BaseHTTPRequestHandler], None]]) -> None:
        self.routes = routes
        self.log: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                path = _as_servers_read(self.path)
                server.log.append(path)
                route = server.routes.get(path)
                if callable(route):
                    route(self)
                    return
                status, headers, body = route or (404, {}, b"not found")
                self.send_response(status)
                for name, value in {"Content-Type": "text/html; charset=utf-8", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _page(title: str, body: str, links: str = "") -> Answer:
    return 200, {}, (_html(title, body).replace("</main>", links + "</main>")).encode()


@pytest.fixture
def forbidden():  # type: ignore[no-untyped-def]
    """A server no prefix allows, on its own port: the canary must never be read from it."""
    served = Server({path: _page("Secret", f"The vault code is {CANARY} and it must never be indexed.")
                     for path in ("/", "/docs/", "/docs/secret.html", "/secret.html", "/admin/keys.html")})  # fmt: skip
    yield served
    served.close()


def _sync(source: Source) -> IngestJob:
    kind, location = sources.sync_params(source, operator=False)
    job = IngestJob.objects.create(tenant=source.tenant, source=source, kind=kind,
                                   params={**IngestOptions().to_params(), **location})  # fmt: skip
    tasks.ingest_job_task(job.pk)
    indexer.drain()
    job.refresh_from_db()
    return job


def _indexed_text(source: Source) -> str:
    hits = retrieve(viewer=Viewer.everything(source.tenant), query="vault code never indexed", top_k=20)
    texts = [h.chunk.text for h in hits]
    chunks = Document.objects.filter(source=source).values_list("chunks__text", flat=True)
    return "\n".join([*texts, *(t or "" for t in chunks)])


@pytest.fixture
def site(settings):  # type: ignore[no-untyped-def]
    """Makes the allowed site of a test (robots.txt allows all unless the routes say otherwise), closed after it."""
    made: list[Server] = []

    def make(routes: dict[str, Any], prefix: str = "/docs/") -> Server:
        robots = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nAllow: /\n")
        made.append(Server({"/robots.txt": robots, **routes}))
        settings.RAG_ALLOWED_WEB_PREFIXES = [made[-1].base + prefix]
        return made[-1]

    yield make
    for served in made:
        served.close()


def _website(tenant: Any, served: Server, start: str = "/docs/index.html", name: str = "site") -> Source:
    return services.folder_source_create(tenant=tenant, name=name, path=served.base + start, kind="website")


# --- 2. a URL is what was checked ---------------------------------------------------------------------------------
def test_a_prefix_saved_without_its_slash_and_a_redirect_with_a_user_name_never_reach_another_port(
    tenant_a, settings, forbidden
):
    target = f"http://127.0.0.1:{{port}}@127.0.0.1:{forbidden.port}/docs/secret.html"
    served = Server({})
    served.routes.update({
        "/robots.txt": (200, {"Content-Type": "text/plain"}, b"User-agent: *\nAllow: /\n"),
        "/docs/index.html": _page("Handbook", "Welcome to the handbook of the company, read by all staff.",
                                  '<a href="moved.html">Moved</a>'),
        "/docs/moved.html": (302, {"Location": target.format(port=served.port)}, b""),
    })  # fmt: skip
    settings.RAG_ALLOWED_WEB_PREFIXES = [f"{served.base}"]  # saved without its trailing slash
    source = _website(tenant_a, served)
    job = _sync(source)
    assert forbidden.log == []  # the worker never connected to the other port
    assert CANARY not in _indexed_text(source)
    assert any("user name" in error["error"] for error in job.errors)


@pytest.mark.parametrize("link", ["%2e%2e/secret.html", ".%2e/secret.html", "..%2fsecret.html", "%2E%2E/secret.html"])
def test_percent_encoded_dot_segments_in_a_link_a_redirect_or_a_sitemap_never_leave_the_prefix(
    tenant_a, settings, site, link
):
    served = site({
        "/docs/index.html": _page("Handbook", "Welcome to the handbook of the company, read by all staff.",
                                  f'<a href="{link}">Up</a> <a href="away.html">Away</a>'),
        "/docs/away.html": (302, {"Location": link}, b""),
        "/docs/sitemap.xml": (200, {"Content-Type": "application/xml"},
                              f"<urlset><url><loc>{{base}}/docs/{link}</loc></url>"
                              f"<url><loc>{{base}}/docs/index.html</loc></url></urlset>".encode()),
        "/secret.html": _page("Secret", f"The vault code is {CANARY} and it must never be indexed."),
    })  # fmt: skip
    body = served.routes["/docs/sitemap.xml"][2].replace(b"{base}", served.base.encode())  # type: ignore[index]
    served.routes["/docs/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, body)
    for name, start in (("links", "/docs/index.html"), ("sitemap", "/docs/sitemap.xml")):
        source = _website(tenant_a, served, start, name)
        job = _sync(source)
        assert job.state in (IngestJob.State.SUCCEEDED, IngestJob.State.PARTIAL), (name, job.message)
        assert CANARY not in _indexed_text(source), name
    assert "/secret.html" not in served.log


# --- 3. website faults ------------------------------------------------------------------------------------------
def test_a_compressed_bomb_is_refused_while_it_inflates(tenant_a, settings, site):
    """Two layers of gzip: 1,8 KB on the wire, 100 MB once inflated. The page fails with its reason, counted as it
    inflates (never held whole), and the rest of the site is read."""
    bomb = gzip.compress(gzip.compress(b"<html><body>" + b"A" * 100_000_000 + b"</body></html>", 9), 9)
    assert len(bomb) < 200_000
    served = site({
        "/docs/index.html": _page("Handbook", "Welcome to the handbook of the company, read by all staff.",
                                  '<a href="bomb.html">Bomb</a> <a href="ok.html">Fine</a>'),
        "/docs/bomb.html": (200, {"Content-Encoding": "gzip, gzip"}, bomb),
        "/docs/ok.html": (200, {"Content-Encoding": "gzip"}, gzip.compress(_page(  # compressed, and fine
            "Shipping", "Standard shipping within Portugal costs 5.50 EUR and takes two days.")[2])),
    })  # fmt: skip
    settings.RAG_WEB_MAX_PAGE_BYTES = 5 * 1024 * 1024
    source = _website(tenant_a, served)
    job = _sync(source)
    assert any("bomb.html" in e["error"] and "decompressed" in e["error"] for e in job.errors), job.errors
    keys = set(Document.objects.filter(source=source).values_list("document_key", flat=True))
    assert keys == {"docs/index.html.md", "docs/ok.html.md"}


def test_a_page_that_drips_its_bytes_is_cut_at_the_pages_deadline_not_each_reads(tenant_a, settings, site):
    """A byte every 0.3 s keeps each read under its timeout for ever; the page's own deadline ends it."""

    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        try:
            for _ in range(100):
                handler.wfile.write(b"x")
                handler.wfile.flush()
                time.sleep(0.3)
        except OSError:
            pass  # the reader hung up: what the test wants

    served = site({
        "/docs/index.html": _page("Handbook", "Welcome to the handbook of the company, read by all staff.",
                                  '<a href="slow.html">Slow</a>'),
        "/docs/slow.html": drip,
    })  # fmt: skip
    settings.RAG_WEB_TIMEOUT_S = 2
    source = _website(tenant_a, served)
    job = _sync(source)
    assert any("slow.html" in e["error"] and "took over 2 s" in e["error"] for e in job.errors), job.errors
    assert Document.objects.filter(source=source, document_key="docs/index.html.md").exists()


def test_hostile_links_are_left_out_and_a_page_of_thousands_of_links_writes_a_short_record(tenant_a, settings, site):
    links = "".join(f'<a href="p{n}.html">{n}</a> ' for n in range(30_000))
    served = site({
        "/docs/index.html": _page("Handbook", "Welcome to the handbook of the company, read by all staff.",
                                  '<a href="\\..\\secret.html">Back</a> <a href="a\\b.html">Slash</a> '
                                  '<a href="http://x:1@127.0.0.1/">User</a> <a href="many.html">Many</a>'),
        "/docs/many.html": _page("Many", "A page with a great many links to pages of the site.", links),
    })  # fmt: skip
    settings.RAG_WEB_MAX_PAGES = 5
    source = _website(tenant_a, served)
    job = _sync(source)
    assert job.state in (IngestJob.State.SUCCEEDED, IngestJob.State.PARTIAL), job.message
    assert Document.objects.filter(source=source, document_key="docs/many.html.md").exists()
    assert JobFile.objects.filter(job=job).count() < 300
    assert len(str(job.skips)) < 100_000
    assert any("more links not followed" in skip["reason"] for skip in job.skips)
    assert any(skip["key"].startswith("… and") for skip in job.skips)  # the rest counted, not listed


def test_robots_txt_is_read_by_the_longest_match_and_an_unreachable_one_disallows_everything(tenant_a, settings, site):
    robots = b"User-agent: *\nDisallow: /docs/\nAllow: /docs/public/\n"  # first-match would disallow public/
    served = site({
        "/robots.txt": (200, {"Content-Type": "text/plain"}, robots),
        "/docs/public/index.html": _page("Public", "The public handbook page that robots.txt allows to read.",
                                         '<a href="/docs/private.html">Private</a>'),
        "/docs/private.html": _page("Private", "A page robots.txt keeps out of every crawler."),
    })  # fmt: skip
    source = _website(tenant_a, served, "/docs/public/index.html")
    _sync(source)
    keys = set(Document.objects.filter(source=source).values_list("document_key", flat=True))
    assert keys == {"docs/public/index.html.md"}
    served.routes["/robots.txt"] = (503, {}, b"down")
    other = _website(tenant_a, served, "/docs/public/index.html", "other")
    job = _sync(other)
    assert not Document.objects.filter(source=other).exists()
    assert [skip["reason"] for skip in job.skips] == ["disallowed by robots.txt"]


# --- 4. page keys escaped once --------------------------------------------------------------------------------------
def test_pages_with_spaces_and_accents_stay_live_across_three_syncs_and_the_index_is_clean(tenant_a, settings, site):
    served = site({
        "/docs/index.html": _page("Handbook", "Welcome to the handbook of the company, read by all staff.",
                                  '<a href="caf%C3%A9%20menu.html">Menu</a> <a href="caf\u00e9 hours.html">Hours</a>'
                                  ' <a href="100%25.html">Full</a>'),
        "/docs/caf%C3%A9%20menu.html": _page("Menu", "The canteen serves soup, salad and a dish of the day."),
        "/docs/caf%C3%A9%20hours.html": _page("Hours", "The canteen opens at noon and closes at three."),
        "/docs/100%25.html": _page("Full", "Attendance at the yearly meeting was one hundred percent."),
    })  # fmt: skip
    source = _website(tenant_a, served)
    for n in range(3):
        job = _sync(source)
        assert job.retired == 0, (n, job.errors)
        live = Document.objects.filter(source=source, status=Status.ACTIVE)
        shown = sorted(d.display_key for d in live)
        assert shown == ["docs/100%.html.md", "docs/café hours.html.md", "docs/café menu.html.md",
                         "docs/index.html.md"], (n, shown)  # fmt: skip
        assert all(d.version == 1 for d in live), n  # unchanged pages: no new version, nothing flips
    call_command("index_check", tenant_a.slug)  # CommandError on any drift between SQL and the store
    # a page's hit and citation carry its address, not only its key
    hits = retrieve(viewer=Viewer.everything(tenant_a), query="canteen soup salad dish of the day", top_k=3)
    located = {h.chunk.document.display_key: h.chunk.location()["url"] for h in hits}
    assert located["docs/café menu.html.md"] == f"{served.base}/docs/caf%C3%A9%20menu.html"


def test_a_short_pages_navigation_and_footer_are_not_indexed(tenant_a, settings, site):
    nav = '<nav><a href="index.html">Home</a> · <a href="hours.html">Hours</a> · Zebracrossing menu</nav>'
    chrome = '<div class="site-footer">© 2026 Example Corp · Privacy · Wombatfooter imprint</div>'
    page = (f"<html><head><title>Hours</title></head><body>{nav}<main><h1>Hours</h1><p>The canteen opens at noon."
            f"</p></main>{chrome}</body></html>").encode()  # fmt: skip
    served = site({"/docs/index.html": (200, {}, page)})
    source = _website(tenant_a, served)
    _sync(source)
    text = "\n".join(Document.objects.get(source=source).chunks.values_list("text", flat=True))
    assert "canteen opens at noon" in text
    assert "Zebracrossing" not in text and "Wombatfooter" not in text


# --- 6. one bad note never stops a vault ---------------------------------------------------------------------------
def test_a_deeply_nested_yaml_header_is_a_reason_on_its_note_and_the_vault_syncs(tenant_a, tmp_path, settings):
    settings.RAG_ALLOWED_FOLDER_ROOTS = [tmp_path.resolve()]
    root = tmp_path / "vault"
    nested = "[" * 4000 + "]" * 4000
    _write(root, {".obsidian/app.json": "{}", "Deep.md": f"---\ntags: {nested}\n---\n# Deep\n\nA note.\n",
                  "Fine.md": "# Fine\n\nThe office opens at nine every working day.\n"})  # fmt: skip
    source = pipeline.folder_source_get_or_create(tenant=tenant_a, name="vault", path=root, kind="obsidian")
    for _ in range(2):
        job = pipeline.sync_folder(source=source, root=root)
        indexer.drain()
        assert job.state in (IngestJob.State.SUCCEEDED, IngestJob.State.PARTIAL), job.message
    keys = dict(Document.objects.filter(source=source).values_list("document_key", "status"))
    assert keys == {"Deep.md": Status.ACTIVE, "Fine.md": Status.ACTIVE}


# --- 7. a job runs once unless someone asks again -------------------------------------------------------------------
def test_a_job_that_stopped_on_an_unexpected_error_runs_again_only_when_asked_and_says_so(tenant_a, tmp_path,
                                                                                          settings):  # fmt: skip
    assert settings.Q_CLUSTER["ack_failures"] is True  # the broker never hands a failed task back by itself
    source = services.source_create(tenant=tenant_a, kind="upload", name="uploads")
    folder = tmp_path / "stored"
    job = IngestJob.objects.create(tenant=tenant_a, source=source, kind=IngestJob.Kind.UPLOAD,
                                   params={"dir": str(folder), "files": ["a.md"]})  # fmt: skip
    with pytest.raises(FileNotFoundError):  # its stored file is gone: an error nobody planned for
        tasks.ingest_job_task(job.pk)
    job.refresh_from_db()
    assert job.state == IngestJob.State.FAILED and "unexpected error" in job.message
    failure, attempts = job.message, job.attempts
    tasks.ingest_job_task(job.pk)  # the task delivered again (a broker's redelivery): it does not run
    job.refresh_from_db()
    assert job.state == IngestJob.State.FAILED and job.attempts == attempts and job.message == failure
    folder.mkdir()
    (folder / "a.md").write_bytes(b"# A\n\nThe office opens at nine.\n")
    with TestCase.captureOnCommitCallbacks(execute=False):
        services.job_retry(tenant=tenant_a, job=job)
    job.refresh_from_db()
    assert job.state == IngestJob.State.QUEUED and job.message == "Retry 1, on request: queued."
    tasks.ingest_job_task(job.pk)
    indexer.drain()
    job.refresh_from_db()
    assert job.state == IngestJob.State.SUCCEEDED and job.attempts == attempts + 1
    assert failure not in job.message and "Retry 1" in job.message


# --- 8. identities are never reused; sessions have a quota --------------------------------------------------------
def test_a_person_created_under_a_deleted_accounts_name_inherits_nothing(company):
    tenant, hanna = company["tenant"], company["users"]["hanna"]
    secret = company["open"]
    services.document_set_access(tenant=tenant, document=secret, access=["user:hanna"])
    indexer.drain()
    key = ApiKey.objects.get(tenant=tenant, name="key-user")
    assert key.acts_for == ["user:hanna"]
    hanna.delete()
    indexer.drain()
    secret.refresh_from_db()
    assert "user:hanna" not in (secret.access or []) and "user:hanna" not in secret.reader_list
    key.refresh_from_db()
    assert key.acts_for == []  # holds `tenant` alone, as every key does: no longer anyone's
    newcomer = make_member(tenant, username="hanna")
    for viewer in (viewer_for(tenant=tenant, membership=Membership.objects.get(tenant=tenant, user=newcomer)),
                   viewer_for(tenant=tenant, api_key=key)):  # fmt: skip
        assert not viewer.sees(secret.reader_list)
        hits = retrieve(viewer=viewer, query="handbook", top_k=20)
        assert secret.document_id not in {h.chunk.document.document_id for h in hits}
    assert viewer_for(tenant=tenant, api_key=key).principals == frozenset({"tenant"})


def test_a_key_starts_at_most_its_quota_of_live_sessions_and_an_ended_one_frees_a_place(tenant_a, settings):
    settings.RAG_SESSION_MAX_PER_OWNER = 3
    _key, raw = api_key_issue(tenant=tenant_a, name="agent", scope="read")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    url = f"/api/v1/tenants/{tenant_a.slug}/sessions/"
    made = [client.post(url, {"purpose": f"task {n}"}, format="json") for n in range(3)]
    assert [r.status_code for r in made] == [201, 201, 201]
    refused = client.post(url, {"purpose": "one more"}, format="json")
    assert refused.status_code == 429 and "RAG_SESSION_MAX_PER_OWNER" in refused.json()["detail"]
    assert client.delete(f"{url}{made[0].json()['id']}/").status_code in (200, 204)
    assert client.post(url, {"purpose": "again"}, format="json").status_code == 201
    other, other_raw = api_key_issue(tenant=tenant_a, name="other", scope="read")
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {other_raw}")
    assert client.post(url, {"purpose": "its own"}, format="json").status_code == 201  # a quota each


def test_a_ledger_read_far_past_its_end_is_an_empty_page(tenant_a):
    from mcp_tools import operations

    key, _raw = api_key_issue(tenant=tenant_a, name="agent", scope="read")
    session = sessions.session_create(tenant=tenant_a, api_key=key, purpose="p")
    for offset in (10, 2**63, 10**30):
        page = operations.session_ledger(key, session=str(session.public_id), offset=offset)
        assert page["deliveries"] == [] and page["next_offset"] is None


# --- 8. the engine's limits hold for CPU and memory ----------------------------------------------------------------
@pytest.mark.parametrize("sql", [
    "SELECT printf('%.*c', 1000000000, Region) FROM data",
    "SELECT printf('%2000000000d', 1) FROM data",
    "SELECT format('%.*c', 1000000000, 'x') FROM data",
    "SELECT length(replace(replace(printf('%.*c', 900, 'x'), 'x', printf('%.*c', 900, 'y')), 'y', 'zz')) FROM data",
])  # fmt: skip
def test_printf_and_long_values_are_refused_by_the_engine_not_run_for_seconds(sql):
    class Table:
        columns = [{"name": "Region", "type": "text"}, {"name": "Sales", "type": "number"}]
        rows = [["North", "10"], ["South", "20"], ["West", "30"]]
        row_numbers = [2, 3, 4]

    with pytest.raises(compute.QueryRefused):
        compute.compute(Table, sql)
    assert compute.compute(Table, "SELECT printf('%s: %.1f', Region, Sales) FROM data").rows[0] == ["North: 10.0"]
