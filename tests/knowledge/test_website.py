"""Website sources (knowledge/ingest/website.py) against a real HTTP server in the test, on loopback, which the
test's RAG_ALLOWED_WEB_PREFIXES names explicitly: robots.txt, ETag re-syncs (304 reads nothing), removed pages
retired, a redirect to a host not allowed refused, the page cap, and the location checks; the sync runs through the
source-kind registry (knowledge/ingest/sources.py) as the worker runs it."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from knowledge import services
from knowledge.index import indexer
from knowledge.ingest import sources
from knowledge.locations import FolderNotAllowed, web_location_check
from knowledge.models import Document, IngestJob, JobFile, Source, Status
from knowledge.options import IngestOptions
from knowledge.search.retrieval import retrieve
from tenants.models import Membership
from tenants.principals import Viewer
from tests.factories import make_member

MENU = '<nav><a href="/docs/index.html">Home</a> · <a href="/docs/a.html">A</a></nav>'
FOOTER = "<footer>© 2026 Example Corp · Privacy · Imprint · Careers</footer>"


def _page(title: str, body: str, links: str = "") -> str:
    return (f"<html><head><title>{title}</title></head><body>{MENU}<main><h1>{title}</h1>{body}{links}</main>"
            f"{FOOTER}</body></html>")  # fmt: skip


SITE = {
    "/robots.txt": "User-agent: *\nDisallow: /docs/private\n",
    "/docs/index.html": _page(
        "Handbook",
        "<p>Welcome to the Example Corp handbook for every employee of ours.</p>",
        '<ul><li><a href="a.html">Shipping</a></li><li><a href="b.html">Returns</a></li>'
        '<li><a href="private.html">Private</a></li><li><a href="moved.html">Moved</a></li>'
        '<li><a href="/outside.html">Outside</a></li><li><a href="c.html?page=2">Query</a></li>'
        "</ul>",
    ),
    "/docs/a.html": _page(
        "Shipping",
        "<p>Standard shipping within Portugal costs 5.50 EUR and takes two working "
        "days. Orders over 60 EUR ship free of charge to every district.</p>",
    ),
    "/docs/b.html": _page(
        "Returns",
        "<p>Returns are accepted within 30 days of delivery when the item is unused "
        "and comes in its original box with the receipt.</p>",
    ),
    "/docs/private.html": _page("Private", "<p>Salaries of the board members for the coming year are secret.</p>"),
    "/outside.html": _page("Outside", "<p>This page is outside the handbook and must never be read.</p>"),
}


class Site:
    """A small site on 127.0.0.1: pages with ETags (a conditional GET answers 304), a redirect to another host,
    and a log of what was requested and answered."""

    def __init__(self) -> None:
        self.pages = dict(SITE)
        self.log: list[tuple[str, int]] = []
        self.redirect_to = ""
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                path = self.path
                if path == "/docs/moved.html" and site.redirect_to:
                    self._answer(302, b"", {"Location": site.redirect_to})
                    return
                if path not in site.pages:
                    self._answer(404, b"not found")
                    return
                body = site.pages[path].encode()
                etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
                if self.headers.get("If-None-Match") == etag:
                    self._answer(304, b"", {"ETag": etag})
                    return
                kind = "text/plain" if path.endswith(".txt") else "text/html; charset=utf-8"
                self._answer(200, body, {"ETag": etag, "Content-Type": kind})

            def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                site.log.append((self.path, status))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site(settings):  # type: ignore[no-untyped-def]
    served = Site()
    settings.RAG_ALLOWED_WEB_PREFIXES = [f"{served.base}/docs/"]  # loopback, named explicitly
    yield served
    served.close()


def _sync(source: Source) -> IngestJob:
    kind, location = sources.sync_params(source, operator=False)
    job = IngestJob.objects.create(tenant=source.tenant, source=source, kind=kind,
                                   params={**IngestOptions().to_params(), **location})  # fmt: skip
    sources.run_sync(job, IngestOptions())  # as the worker runs it: checked again, then the kind's sync
    job.refresh_from_db()
    indexer.drain()
    return job


def _files(job: IngestJob) -> dict[str, tuple[str, str]]:
    return {f.key: (f.status, f.reason) for f in JobFile.objects.filter(job=job)}


def test_a_website_is_read_within_its_prefix_honouring_robots_and_resynced_by_etag(tenant_a, site):
    source = services.folder_source_create(tenant=tenant_a, name="handbook", path=f"{site.base}/docs/index.html",
                                           kind="website")  # fmt: skip
    first = _sync(source)
    assert first.state == "succeeded", first.message
    host = "docs"  # a page's key is its path on the site; its URL is its location
    keys = set(Document.objects.filter(source=source, status=Status.ACTIVE).values_list("document_key", flat=True))
    assert keys == {f"{host}/index.html.md", f"{host}/a.html.md", f"{host}/b.html.md"}
    requested = {path for path, _ in site.log}
    assert "/docs/private.html" not in requested and "/outside.html" not in requested  # robots.txt; the prefix
    assert not any("?" in path for path in requested)  # a query string multiplies pages: not followed
    files = _files(first)
    assert files[f"{site.base}/docs/private.html"] == ("skipped", "disallowed by robots.txt")
    shipping = Document.objects.get(source=source, document_key=f"{host}/a.html.md")
    text = " ".join(shipping.versions.get().chunks.values_list("text", flat=True))
    assert "5.50 EUR" in text and "Privacy" not in text and "Careers" not in text  # the main text, no footer
    assert shipping.source_path == f"{site.base}/docs/a.html"  # its location is its URL
    hit = retrieve(viewer=Viewer.everything(tenant_a), query="How much does shipping within Portugal cost?")[0]
    assert hit.chunk.document.document_key == f"{host}/a.html.md"

    site.log.clear()
    again = _sync(source)  # nothing changed: every page answers 304 and nothing is read or embedded
    assert again.state == "succeeded" and again.unchanged == 3 and again.added == again.updated == 0
    pages = ("/docs/index.html", "/docs/a.html", "/docs/b.html")
    assert [status for path, status in site.log if path in pages] == [304, 304, 304]
    assert _files(again)[f"{host}/a.html.md"] == ("unchanged", "not modified (304)")

    site.pages["/docs/a.html"] = _page(
        "Shipping",
        "<p>Standard shipping within Portugal costs 6.00 EUR and takes two "
        "working days. Orders over 60 EUR ship free of charge to every district.</p>",
    )
    del site.pages["/docs/b.html"]  # the page is gone: 404
    changed = _sync(source)
    assert changed.updated == 1 and changed.retired == 1 and changed.unchanged == 1
    assert Document.objects.get(source=source, document_key=f"{host}/b.html.md").status == Status.RETIRED
    assert Document.objects.get(pk=shipping.pk).version == 2


def test_a_redirect_to_a_host_not_allowed_is_refused_and_the_page_cap_holds(tenant_a, site, settings):
    site.redirect_to = "http://127.0.0.2:9/steal"  # loopback again, but not the address the prefix names
    source = services.folder_source_create(tenant=tenant_a, name="handbook", path=f"{site.base}/docs/index.html",
                                           kind="website")  # fmt: skip
    job = _sync(source)
    moved = next(error for error in job.errors if "moved.html" in error["error"])
    assert "not under a website this server allows" in moved["error"]
    assert ("/steal", 302) not in site.log and all(path != "/steal" for path, _ in site.log)

    settings.RAG_WEB_MAX_PAGES = 2
    capped = services.folder_source_create(tenant=tenant_a, name="capped", path=f"{site.base}/docs/index.html",
                                           kind="website")  # fmt: skip
    job = _sync(capped)
    assert Document.objects.filter(source=capped).count() == 2
    assert any("over the page cap" in reason for _, reason in _files(job).values())


def test_website_locations_are_checked_for_web_and_api_users(tenant_a, site, settings):
    with pytest.raises(FolderNotAllowed, match="not under a website"):
        web_location_check(f"{site.base}/elsewhere/")
    with pytest.raises(FolderNotAllowed, match="user name or password"):
        web_location_check(f"http://me:secret@127.0.0.1:{site.base.rsplit(':', 1)[1]}/docs/")
    with pytest.raises(FolderNotAllowed, match="http"):
        web_location_check("file:///etc/passwd")
    settings.RAG_ALLOWED_WEB_PREFIXES = ["http://localtest.invalid/docs/"]
    with pytest.raises(FolderNotAllowed, match="cannot be resolved"):
        web_location_check("http://localtest.invalid/docs/index.html")
    settings.RAG_ALLOWED_WEB_PREFIXES = []
    with pytest.raises(FolderNotAllowed, match="disabled"):
        web_location_check(f"{site.base}/docs/index.html")


@pytest.mark.django_db
def test_a_private_address_behind_a_public_name_is_refused(settings, monkeypatch):
    import socket

    settings.RAG_ALLOWED_WEB_PREFIXES = ["https://docs.example.com/"]
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port: [(2, 1, 6, "", ("10.0.0.7", 0))])
    with pytest.raises(FolderNotAllowed, match="private or loopback"):
        web_location_check("https://docs.example.com/handbook/")


def test_website_sources_over_rest_sync_on_request_and_on_a_schedule(tenant_a, site):
    admin = make_member(tenant_a, role=Membership.Role.ADMIN, username="ada")
    client = Client()
    client.force_login(admin)
    created = client.post("/t/acme/sources/", {"kind": "website", "name": "site", "path": f"{site.base}/docs/"})
    assert created.status_code == 302
    source = Source.objects.get(tenant=tenant_a, kind="website")
    assert sources.kind_of(source).syncable
    refused = client.post("/t/acme/sources/", {"kind": "website", "name": "other", "path": "http://10.1.2.3/docs/"})
    assert refused.status_code == 302 and not Source.objects.filter(label="other").exists()
    from knowledge.schedules import source_set_sync_every

    source_set_sync_every(tenant=tenant_a, source=source, minutes=60)
    assert Source.objects.get(pk=source.pk).sync_every_minutes == 60
    job = services.source_sync_enqueue(tenant=tenant_a, source=source)
    assert job.kind == "web" and job.params["location"] == f"{site.base}/docs/"


def test_the_registry_says_which_kinds_sync():
    assert set(sources.syncable_kinds()) == {"folder", "obsidian", "git", "website", "dokuwiki", "redmine", "mailbox"}
    assert sources.upload_kinds() == ["upload"]


def test_the_operators_cli_ingests_a_website_through_its_kind(tenant_a, site):
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("ingest", "acme", f"{site.base}/docs/index.html", "--kind", "website", "--source", "handbook",
                 stdout=out, stderr=io.StringIO())  # fmt: skip
    assert "src:acme:website:handbook: 3 added" in out.getvalue()
    source = Source.objects.get(source_id="src:acme:website:handbook")
    assert source.sync_state["prefix"] == f"{site.base}/docs/"


def test_a_sync_connects_to_the_address_it_checked_not_to_what_the_name_resolves_to_later(
    tenant_a, site, settings, monkeypatch
):
    """DNS rebinding: the check resolves the name to a public address, the connection would resolve it to loopback.
    The sync connects to the checked address (the name is sent as Host), so the loopback server is never reached."""
    import socket

    port = int(site.base.rsplit(":", 1)[1])
    settings.RAG_ALLOWED_WEB_PREFIXES = [f"http://docs.example.test:{port}/docs/"]
    settings.RAG_WEB_TIMEOUT_S = 1
    real = socket.getaddrinfo

    def rebinding(host, port_, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == "docs.example.test":  # the check asks without a port; a connection asks with one
            address = "93.184.216.34" if port_ is None else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port_ or 0))]
        return real(host, port_, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    start = f"http://docs.example.test:{port}/docs/index.html"
    source = services.folder_source_create(tenant=tenant_a, name="rebound", path=start, kind="website")
    job = _sync(source)
    assert site.log == []  # nothing reached the loopback server
    # robots.txt at the checked address cannot be reached: RFC 9309 reads that as "everything disallowed"
    assert [skip["reason"] for skip in job.skips] == ["disallowed by robots.txt"]
    assert not Document.objects.filter(source=source).exists()


def test_a_sync_that_spends_its_byte_budget_stops_reading_and_loses_nothing(tenant_a, site, settings):
    source = services.folder_source_create(tenant=tenant_a, name="handbook", path=f"{site.base}/docs/index.html",
                                           kind="website")  # fmt: skip
    assert _sync(source).added == 3
    site.pages["/docs/index.html"] = SITE["/docs/index.html"] + "<!-- changed -->"  # read again in full: too big
    settings.RAG_WEB_MAX_BYTES = 200
    job = _sync(source)
    assert job.state != "failed" and job.retired == 0  # the pages it could not read are kept as they were
    assert Document.objects.filter(source=source, status=Status.ACTIVE).count() == 3
    assert any("byte budget" in error["error"] for error in job.errors)
