"""A DokuWiki source's producers: the wiki's pages through its XML-RPC API (DokuWiki's remote API, lib/exe/xmlrpc.php),
read with an account that may read and never needs to write, and the wiki's own read rights as each page's access list.

- Pages: each page the account may read is a document (`ns:page` → `ns/page.md`, its markup turned into Markdown),
  its namespaces as tags, its links to other pages stored like a vault's. The first sync also reads each page's
  older revisions (up to `history_depth`), stored as history served over their own time; a later sync reads only
  the pages whose revision changed, with every revision made since (author, time and edit summary on each version).
  A page gone from the wiki is retired; a page that cannot be read now keeps the version it had.
- Rights: who may read a page is what the wiki itself answers (`wiki.aclCheck`, the wiki's own resolution of its
  namespace and page rules, inherited rules and groups included) for each member of the tenant, as the wiki user of
  the same name or the one the source's `people` option maps them to. A page every member and an anonymous visitor
  may read is open to the tenant; otherwise it is open to exactly the members the wiki admits, and a page the wiki
  admits none of them to is open to the tenant's admins only (fail closed). A page whose rights cannot be read is not
  indexed. A sync checks the rights of the pages it reads (new and changed ones: their text is never stored before
  them); the rights of every page are synced on their own by the permission sync (every `permission_minutes`,
  default 5): payload changes only, nothing re-embedded. (A check costs a call a member and a page: a sync of 10
  edits in a wiki of 1,000 pages makes 60 of them, not 6,000.)
- Faults: the wiki unreachable, a refused login (a revoked password), an answer that is not XML-RPC: the sync fails
  with the reason and changes nothing more; every request is checked like a website's (RAG_ALLOWED_WEB_PREFIXES),
  capped and timed like one.
"""

from __future__ import annotations

import base64
import re
import xmlrpc.client
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any
from xml.parsers.expat import ExpatError

import httpx
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from knowledge.ingest.connector import ConnectorConfig, access_list, api_location_check, identities
from knowledge.ingest.obsidian import Link
from knowledge.ingest.producer import (
    Access,
    Activity,
    Done,
    Event,
    Failed,
    Item,
    Past,
    Planned,
    Reading,
    SourceProblem,
    Unchanged,
    option,
)
from knowledge.ingest.website import Reader, WebProblem
from knowledge.models import Document, Status

READ = 1  # DokuWiki's AUTH_READ
ENDPOINT = "lib/exe/xmlrpc.php"
NAMESPACE_RE = re.compile(r"^[a-z0-9_.-]+(:[a-z0-9_.-]+)*$")
wiki_location_check = api_location_check  # the wiki's base URL, where doku.php is, with `user:password@`


class WikiProblem(SourceProblem):
    """The wiki cannot be read at all; the message says why."""


class WikiFault(Exception):
    """The wiki refused one call (a page it will not show, rights it will not tell); the message is the wiki's."""


@dataclass(frozen=True)
class WikiConfig(ConnectorConfig):
    """A DokuWiki source's options: the connectors' own, and a namespace."""

    namespace: str = option(
        _("Namespace (DokuWiki; empty: the whole wiki)"), _("Only the pages under this namespace, such as support.")
    )

    def check(self) -> None:
        super().check()
        if self.namespace and not NAMESPACE_RE.match(self.namespace.strip(":")):
            raise ValueError(f"{self.namespace!r} is not a DokuWiki namespace (such as support:faq).")


class WikiClient:
    """The wiki's XML-RPC API over one Reader: each call checked, capped and timed like a website's page, the account
    sent with HTTP basic authentication (DokuWiki logs it in for the call)."""

    def __init__(self, base: str, credential: str) -> None:
        self.base = base if base.endswith("/") else base + "/"
        self.endpoint = self.base + ENDPOINT
        self.headers = {"Content-Type": "text/xml; charset=utf-8"}
        if credential:
            self.headers["Authorization"] = "Basic " + base64.b64encode(credential.encode()).decode()
        self.reader = Reader(
            budget=settings.RAG_WIKI_MAX_BYTES,
            deadline_s=settings.RAG_WIKI_SYNC_DEADLINE_S,
            answer_cap=settings.RAG_WIKI_MAX_ANSWER_BYTES,
        )

    def call(self, method: str, *params: Any) -> Any:
        body = xmlrpc.client.dumps(params, method, encoding="utf-8").encode()
        try:
            fetched = self.reader.post(self.endpoint, body, self.headers)
        except httpx.HTTPError as exc:
            raise WikiProblem(f"The wiki at {self.base} cannot be reached ({type(exc).__name__}).") from exc
        except WebProblem as exc:
            raise WikiProblem(f"The wiki at {self.base}: {exc}") from exc
        if fetched.status == 401:
            raise WikiProblem(f"The wiki at {self.base} refused the connector's user name or password.")
        if fetched.status == 403:
            raise WikiProblem(
                f"The wiki at {self.base} does not let the connector's account use its API ($conf['remoteuser'])."
            )
        if fetched.status != 200:
            raise WikiProblem(f"The wiki at {self.base} answered HTTP {fetched.status} to {method}.")
        try:
            (result,), _name = xmlrpc.client.loads(fetched.body)
        except xmlrpc.client.Fault as fault:
            if "not authorized" in fault.faultString or "remote" in fault.faultString.lower():
                raise WikiProblem(f"The wiki at {self.base} refused the call {method}: {fault.faultString}") from None
            raise WikiFault(fault.faultString[:300]) from None
        except (ExpatError, ValueError, TypeError, xmlrpc.client.ResponseError) as exc:
            raise WikiProblem(f"The wiki at {self.base} did not answer {method} with XML-RPC ({exc}).") from None
        return result

    def close(self) -> None:
        self.reader.close()


def page_key(page_id: str) -> str:
    return page_id.replace(":", "/") + ".md"


def _when(value: Any) -> datetime:
    """An XML-RPC date (DokuWiki sends ISO 8601 with its offset) or a revision number (a Unix time)."""
    if isinstance(value, int):
        return datetime.fromtimestamp(value, UTC)
    text = getattr(value, "value", str(value))
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


HEADING_RE = re.compile(r"^\s*(={2,6})\s*(.+?)\s*={2,6}\s*$")
LINK_RE = re.compile(r"\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")


def markdown(text: str) -> str:
    """DokuWiki markup as the Markdown the chunker reads: headings by level (six = signs is the top), lists, tables,
    code blocks, emphasis; a link reads as its label."""
    out: list[str] = []
    in_code = False
    for line in text.replace("\r\n", "\n").split("\n"):
        stripped = line.strip()
        if re.match(r"^<(code|file)\b", stripped):
            in_code = True
            out.append("```")
            continue
        if in_code:
            if re.match(r"^</(code|file)>", stripped):
                in_code = False
                out.append("```")
            else:
                out.append(line)
            continue
        heading = HEADING_RE.match(line)
        if heading:
            out.append("#" * (7 - len(heading.group(1))) + " " + heading.group(2))
            continue
        line = LINK_RE.sub(lambda m: (m.group(2) or m.group(1)).strip(), line)
        line = re.sub(r"//(.+?)//", r"*\1*", line.replace("http://", "http:\0").replace("https://", "https:\0"))
        line = line.replace("\0", "//").replace("''", "`")
        item = re.match(r"^( {2,})([*-])\s+(.*)$", line)
        if item:
            depth = (len(item.group(1)) - 2) // 2
            out.append("  " * depth + ("- " if item.group(2) == "*" else "1. ") + item.group(3))
            continue
        if stripped.startswith("^") or stripped.startswith("|"):
            cells = [cell.strip() for cell in re.split(r"[|^]", stripped.strip("|^ "))]
            out.append("| " + " | ".join(cells) + " |")
            if stripped.startswith("^") and not (out[-2:-1] and out[-2].startswith("|")):
                out.append("|" + " --- |" * len(cells))
            continue
        out.append(line)
    return "\n".join(out).strip() + "\n"


def page_access(client: WikiClient, page_id: str, people: dict[str, str | None]) -> tuple[str, ...]:
    """Who may read a page, as the wiki itself resolves its rules for each member (see the module); WikiFault when the
    wiki will not say."""
    readers = [name for name, user in people.items() if _level(client, page_id, user) >= READ]
    return access_list(readers, len(people), _level(client, page_id, None) >= READ)


def _level(client: WikiClient, page_id: str, user: str | None) -> int:
    """The wiki's answer for a user (their groups as the wiki knows them), or for an anonymous visitor."""
    return int(client.call("wiki.aclCheck", page_id, user) if user else client.call("wiki.aclCheck", page_id, "", []))


def _pages(client: WikiClient, namespace: str) -> list[dict[str, Any]]:
    listed = client.call("wiki.getAllPages")
    if not isinstance(listed, list):
        raise WikiProblem(f"The wiki at {client.base} listed its pages in a shape it does not have.")
    prefix = namespace.strip(":") + ":" if namespace.strip(":") else ""
    return sorted(
        (p for p in listed if isinstance(p, dict) and str(p.get("id", "")).startswith(prefix)),
        key=lambda p: str(p["id"]),
    )


def _client(reading: Reading) -> WikiClient:
    return WikiClient(reading.location, reading.credential)


def produce_dokuwiki(reading: Reading) -> Iterator[Event]:
    """The wiki's pages, their revisions since the last sync and their read rights (see the module). Raises
    WikiProblem (a SourceProblem) with the reason when the wiki cannot be read."""
    client = _client(reading)
    try:
        yield Activity(f"Reading the page list of the wiki at {client.base}")
        pages = _pages(client, reading.config.namespace)
        people = identities(reading.source, reading.config.people)
        known: dict[str, int] = dict(reading.state.get("pages", {}))
        held = set(
            Document.objects.filter(source=reading.source)
            .exclude(status=Status.RETIRED)
            .values_list("document_key", flat=True)
        )
        yield Planned(len(pages))
        revisions: dict[str, int] = {}
        depth = reading.config.depth
        for number, page in enumerate(pages):
            page_id, key = str(page["id"]), page_key(str(page["id"]))
            revision = int(_when(page["lastModified"]).timestamp())
            if number % 20 == 0:
                yield Activity(f"Page {number + 1} of {len(pages)}: {page_id}")
            if known.get(page_id) == revision and key in held:  # its rights: the permission sync's (see the module)
                revisions[page_id] = revision
                yield Unchanged(key)
                continue
            try:
                access = page_access(client, page_id, people)
            except WikiFault as fault:
                yield Failed(key, f"its read rights cannot be read ({fault}): not indexed", keep=False, position=number)
                continue
            try:
                yield _page(client, page_id, number, access, since=known.get(page_id), depth=depth)
            except WikiFault as fault:
                yield Failed(key, f"the wiki will not give it now ({fault})", position=number)
                continue
            revisions[page_id] = revision
        yield Done(state={"pages": revisions}, report={"wiki": {"pages": len(pages), "members": len(people)}})
    finally:
        client.close()


def _page(
    client: WikiClient, page_id: str, number: int, access: tuple[str, ...], *, since: int | None, depth: int
) -> Item:
    """One page now, with the revisions made since `since` (the first sync: up to `depth` of them) as history."""
    text = client.call("wiki.getPage", page_id)
    changes = {int(v["version"]): v for v in client.call("wiki.getPageVersions", page_id, 0) if isinstance(v, dict)}
    ordered = sorted(changes)
    current = ordered[-1] if ordered else None
    older = [v for v in ordered[:-1] if since is None or v > since][-depth:]

    def read(version: int) -> bytes:
        try:
            return markdown(client.call("wiki.getPageVersion", page_id, version)).encode()
        except WikiFault:
            return b""  # a revision the wiki no longer keeps: not history worth keeping

    ends = [*older[1:], current] if current is not None else []
    past = [
        Past(
            partial(read, version),
            float(version),
            _revision(page_id, changes[version]),
            (_when(version), _when(following)),
        )
        for version, following in zip(older, ends, strict=False)
    ]
    links = client.call("wiki.listLinks", page_id)
    namespaces = page_id.split(":")[:-1]
    return Item(
        page_key(page_id),
        data=markdown(str(text)).encode(),
        position=number,
        mtime=float(current) if current else None,
        location=f"{client.base}doku.php?id={page_id}",
        commit=_revision(page_id, changes[current]) if current else None,
        history=tuple(past),
        tags=tuple(":".join(namespaces[: n + 1]) for n in range(len(namespaces))),
        links=tuple(
            Link(target=str(link["page"]).replace(":", "/"), heading="", embed=False)
            for link in links
            if isinstance(link, dict) and link.get("type") == "local" and link.get("page")
        ),
        access=access,
    )


def _revision(page_id: str, change: dict[str, Any]) -> dict[str, Any]:
    """A revision as a version's commit: its number, who made it, when, and its edit summary."""
    version = int(change["version"])
    return {
        "sha": str(version),
        "author": str(change.get("user", "")),
        "date": _when(version).isoformat(),
        "message": str(change.get("sum", "")),
        "page": page_id,
    }


def dokuwiki_permissions(reading: Reading) -> Iterator[Event]:
    """The permission sync: each page's read rights as the wiki says now, nothing else read. A page whose rights
    cannot be read closes to all but the admins."""
    client = _client(reading)
    try:
        yield Activity(f"Reading the read rights of the wiki at {client.base}")
        pages = _pages(client, reading.config.namespace)
        people = identities(reading.source, reading.config.people)
        for number, page in enumerate(pages):
            if number % 50 == 0:
                yield Activity(f"Rights of page {number + 1} of {len(pages)}")
            try:
                access = page_access(client, str(page["id"]), people)
            except WikiFault:
                access = ()
            yield Access(page_key(str(page["id"])), access)
        yield Done()
    finally:
        client.close()
