"""Sync a website source: the HTML pages under its URL prefix, read as a company's docs site is read.

- It starts at the source's URL (or a sitemap.xml: its `<loc>` pages) and follows links within the prefix (the start
  URL up to its last "/"), to RAG_WEB_MAX_DEPTH links deep, at most RAG_WEB_MAX_PAGES pages and RAG_WEB_MAX_BYTES
  bytes a sync, RAG_WEB_TIMEOUT_S a request. URLs with a query string are not followed (they multiply pages).
- robots.txt is honoured (user agent `ragsite`): a page it disallows is listed as skipped, never read.
- Every URL it reads (robots.txt, a page, each redirect's target) is checked first (knowledge/locations.py): under an
  allowed prefix, on a public address unless that prefix names the host. A redirect elsewhere fails that page.
- A re-sync asks each page with its ETag / Last-Modified: a 304 reads nothing and keeps the page (its links, kept
  from the last read, are followed as before). A page that answers 404 or 410 is retired; another failure keeps
  the version it had.
- The page's main text (not its menus and footers: trafilatura) is what is indexed, under its title; the page's URL is
  its location.
"""

from __future__ import annotations

import logging
import urllib.robotparser
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit
from xml.etree import ElementTree

import httpx
import trafilatura
from django.conf import settings
from django.utils import timezone

from inference.embedders import get_embedder
from knowledge import ids, jobs, timeline
from knowledge.ingest.sync_run import (  # the steps every source's sync shares
    checkpoint,
    files_listed,
    finish,
    ingest_one,
    record_failure,
    stopped_when_full,
)
from knowledge.ingest.versions import retire_documents
from knowledge.jobs import source_locked
from knowledge.locations import FolderNotAllowed, web_address_check
from knowledge.models import IngestJob, JobFile, Source
from knowledge.options import DEFAULT_OPTIONS, IngestOptions

logger = logging.getLogger(__name__)

USER_AGENT = "ragsite"
MAX_REDIRECTS = 5
GONE = (404, 410)


class WebProblem(Exception):
    """The website cannot be read at all (its start page); the message says why."""


class BudgetSpent(WebProblem):
    """The sync read RAG_WEB_MAX_BYTES: it stops reading, keeps what it has not read, and ends normally."""


@dataclass
class Fetched:
    status: int
    url: str  # after redirects
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value for name, value in attrs if name == "href" and value]


class Reader:
    """One sync's HTTP reads: each URL checked before it is read, redirects followed by hand (each target checked),
    a byte budget for the whole sync and a timeout per request."""

    def __init__(self) -> None:
        self.client = httpx.Client(follow_redirects=False, timeout=settings.RAG_WEB_TIMEOUT_S,
                                   headers={"User-Agent": USER_AGENT})  # fmt: skip
        self.bytes_left = settings.RAG_WEB_MAX_BYTES

    def get(self, url: str, headers: dict[str, str] | None = None, *, site_root: bool = False) -> Fetched:
        for _ in range(MAX_REDIRECTS + 1):
            address = web_address_check(url, site_root=site_root)  # FolderNotAllowed: a redirect to a host not allowed
            pinned, extensions = _pinned(url, address)
            with self.client.stream("GET", pinned, headers={**(headers or {}), "Host": urlsplit(url).netloc},
                                    extensions=extensions) as response:  # fmt: skip
                if response.is_redirect and response.headers.get("location"):
                    url = urljoin(url, response.headers["location"])
                    continue
                body = b""
                if response.status_code == 200:
                    for piece in response.iter_bytes():
                        body += piece
                        if len(body) > self.bytes_left:
                            raise BudgetSpent(f"over the byte budget (RAG_WEB_MAX_BYTES = "
                                              f"{settings.RAG_WEB_MAX_BYTES:,})")  # fmt: skip
                    self.bytes_left -= len(body)
                return Fetched(response.status_code, url, body, dict(response.headers))
        raise FolderNotAllowed(f"{url[:200]}: more than {MAX_REDIRECTS} redirects")

    def close(self) -> None:
        self.client.close()


def _pinned(url: str, address: str) -> tuple[str, dict[str, str]]:
    """The URL with its host replaced by the address that was checked, and for https the name TLS must verify
    (SNI): the connection goes where the check looked, whatever the name resolves to a moment later."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    extensions = {"sni_hostname": parts.hostname or ""} if parts.scheme == "https" else {}
    return parts._replace(netloc=netloc).geturl(), extensions


def prefix_of(url: str) -> str:
    """The pages a website source reads: those under its start URL's folder."""
    return url if url.endswith("/") else url.rsplit("/", 1)[0] + "/"


def page_key(url: str) -> str:
    """A page's document key: its path on the site (a folder's page is its index), as a Markdown document. The
    source reads one site, so the host adds nothing; the URL itself is the document's location."""
    path = urlsplit(url).path or "/"
    if path.endswith("/"):
        path += "index"
    return ids.normalise_document_key(f"{path.lstrip('/')}.md")


def _robots(reader: Reader, start: str) -> urllib.robotparser.RobotFileParser:
    robots = urllib.robotparser.RobotFileParser()
    parts = urlsplit(start)
    try:
        fetched = reader.get(f"{parts.scheme}://{parts.netloc}/robots.txt", site_root=True)
    except (FolderNotAllowed, httpx.HTTPError, WebProblem):
        fetched = Fetched(404, start)  # not under an allowed prefix, or unreadable: no rules (RFC 9309: allow)
    if fetched.status == 200:
        robots.parse(fetched.body.decode("utf-8", "replace").splitlines())
    else:
        robots.parse([])
    return robots


def _in_scope(url: str, prefix: str) -> bool:
    parts = urlsplit(url)
    return url.startswith(prefix) and not parts.query and parts.scheme in ("http", "https")


def _links(html: bytes, base: str, prefix: str) -> list[str]:
    parser = _Links()
    try:
        parser.feed(html.decode("utf-8", "replace"))
    except Exception:  # a page that breaks the parser still gives the links read before it
        logger.debug("links of %s cut short", base)
    found = [urldefrag(urljoin(base, href))[0] for href in parser.hrefs]
    return [url for url in dict.fromkeys(found) if _in_scope(url, prefix)]


def _sitemap(body: bytes, prefix: str) -> list[str]:
    try:  # expat (2.4 and later, in every supported Python) refuses entity amplification: no billion laughs
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise WebProblem(f"the sitemap is not XML: {exc}") from exc
    locs = [el.text.strip() for el in root.iter() if el.tag.endswith("loc") and el.text]
    return [url for url in dict.fromkeys(locs) if _in_scope(url, prefix)]


def page_text(html: bytes, url: str) -> str:
    """The page's main text as Markdown under its title; "" when it has none."""
    text = trafilatura.extract(html.decode("utf-8", "replace"), url=url, output_format="markdown",
                               include_comments=False, include_tables=True, favor_recall=True) or ""  # fmt: skip
    meta = trafilatura.extract_metadata(html.decode("utf-8", "replace"), default_url=url)
    title = (meta.title if meta is not None and meta.title else "").strip()
    if not text.strip():
        return ""
    return f"# {title}\n\n{text.strip()}\n" if title and not text.lstrip().startswith("#") else text.strip() + "\n"


def sync_website(
    *, source: Source, location: str | None = None, options: IngestOptions = DEFAULT_OPTIONS,
    job: IngestJob | None = None, progress: Callable[[IngestJob], None] | None = None,
) -> IngestJob:  # fmt: skip
    """Bring a website source up to date (see the module). `location`: the start URL as checked by the caller."""
    start = location or source.path
    job = job or IngestJob.objects.create(tenant=source.tenant, source=source, kind=IngestJob.Kind.WEB,
                                          params={"location": start, "operator": True})  # fmt: skip
    jobs.start(job)
    prefix = prefix_of(start)
    state: dict[str, dict] = dict((source.sync_state or {}).get("pages") or {})
    reader = Reader()
    try:
        with source_locked(source, job), stopped_when_full(job):
            robots = _robots(reader, start)
            queue: deque[tuple[str, int]] = deque()
            if urlsplit(start).path.endswith(".xml"):
                try:
                    fetched = reader.get(start)
                except httpx.HTTPError as exc:
                    raise WebProblem(f"{start} cannot be read: {type(exc).__name__}") from exc
                if fetched.status != 200:
                    raise WebProblem(f"{start} answered {fetched.status}")
                queue.extend((url, 0) for url in _sitemap(fetched.body, prefix))
            else:
                queue.append((start, 0))
            seen = {url for url, _ in queue}
            keep: set[str] = set()
            pages: dict[str, dict] = {}
            skipped: list[tuple[str, str, str]] = []
            embedder = get_embedder()
            number = 0
            while queue:
                url, depth = queue.popleft()
                if number >= settings.RAG_WEB_MAX_PAGES:
                    skipped.append(
                        (
                            url[:1000],
                            JobFile.Status.SKIPPED,
                            f"over the page cap (RAG_WEB_MAX_PAGES = {settings.RAG_WEB_MAX_PAGES})",
                        )
                    )
                    continue
                if not robots.can_fetch(USER_AGENT, url):
                    skipped.append((url[:1000], JobFile.Status.SKIPPED, "disallowed by robots.txt"))
                    continue
                key = page_key(url)
                known = state.get(url) or {}
                try:
                    links = _read_page(reader, job, source, url, key, known, pages, keep, options, embedder, number,
                                       progress)  # fmt: skip
                except BudgetSpent as spent:  # nothing more is read; nothing unread is lost
                    skipped += [(left[:1000], JobFile.Status.SKIPPED, str(spent)) for left, _ in queue]
                    queue.clear()
                    for other, kept in state.items():
                        if other not in pages:
                            pages[other] = kept
                            keep.add(str(kept.get("key") or page_key(other)))
                    continue
                number += 1
                job.documents_done = number
                for link in links if depth < settings.RAG_WEB_MAX_DEPTH else []:
                    if link not in seen:
                        seen.add(link)
                        queue.append((link, depth + 1))
                job.documents_total = number + len(queue)
            job.skipped += len(skipped)
            job.skips = [*job.skips, *({"key": key, "reason": reason} for key, _, reason in skipped)]
            job.files_total = number + len(skipped)
            files_listed(job, skipped)
            job.retired = retire_documents(source=source, keep_keys=keep)
            source.sync_state = {"pages": pages, "prefix": prefix}
            source.last_synced_at = timezone.now()
            source.save(update_fields=["sync_state", "last_synced_at"])
            timeline.resolve_pending_links(source_pk=source.pk)
            return finish(job, progress)
    finally:
        reader.close()


def _read_page(reader: Reader, job: IngestJob, source: Source, url: str, key: str, known: dict,
               pages: dict[str, dict], keep: set[str], options: IngestOptions, embedder,
               number: int, progress) -> list[str]:  # fmt: skip
    """Read one page into the job; returns the links to follow from it (those kept from its last read on a 304)."""
    conditional = {
        name: known[field]
        for name, field in (("If-None-Match", "etag"), ("If-Modified-Since", "last_modified"))
        if known.get(field)
    }
    try:
        fetched = reader.get(url, conditional)
    except (FolderNotAllowed, WebProblem, httpx.HTTPError) as exc:
        reason = str(exc) if not isinstance(exc, httpx.HTTPError) else f"cannot be read: {type(exc).__name__}"
        record_failure(job, key, f"{url[:300]}: {reason}", position=number)
        if known:  # a page that cannot be read now keeps the version it had
            keep.add(key)
            pages[url] = known
        if isinstance(exc, BudgetSpent):
            raise
        return []
    if fetched.status == 304 and known:
        job.unchanged += 1
        keep.add(key)
        pages[url] = known
        files_listed(job, [(key, JobFile.Status.UNCHANGED, "not modified (304)")])
        return list(known.get("links") or [])
    if fetched.status in GONE:
        return []  # not kept: retired at the end of the sync
    if fetched.status != 200:
        record_failure(job, key, f"{url[:300]} answered {fetched.status}", position=number)
        if known:
            keep.add(key)
            pages[url] = known
        return []
    links = _links(fetched.body, fetched.url, prefix_of(source.path))
    text = page_text(fetched.body, fetched.url) if "html" in fetched.headers.get("content-type", "html") else ""
    if not text:
        files_listed(job, [(key, JobFile.Status.SKIPPED, "no main text")])
        job.skipped += 1
        return links
    if ingest_one(job=job, source=source, key=key, data=text.encode("utf-8"), options=options, embedder=embedder,
                  position=number, location=fetched.url):  # fmt: skip
        keep.add(key)
    pages[url] = {"key": key, "etag": fetched.headers.get("etag", ""), "links": links,
                  "last_modified": fetched.headers.get("last-modified", "")}  # fmt: skip
    if number % 20 == 0:
        checkpoint(job, progress)
    return links
