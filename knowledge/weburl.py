"""The one reading of a web URL the server opens (a website source's start URL, prefix, page, link, redirect, sitemap
entry, robots.txt): RFC 3986 normalisation, so what is checked is what is read.

- scheme and host lower case, the default port made explicit, no fragment;
- **no user information** (`http://host:port@other:port/`: a reader takes `other` as the host; refused everywhere);
- the path's percent-encodings of unreserved characters decoded (`%2e` is a dot), every other one upper-cased, every
  character outside the allowed set encoded once (a space or an accent, written raw or encoded, is one URL); then
  **dot segments removed after decoding** (`/docs/%2e%2e/admin/` is `/admin/`);
- an encoded separator (`%2f`, `%5c`) or a backslash in the path is refused: servers disagree about whether it
  separates segments, so no prefix check could hold for all of them;
- a prefix admits a URL of its exact origin (scheme, host, port) whose path is the prefix's path or lies below it at a
  segment boundary (`/docs` admits `/docs/a`, never `/docs-secret/`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote, urldefrag, urljoin, urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
# What a path keeps as written (RFC 3986 pchar and "/"); anything else is percent-encoded.
PATH_SAFE = "/:@!$&'()*+,;=-._~"
_ENCODED_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SEPARATOR_RE = re.compile(r"%(2f|5c)|\\", re.I)
MAX_URL_CHARS = 2000


class BadURL(ValueError):
    """A URL the server will not open; the message says why (it names no more than the URL's start)."""


@dataclass(frozen=True)
class WebURL:
    scheme: str
    host: str  # lower case; an IPv6 address without brackets
    port: int
    path: str  # normalised, percent-encoded once, starting with "/"
    query: str

    @property
    def origin(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = DEFAULT_PORTS[self.scheme] == self.port
        return f"{self.scheme}://{host}" + ("" if default else f":{self.port}")

    @property
    def text(self) -> str:
        """The URL as it is read, stored and compared."""
        return self.origin + self.path + (f"?{self.query}" if self.query else "")

    @property
    def decoded_path(self) -> str:
        """The path as characters (a page's document key): `/guides/caf%C3%A9%20menu` is `/guides/café menu`."""
        return unquote(self.path)

    def under(self, prefix: WebURL) -> bool:
        """Of the prefix's exact origin, and its path the prefix's or below it at a segment boundary."""
        if (self.scheme, self.host, self.port) != (prefix.scheme, prefix.host, prefix.port):
            return False
        base = prefix.path if prefix.path.endswith("/") else prefix.path + "/"
        return self.path == prefix.path or self.path.startswith(base)


def web_url(url: str) -> WebURL:
    """The normalised URL, or BadURL with the reason."""
    shown = url.strip()[:200]
    if len(url) > MAX_URL_CHARS:
        raise BadURL(f"{shown}…: longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 0x20 or c == "\x7f" for c in url.strip()):
        raise BadURL(f"{shown!r}: a control character in a URL")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise BadURL(f"{shown}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise BadURL(f"{shown} is not an http(s) URL")
    if "@" in parts.netloc:
        raise BadURL(f"{shown}: a URL with a user name or password is not read")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise BadURL(f"{shown} names no host")
    if _SEPARATOR_RE.search(parts.path):
        raise BadURL(f"{shown}: an encoded slash or a backslash in its path")
    path = remove_dot_segments(_normalise_encoding(parts.path or "/"))
    query = _normalise_encoding(parts.query, safe=PATH_SAFE + "?") if parts.query else ""
    return WebURL(scheme, host, port or DEFAULT_PORTS[scheme], path or "/", query)


def joined(base: WebURL, reference: str) -> WebURL:
    """A link or a redirect's Location read against the page it is on (RFC 3986 section 5), normalised."""
    if _SEPARATOR_RE.search(reference.split("?", 1)[0].split("#", 1)[0]):
        raise BadURL(f"{reference[:200]}: an encoded slash or a backslash in its path")
    return web_url(urldefrag(urljoin(base.text, reference.strip()))[0])


def _normalise_encoding(text: str, safe: str = PATH_SAFE) -> str:
    """Unreserved characters decoded, everything outside `safe` encoded once, escapes upper-cased (RFC 3986 6.2.2)."""

    def decode(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else f"%{match.group(1).upper()}"

    decoded = _ENCODED_RE.sub(decode, text)
    # encode what is not allowed, leaving the escapes that remain (a "%" not starting one is encoded as %25)
    pieces = re.split(r"(%[0-9A-F]{2})", decoded)
    return "".join(piece if re.fullmatch(r"%[0-9A-F]{2}", piece) else quote(piece, safe=safe) for piece in pieces)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4: `.` and `..` segments resolved; `..` never climbs above the root."""
    output: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
            continue
        if segment == "..":
            if len(output) > 1:
                output.pop()
            if last:
                output.append("")
            continue
        output.append(segment)
    result = "/".join(output)
    return result if result.startswith("/") else "/" + result
