"""Where a source may read, checked where it is used: a folder inside RAG_ALLOWED_FOLDER_ROOTS, a repository inside
them or under RAG_ALLOWED_GIT_URLS, a website under RAG_ALLOWED_WEB_PREFIXES and never on a private address unless
its prefix names that address. Each check returns the location to read (resolved) or raises FolderNotAllowed with
the reason; the operator's command line is not checked (knowledge/ingest/sources.py)."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from knowledge.ingest.git import BRANCH_RE, GitProblem, git_dir, git_dir_links, is_url, public_url

__all__ = ["BRANCH_RE", "FolderNotAllowed", "folder_path_check", "git_location_check", "web_location_check",
           "web_address_check", "inside_roots"]  # fmt: skip


class FolderNotAllowed(ValueError):
    """A location outside what the operator allows for web and API users (a folder, a repository, a website)."""


def folder_path_check(path: str) -> Path:
    """Resolve a folder given through the web UI or API; it must lie inside RAG_ALLOWED_FOLDER_ROOTS.

    The path is resolved with symlinks followed *before* the check, so neither '..' nor a symlink
    can escape an allowed root; the walker itself never follows symlinks inside the tree.
    """
    roots = settings.RAG_ALLOWED_FOLDER_ROOTS
    if not roots:
        raise FolderNotAllowed("Folder sources are disabled for web and API users (set RAG_ALLOWED_FOLDER_ROOTS).")
    try:
        resolved = Path(path).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise FolderNotAllowed(f"{path} does not exist or cannot be read.") from exc
    if not resolved.is_dir():
        raise FolderNotAllowed(f"{path} is not a folder.")
    if not inside_roots(resolved):
        raise FolderNotAllowed(f"{path} is outside the folders this server allows.")
    return resolved


def inside_roots(resolved: Path) -> bool:
    """A resolved path inside one of RAG_ALLOWED_FOLDER_ROOTS."""
    return any(resolved == root or root in resolved.parents for root in settings.RAG_ALLOWED_FOLDER_ROOTS)


def git_location_check(location: str) -> str:
    """A repository named by a web or API user: a URL must start with one of RAG_ALLOWED_GIT_URLS (compared
    without its credential), a local repository must be a folder inside RAG_ALLOWED_FOLDER_ROOTS (resolved first,
    so neither '..' nor a symlink escapes). file:// URLs are refused: a local repository is named by its path."""
    location = location.strip()
    if not is_url(location):
        folder = folder_path_check(location)
        try:  # the repository exactly there, and every place its git directory leads libgit2 to: inside the roots
            places = [git_dir(folder)]
            places += git_dir_links(places[0])
        except (GitProblem, OSError) as exc:
            raise FolderNotAllowed(str(exc) if isinstance(exc, GitProblem) else f"{location} cannot be read.") from exc
        if not all(inside_roots(place) for place in places):
            raise FolderNotAllowed(f"{location}: its git directory lies outside the folders this server allows.")
        return str(folder)
    shown = public_url(location)
    if location.startswith("file:"):
        raise FolderNotAllowed(f"{shown}: name a local repository by its path, not a file:// URL.")
    allowed = settings.RAG_ALLOWED_GIT_URLS
    if not allowed:
        raise FolderNotAllowed("Git URLs are disabled for web and API users (set RAG_ALLOWED_GIT_URLS).")
    if not any(shown.startswith(prefix) for prefix in allowed) or "/../" in shown or shown.endswith("/.."):
        raise FolderNotAllowed(f"{shown} is not under a repository URL this server allows.")
    return location


def web_location_check(url: str) -> str:
    """A website's start URL named by a web or API user: http(s), no credential, under one of
    RAG_ALLOWED_WEB_PREFIXES, on an address that is public (or named by that prefix itself: a loopback or private
    host is read only when the operator's prefix says so). Every page and redirect of a sync is checked the same
    way (`web_address_check`)."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FolderNotAllowed(f"{url[:200]} is not an http(s) URL.")
    if parts.username or parts.password:
        raise FolderNotAllowed("Name the website without a user name or password in its URL.")
    if not settings.RAG_ALLOWED_WEB_PREFIXES:
        raise FolderNotAllowed("Website sources are disabled for web and API users (set RAG_ALLOWED_WEB_PREFIXES).")
    web_address_check(url)
    return url


def web_address_check(url: str, *, site_root: bool = False) -> str:
    """One URL a sync is about to read (a page, a redirect's target, a sitemap): under an allowed prefix, its host
    resolving only to public addresses unless the prefix that admits it names that very host. `site_root`: a file of
    the site's root (robots.txt), admitted by any allowed prefix of the same scheme and host. Returns the address
    checked, which the caller connects to (a name is never resolved twice: no DNS rebinding between check and
    read)."""
    if "/../" in url or url.endswith("/.."):
        raise FolderNotAllowed(f"{url[:200]} is not under a website this server allows.")
    origin = "{0.scheme}://{0.netloc}/".format(urlsplit(url))
    prefixes = [p for p in settings.RAG_ALLOWED_WEB_PREFIXES
                if url.startswith(p) or (site_root and p.startswith(origin))]  # fmt: skip
    if not prefixes:
        raise FolderNotAllowed(f"{url[:200]} is not under a website this server allows.")
    host = urlsplit(url).hostname or ""
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError as exc:
        raise FolderNotAllowed(f"{host} cannot be resolved.") from exc
    named = any(urlsplit(p).hostname == host and _is_address(host) for p in prefixes) or any(
        urlsplit(p).hostname == host == "localhost" for p in prefixes)  # fmt: skip
    for address in addresses:
        ip = ipaddress.ip_address(str(address).split("%", 1)[0])
        if not ip.is_global and not named:
            raise FolderNotAllowed(f"{host} resolves to a private or loopback address ({ip}); this server reads it "
                                   "only when an allowed prefix names that address.")  # fmt: skip
    return sorted(addresses)[0]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
