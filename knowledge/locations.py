"""Where a source may read, checked where it is used: a folder inside the tenant's drop folder or an allowed root, a
repository there or under an allowed git URL prefix, a website under an allowed prefix and never on a private
address unless its prefix names that address. Each check returns the location to read (resolved) or raises
FolderNotAllowed with the reason; the operator's command line is not checked (knowledge/ingest/sources.py).

What is allowed:
- every tenant's own **drop folder**, `RAG_DROP_DIR/<tenant>/` (under the data directory by default): always, for
  that tenant only. A relative path is read from there ("handbook" is `RAG_DROP_DIR/<tenant>/handbook`);
- what the operator allows for every tenant: the settings (RAG_ALLOWED_FOLDER_ROOTS, RAG_ALLOWED_GIT_URLS,
  RAG_ALLOWED_WEB_PREFIXES) and what the operator's "Allowed locations" page adds (knowledge.models.AllowedLocation),
  read at each check."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

from django.conf import settings

from knowledge.ids import normalise_source_name
from knowledge.ingest.git import BRANCH_RE, GitProblem, git_dir, git_dir_links, is_url, public_url
from knowledge.ingest.producer import SourceProblem
from knowledge.models import AllowedLocation
from knowledge.weburl import BadURL, web_url

__all__ = ["BRANCH_RE", "FolderNotAllowed", "folder_path_check", "git_location_check", "web_location_check",
           "web_address_check", "inside_roots", "drop_folder", "folder_roots", "git_prefixes",
           "web_prefixes"]  # fmt: skip


class FolderNotAllowed(SourceProblem, ValueError):
    """A location outside what the operator allows for web and API users (a folder, a repository, a website)."""


def drop_folder(tenant_slug: str) -> Path:
    """The tenant's drop folder, made when first asked for: files copied there can be added as a source by the
    tenant's admins, with no operator step. Only this tenant may read it."""
    folder = (Path(settings.RAG_DROP_DIR) / normalise_source_name(tenant_slug)).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


MAX_DROP_ENTRIES = 50


def drop_entries(folder: Path) -> list[dict[str, str | int | bool]]:
    """What the drop folder holds at its top level, folders first, for the sources page: each name, whether it is a
    folder (and a vault or a repository), and how many entries it holds. Links are not followed."""
    entries: list[dict[str, str | int | bool]] = []
    try:
        children = sorted(folder.iterdir(), key=lambda p: (not _real_folder(p), p.name.lower()))
    except OSError:
        return entries
    for child in children[:MAX_DROP_ENTRIES]:
        is_folder = _real_folder(child)
        kind = ("vault" if (child / ".obsidian").is_dir() else "repository" if (child / ".git").exists()
                else "folder") if is_folder else "file"  # fmt: skip
        try:
            held = sum(1 for _ in child.iterdir()) if is_folder else 0
        except OSError:
            held = 0
        entries.append({"name": child.name, "kind": kind, "held": held, "folder": is_folder})
    return entries


def _real_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _operator_added(kind: str) -> list[str]:
    return list(AllowedLocation.objects.filter(kind=kind).values_list("value", flat=True))


def folder_roots(tenant_slug: str | None = None) -> list[Path]:
    """The folders a tenant's web and API users may read inside: its drop folder, then the operator's roots."""
    roots = [drop_folder(tenant_slug)] if tenant_slug else []
    return roots + [*settings.RAG_ALLOWED_FOLDER_ROOTS, *(Path(p).resolve() for p in _operator_added("folder"))]


def git_prefixes() -> list[str]:
    return [*settings.RAG_ALLOWED_GIT_URLS, *_operator_added("git")]


def web_prefixes() -> list[str]:
    return [*settings.RAG_ALLOWED_WEB_PREFIXES, *_operator_added("web")]


def folder_path_check(path: str, tenant_slug: str | None = None) -> Path:
    """Resolve a folder given through the web UI or API: inside the tenant's drop folder (a relative path is read
    from there) or one of the operator's roots.

    The path is resolved with symlinks followed *before* the check, so neither '..' nor a symlink
    can escape an allowed root; the walker itself never follows symlinks inside the tree.
    """
    roots = folder_roots(tenant_slug)
    if not roots:
        raise FolderNotAllowed("Folder sources are disabled for web and API users (set RAG_ALLOWED_FOLDER_ROOTS).")
    given = Path(path.strip()).expanduser()
    if not given.is_absolute():
        if not tenant_slug:
            raise FolderNotAllowed(f"{path} is not an absolute path.")
        given = drop_folder(tenant_slug) / given
    try:
        resolved = given.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise FolderNotAllowed(f"{path} does not exist or cannot be read.") from exc
    if not resolved.is_dir():
        raise FolderNotAllowed(f"{path} is not a folder.")
    if not inside_roots(resolved, roots):
        raise FolderNotAllowed(f"{path} is outside the folders this server allows.")
    return resolved


def inside_roots(resolved: Path, roots: list[Path]) -> bool:
    """A resolved path inside one of `roots`."""
    return any(resolved == root or root in resolved.parents for root in roots)


def git_location_check(location: str, tenant_slug: str | None = None) -> str:
    """A repository named by a web or API user: a URL must start with one of RAG_ALLOWED_GIT_URLS (compared
    without its credential), a local repository must be a folder inside RAG_ALLOWED_FOLDER_ROOTS (resolved first,
    so neither '..' nor a symlink escapes). file:// URLs are refused: a local repository is named by its path."""
    location = location.strip()
    if not is_url(location):
        folder = folder_path_check(location, tenant_slug)
        try:  # the repository exactly there, and every place its git directory leads libgit2 to: inside the roots
            places = [git_dir(folder)]
            places += git_dir_links(places[0])
        except (GitProblem, OSError) as exc:
            raise FolderNotAllowed(str(exc) if isinstance(exc, GitProblem) else f"{location} cannot be read.") from exc
        if not all(inside_roots(place, folder_roots(tenant_slug)) for place in places):
            raise FolderNotAllowed(f"{location}: its git directory lies outside the folders this server allows.")
        return str(folder)
    shown = public_url(location)
    if location.startswith("file:"):
        raise FolderNotAllowed(f"{shown}: name a local repository by its path, not a file:// URL.")
    allowed = git_prefixes()
    if not allowed:
        raise FolderNotAllowed("Git URLs are disabled for web and API users (set RAG_ALLOWED_GIT_URLS).")
    if not any(shown.startswith(prefix) for prefix in allowed) or "/../" in shown or shown.endswith("/.."):
        raise FolderNotAllowed(f"{shown} is not under a repository URL this server allows.")
    return location


def web_location_check(url: str, tenant_slug: str | None = None) -> str:
    """A website's start URL named by a web or API user: http(s), no credential, under one of
    RAG_ALLOWED_WEB_PREFIXES, on an address that is public (or named by that prefix itself: a loopback or private
    host is read only when the operator's prefix says so). Every page and redirect of a sync is checked the same
    way (`web_address_check`). Returns the URL normalised (knowledge/weburl.py): what is read is what was checked."""
    url = url.strip()
    try:
        parsed = web_url(url)
    except BadURL as exc:
        raise FolderNotAllowed(str(exc)) from exc
    if not web_prefixes():
        raise FolderNotAllowed("Website sources are disabled for web and API users (set RAG_ALLOWED_WEB_PREFIXES).")
    web_address_check(parsed.text)
    return parsed.text


def web_address_check(url: str, *, site_root: bool = False) -> str:
    """One URL a sync is about to read (a page, a redirect's target, a sitemap): normalised (knowledge/weburl.py: no
    user name, dot segments resolved after decoding), of an allowed prefix's exact origin and under its path at a
    segment boundary, its host resolving only to public addresses unless the prefix that admits it names that very
    host. `site_root`: a file of the site's root (robots.txt), admitted by any allowed prefix of the same origin.
    Returns the address checked, which the caller connects to (a name is never resolved twice: no DNS rebinding
    between check and read)."""
    try:
        parsed = web_url(url)
    except BadURL as exc:
        raise FolderNotAllowed(str(exc)) from exc
    prefixes = []
    for allowed in web_prefixes():
        try:
            prefix = web_url(allowed)
        except BadURL:
            continue  # a prefix that is no URL admits nothing
        if parsed.under(prefix) or (site_root and parsed.origin == prefix.origin):
            prefixes.append(prefix)
    if not prefixes:
        raise FolderNotAllowed(f"{parsed.text[:200]} is not under a website this server allows.")
    host = parsed.host
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError as exc:
        raise FolderNotAllowed(f"{host} cannot be resolved.") from exc
    named = any(p.host == host and (_is_address(host) or host == "localhost") for p in prefixes)
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
