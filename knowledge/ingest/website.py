"""A website source's producer: the HTML pages under its URL prefix, read as a company's docs site is read.

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
import re
import time
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import httpx
import trafilatura
from django.conf import settings
from lxml import etree
from lxml import html as lxml_html
from protego import Protego

from knowledge import ids
from knowledge.ingest.producer import (
    Done,
    Event,
    Failed,
    Gone,
    Item,
    Note,
    Planned,
    Reading,
    Skipped,
    SourceProblem,
    Unchanged,
)
from knowledge.locations import FolderNotAllowed, web_address_check
from knowledge.weburl import BadURL, WebURL, joined, web_url

logger = logging.getLogger(__name__)

USER_AGENT = "ragsite"
MAX_REDIRECTS = 5
GONE = (404, 410)
MAX_LINKS_PER_PAGE = 500  # links followed from one page; the others are counted on the job, not listed
MAX_SKIPS_LISTED = 200  # skipped pages listed one by one on a job; the others are counted
DECODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15}  # Content-Encoding → zlib's window bits (deflate: zlib stream)


class WebProblem(SourceProblem):
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


class PageTimedOut(WebProblem):
    """One page took longer than RAG_WEB_TIMEOUT_S in all (a server that drips its bytes)."""


class SyncTimedOut(BudgetSpent):
    """The sync ran past RAG_WEB_SYNC_DEADLINE_S: it stops reading, like a spent byte budget."""


class Reader:
    """One sync's HTTP reads: each URL normalised and checked before it is read (knowledge/weburl.py), redirects
    followed by hand (each target checked), a byte budget for the whole sync counted on the bytes as decompressed,
    a cap on each page, and a deadline for each page (however slowly its bytes come) and for the whole sync."""

    def __init__(
        self,
        *,
        budget: int | None = None,
        deadline_s: int | None = None,
        answer_cap: int | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.timeout_s = timeout_s or settings.RAG_WEB_TIMEOUT_S
        self.client = httpx.Client(follow_redirects=False, timeout=self.timeout_s,
                                   headers={"User-Agent": USER_AGENT})  # fmt: skip
        self.bytes_left = budget or settings.RAG_WEB_MAX_BYTES
        self.deadline_s = deadline_s or settings.RAG_WEB_SYNC_DEADLINE_S
        self.answer_cap = answer_cap or settings.RAG_WEB_MAX_PAGE_BYTES  # one page, or one API answer
        self.sync_deadline = time.monotonic() + self.deadline_s

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> Fetched:
        """One call to a system's API (a wiki's XML-RPC): checked like a page, never redirected (a redirect's status
        comes back to the caller), its answer under the same caps and deadlines."""
        try:
            target = web_url(url)
        except BadURL as exc:
            raise FolderNotAllowed(str(exc)) from exc
        if time.monotonic() > self.sync_deadline:
            raise SyncTimedOut(f"over the sync's time limit ({self.deadline_s} s)")
        deadline = time.monotonic() + self.timeout_s
        address = web_address_check(target.text)
        pinned, extensions = _pinned(target.text, address)
        asked = {**headers, "Host": urlsplit(target.text).netloc, "Accept-Encoding": "gzip, deflate"}
        with self.client.stream("POST", pinned, content=body, headers=asked, extensions=extensions) as response:
            answer = self._body(response, target, deadline) if response.status_code == 200 else b""
            return Fetched(response.status_code, target.text, answer, dict(response.headers))

    def get(self, url: str | WebURL, headers: dict[str, str] | None = None, *, site_root: bool = False) -> Fetched:
        try:
            target = url if isinstance(url, WebURL) else web_url(url)
        except BadURL as exc:
            raise FolderNotAllowed(str(exc)) from exc
        if time.monotonic() > self.sync_deadline:
            raise SyncTimedOut(f"over the sync's time limit (RAG_WEB_SYNC_DEADLINE_S = {self.deadline_s})")
        deadline = time.monotonic() + settings.RAG_WEB_TIMEOUT_S
        for _ in range(MAX_REDIRECTS + 1):
            address = web_address_check(target.text, site_root=site_root)  # FolderNotAllowed: a host not allowed
            pinned, extensions = _pinned(target.text, address)
            asked = {**(headers or {}), "Host": urlsplit(target.text).netloc, "Accept-Encoding": "gzip, deflate"}
            with self.client.stream("GET", pinned, headers=asked, extensions=extensions) as response:
                if response.is_redirect and response.headers.get("location"):
                    try:
                        target = joined(target, response.headers["location"])
                    except BadURL as exc:
                        raise FolderNotAllowed(f"{target.text[:200]} redirects to {exc}") from exc
                    continue
                body = self._body(response, target, deadline) if response.status_code == 200 else b""
                return Fetched(response.status_code, target.text, body, dict(response.headers))
        raise FolderNotAllowed(f"{target.text[:200]}: more than {MAX_REDIRECTS} redirects")

    def _body(self, response: httpx.Response, target: WebURL, deadline: float) -> bytes:
        """The page's bytes as decompressed, counted while they come: never more than the page cap or what is left
        of the sync's budget, never longer than the page's deadline."""
        cap = min(self.answer_cap, self.bytes_left)
        encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()]
        encodings = [e for e in encodings if e != "identity"]
        if any(e not in DECODINGS for e in encodings):
            raise WebProblem(f"{target.text[:200]}: content encoding {', '.join(encodings)[:60]} is not read")
        decoders = [zlib.decompressobj(DECODINGS[e]) for e in reversed(encodings)]  # the last applied comes off first
        body = bytearray()
        try:
            for piece in response.iter_raw():
                if time.monotonic() > deadline:
                    raise PageTimedOut(f"{target.text[:200]}: took over {settings.RAG_WEB_TIMEOUT_S} s")
                for decoder in decoders:
                    piece = _inflate(decoder, piece, cap - len(body), target)
                body += piece
                if len(body) > cap:
                    raise _Overflow()
            for index, decoder in enumerate(decoders):  # what each stage still holds, through the stages after it
                tail = decoder.flush()
                for later in decoders[index + 1 :]:
                    tail = _inflate(later, tail, cap - len(body), target)
                body += tail
                if len(body) > cap:
                    raise _Overflow()
        except _Overflow:
            raise self._over(cap, target) from None
        self.bytes_left -= len(body)
        return bytes(body)

    def _over(self, cap: int, target: WebURL) -> WebProblem:
        if cap < self.answer_cap:
            return BudgetSpent(f"over the byte budget (RAG_WEB_MAX_BYTES = {settings.RAG_WEB_MAX_BYTES:,})")
        setting = "RAG_WEB_MAX_PAGE_BYTES" if self.answer_cap == settings.RAG_WEB_MAX_PAGE_BYTES else "its cap"
        return WebProblem(f"{target.text[:200]}: over {self.answer_cap:,} bytes ({setting}), decompressed")

    def close(self) -> None:
        self.client.close()


class _Overflow(Exception):
    """A page's bytes went past what it may have (its cap, or what is left of the sync's budget)."""


def _inflate(decoder: Any, data: bytes, room: int, target: WebURL) -> bytes:
    """One decompression stage's output, never more than `room` bytes of it held (a page of a few bytes may inflate
    to gigabytes): past that, _Overflow, whatever the rest would be."""
    try:
        out = decoder.decompress(data, max(room, 0) + 1)
    except zlib.error as exc:
        raise WebProblem(f"{target.text[:200]}: its compressed body is broken ({exc})") from exc
    if decoder.unconsumed_tail or len(out) > room:
        raise _Overflow()
    return out


def _pinned(url: str, address: str) -> tuple[str, dict[str, str]]:
    """The URL with its host replaced by the address that was checked, and for https the name TLS must verify
    (SNI): the connection goes where the check looked, whatever the name resolves to a moment later."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    extensions = {"sni_hostname": parts.hostname or ""} if parts.scheme == "https" else {}
    return parts._replace(netloc=netloc).geturl(), extensions


def prefix_of(url: str) -> WebURL:
    """The pages a website source reads: those under its start URL's folder (WebURL.under: same origin, and a path
    boundary)."""
    start = web_url(url)
    path = start.path if start.path.endswith("/") else start.path.rsplit("/", 1)[0] + "/"
    return WebURL(start.scheme, start.host, start.port, path, "")


def page_key(url: str) -> str:
    """A page's document key, as characters (escaped once, by the ingest): its path on the site (a folder's page is
    its index), as a Markdown document. The source reads one site, so the host adds nothing; the URL itself is the
    document's location."""
    path = web_url(url).decoded_path
    if path.endswith("/"):
        path += "index"
    return f"{path.lstrip('/')}.md"


def _robots(reader: Reader, start: str) -> Protego:
    """The site's robots.txt as RFC 9309 reads it (Protego: the longest matching rule wins, Allow on a tie). Not
    there (4xx): no rules. Unreachable (5xx, a network failure): everything disallowed, as the RFC asks."""
    parts = urlsplit(start)
    try:
        fetched = reader.get(f"{parts.scheme}://{parts.netloc}/robots.txt", site_root=True)
    except FolderNotAllowed:
        fetched = Fetched(404, start)  # not under an allowed prefix: not read, no rules
    except (httpx.HTTPError, WebProblem):
        fetched = Fetched(503, start)
    if fetched.status == 200:
        return Protego.parse(fetched.body.decode("utf-8", "replace"))
    if fetched.status >= 500:
        return Protego.parse("User-agent: *\nDisallow: /\n")
    return Protego.parse("")


def _in_scope(url: WebURL, prefix: WebURL) -> bool:
    return not url.query and url.under(prefix)


def _links(html: bytes, base: str, prefix: WebURL) -> tuple[list[str], int]:
    """The page's links within the prefix, normalised, at most MAX_LINKS_PER_PAGE; and how many more were left out.
    A link that is no URL the server would open (a user name, an encoded slash, a backslash) is left out too."""
    parser = _Links()
    try:
        parser.feed(html.decode("utf-8", "replace"))
    except Exception:  # a page that breaks the parser still gives the links read before it
        logger.debug("links of %s cut short", base)
    page = web_url(base)
    found: dict[str, None] = {}
    for href in parser.hrefs:
        try:
            url = joined(page, href)
        except BadURL:
            continue
        if _in_scope(url, prefix):
            found[url.text] = None
    links = list(found)
    return links[:MAX_LINKS_PER_PAGE], max(len(links) - MAX_LINKS_PER_PAGE, 0)


def _sitemap(body: bytes, prefix: WebURL) -> list[str]:
    try:  # expat (2.4 and later, in every supported Python) refuses entity amplification: no billion laughs
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise WebProblem(f"the sitemap is not XML: {exc}") from exc
    found: dict[str, None] = {}
    for element in root.iter():
        if element.tag.endswith("loc") and element.text:
            try:
                url = web_url(element.text.strip())
            except BadURL:
                continue
            if _in_scope(url, prefix):
                found[url.text] = None
    return list(found)


# What a page holds around its text: menus, banners, footers, cookie notes. trafilatura leaves them out of a long
# page by itself; a short page it reads whole, so they go before it reads (a class or id naming one counts too).
_CHROME_TAGS = ("nav", "header", "footer", "aside", "script", "style", "noscript", "form", "template")
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search", "complementary"}
_CHROME_NAME_RE = re.compile(r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|footer|breadcrumbs?|sidebar|cookies?|"
                             r"skip-link|site-header|topbar)(?:$|[\s_-])")  # fmt: skip


def _without_chrome(html: str) -> str:
    """The page without its navigation, banners and footers; its <main> (or only <article>) when it marks one."""
    try:
        tree = lxml_html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return html
    doomed = [el for el in tree.iter() if isinstance(el.tag, str) and (
        el.tag.lower() in _CHROME_TAGS or (el.get("role") or "").lower() in _CHROME_ROLES
        or _CHROME_NAME_RE.search(f" {el.get('class') or ''} {el.get('id') or ''} ".lower()))]  # fmt: skip
    for element in doomed:
        if element.getparent() is not None and element.tag.lower() not in ("html", "body"):
            element.drop_tree()
    main = tree.xpath("//main | //*[@role='main']") or tree.xpath("//article")
    if len(main) == 1:
        body = tree.find("body")
        if body is not None:
            for child in list(body):
                body.remove(child)
            body.append(main[0])
    return lxml_html.tostring(tree, encoding="unicode")


def page_text(html: bytes, url: str) -> str:
    """The page's main text as Markdown under its title; "" when it has none."""
    decoded = html.decode("utf-8", "replace")
    text = trafilatura.extract(_without_chrome(decoded), url=url, output_format="markdown", include_comments=False,
                               include_tables=True, favor_recall=True) or ""  # fmt: skip
    meta = trafilatura.extract_metadata(decoded, default_url=url)
    title = (meta.title if meta is not None and meta.title else "").strip()
    if not text.strip():
        return ""
    return f"# {title}\n\n{text.strip()}\n" if title and not text.lstrip().startswith("#") else text.strip() + "\n"


def produce_website(reading: Reading) -> Iterator[Event]:
    """A website source's pages (see the module): `reading.location` is the start URL as checked by the caller."""
    start = reading.location
    try:
        prefix = prefix_of(start)
        start = web_url(start).text
    except BadURL as exc:
        raise WebProblem(str(exc)) from exc
    state: dict[str, dict] = dict(reading.state.get("pages") or {})
    reader = Reader()
    try:
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
        pages: dict[str, dict] = {}
        number = 0
        while queue:
            url, depth = queue.popleft()
            if number >= settings.RAG_WEB_MAX_PAGES:
                yield Skipped(url, f"over the page cap (RAG_WEB_MAX_PAGES = {settings.RAG_WEB_MAX_PAGES})")
                continue
            if not robots.can_fetch(url, USER_AGENT):
                yield Skipped(url, "disallowed by robots.txt")
                continue
            try:
                key = page_key(url)
                ids.normalise_document_key(key)
            except (BadURL, ids.InvalidIdentifier) as exc:
                yield Skipped(url, f"not a page this source can keep: {exc}")
                continue
            page = _Page(url, key, state.get(url) or {}, number)
            yield from _read_page(reader, page, prefix)
            if page.spent is not None:  # nothing more is read; nothing unread is lost
                for left, _ in queue:
                    yield Skipped(left, page.spent)
                queue.clear()
                for other, kept in state.items():
                    if other not in pages and other != url and kept.get("key"):
                        pages[other] = kept
                        yield Unchanged(str(kept["key"]), counted=False)
            if page.kept is not None:
                pages[url] = page.kept
            if page.spent is not None:
                continue
            number += 1
            for link in page.links if depth < settings.RAG_WEB_MAX_DEPTH else []:
                if link not in seen:
                    seen.add(link)
                    queue.append((link, depth + 1))
            yield Planned(number + len(queue))
        yield Done(state={"pages": pages, "prefix": prefix.text})
    finally:
        reader.close()


@dataclass
class _Page:
    """One page being read: what its last read kept, and what this one found."""

    url: str
    key: str
    known: dict
    number: int
    links: list[str] = field(default_factory=list)
    kept: dict | None = None  # its state for the next sync (None: not kept, retired)
    spent: str | None = None  # the byte budget ran out on it: why


def _read_page(reader: Reader, page: _Page, prefix: WebURL) -> Iterator[Event]:
    """Read one page; `page` says what became of it (its links, its state kept, a budget spent)."""
    known, key, url, number = page.known, page.key, page.url, page.number
    conditional = {
        name: known[stored_as]
        for name, stored_as in (("If-None-Match", "etag"), ("If-Modified-Since", "last_modified"))
        if known.get(stored_as)
    }
    try:
        fetched = reader.get(url, conditional)
    except (FolderNotAllowed, WebProblem, httpx.HTTPError) as exc:
        reason = str(exc) if not isinstance(exc, httpx.HTTPError) else f"cannot be read: {type(exc).__name__}"
        # a page that cannot be read now keeps the version it had
        yield Failed(key, f"{url[:300]}: {reason}", keep=bool(known), position=number)
        page.kept = known or None
        if isinstance(exc, BudgetSpent):
            page.spent = str(exc)
        return
    if fetched.status == 304 and known:
        page.kept, page.links = known, list(known.get("links") or [])
        yield Unchanged(key, note="not modified (304)")
        return
    if fetched.status in GONE:
        yield Gone(key)  # not kept: retired at the end of the sync
        return
    if fetched.status != 200:
        yield Failed(key, f"{url[:300]} answered {fetched.status}", keep=bool(known), position=number)
        page.kept = known or None
        return
    page.links, left_out = _links(fetched.body, fetched.url, prefix)
    if left_out:
        yield Note(key, f"{left_out:,} more links not followed (at most {MAX_LINKS_PER_PAGE} a page)")
    text = page_text(fetched.body, fetched.url) if "html" in fetched.headers.get("content-type", "html") else ""
    if not text:
        yield Skipped(key, "no main text", counted=True)
        return
    yield Item(key, data=text.encode("utf-8"), position=number, location=fetched.url)
    page.kept = {
        "key": key,
        "etag": fetched.headers.get("etag", ""),
        "links": page.links,
        "last_modified": fetched.headers.get("last-modified", ""),
    }
