"""Read a git repository's branch for a git source: which files it holds now, and which commits changed them.

libgit2 through pygit2 (the C library git's own hosts use, in its manylinux wheel): it walks a 5,000-commit history
and diffs each commit against its parent in C, where dulwich does the same in Python (bench/git_sync.py has both
figures). Only committed blobs of the branch are read: never a working tree, never an untracked file.

A sync reads the commits since the one it last read (`base`) along the branch's first-parent line, and each one's
diff against its first parent, renames found by libgit2's similarity: a file's versions are the commits that
changed it. When the last commit read is no longer in the branch's history (a force-push), the walk starts at
the merge base of the old and the new head, and the caller marks the versions of commits the branch lost."""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast
from urllib.parse import unquote

import pathspec
import pygit2
from pygit2.enums import DeltaStatus, FetchPrune, FileMode, RepositoryOpenFlag, SortMode

from knowledge import ids
from knowledge.ingest.producer import SourceProblem
from knowledge.ingest.walker import SKIP_DIRS, Skip, name_skip_reason, size_limit

URL_RE = re.compile(r"^(https?|ssh|git|file)://|^[\w.-]+@[\w.-]+:")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
# A branch name git accepts (git check-ref-format, less its rarer forms): no "..", no leading "-" or "/".
BRANCH_RE = re.compile(r"^(?!-)(?!.*\.\.)(?!/)(?!.*//)[A-Za-z0-9._/-]{1,250}(?<![./])$")
MESSAGE_CHARS = 2000


class GitProblem(SourceProblem, ValueError):
    """The repository cannot be read as asked (not a repository, no such branch, unreachable, a credential
    missing); the message says which, in words a user can act on."""


def is_url(location: str) -> bool:
    return bool(URL_RE.match(location.strip()))


def repository_name(location: str) -> str:
    """A source name from a repository's path or URL: its last part without ".git"."""
    last = re.split(r"[/:]", location.strip().rstrip("/"))[-1]
    return last.removesuffix(".git") or "repository"


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str
    email: str
    date: dt.datetime
    message: str

    def as_dict(self, blob: str = "") -> dict:
        return {"sha": self.sha, "author": self.author, "email": self.email, "date": self.date.isoformat(),
                "message": self.message, **({"blob": blob} if blob else {})}  # fmt: skip


@dataclass(frozen=True)
class Change:
    commit: Commit
    blob: str  # the file's blob id after the commit


@dataclass
class FileHistory:
    key: str  # its path at the head
    changes: list[Change]  # oldest first, at most `depth`
    renamed_from: str = ""  # its path at `base`, when a commit since renamed it


@dataclass
class Plan:
    head: Commit
    base: str  # the commit the walk started after ("" for a first import)
    rewritten: bool  # the last commit read is no longer in the branch (a force-push)
    present: dict[str, str] = field(default_factory=dict)  # path at the head → blob id, files to keep
    files: dict[str, FileHistory] = field(default_factory=dict)  # the present files changed since base
    skips: list[Skip] = field(default_factory=list)
    commits: int = 0  # commits walked
    reachable: set[str] = field(default_factory=set)  # commits of the branch (filled only when rewritten)


def _commit(commit: pygit2.Commit) -> Commit:
    offset = dt.timezone(dt.timedelta(minutes=commit.commit_time_offset))
    return Commit(
        sha=str(commit.id), author=commit.author.name, email=commit.author.email,
        date=dt.datetime.fromtimestamp(commit.commit_time, tz=offset),
        message=commit.message.strip()[:MESSAGE_CHARS],
    )  # fmt: skip


class _Deadline(pygit2.RemoteCallbacks):
    """Stops a clone or fetch that runs past RAG_GIT_TIMEOUT_S (libgit2's own timeouts cover only silence)."""

    def __init__(self, seconds: float, credential: str = "") -> None:
        super().__init__()
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.credential, self.offered = credential, False

    def transfer_progress(self, stats: object) -> None:
        if time.monotonic() > self.deadline:
            raise GitProblem(f"fetching the repository took longer than {self.seconds:.0f} s")

    def credentials(self, url: str, username_from_url: str | None, allowed_types: object) -> pygit2.UserPass:
        """The source's credential (`user:token`, unsealed for this fetch only), offered once."""
        if not self.credential:
            raise GitProblem(f"{public_url(url)} asks for a credential; give one in the URL "
                             "(https://user:token@host/…) or make the repository readable without one")  # fmt: skip
        if self.offered:
            raise GitProblem(f"{public_url(url)} refused the credential given with its URL")
        self.offered = True
        user, _, token = self.credential.partition(":")
        return pygit2.UserPass(unquote(user), unquote(token))


public_url = ids.public_url


def _explained(exc: Exception, location: str) -> GitProblem:
    text = str(exc)
    where = public_url(location)
    if isinstance(exc, GitProblem):
        return exc
    lowered = text.lower()
    if "authentication" in lowered or "401" in text or "403" in text or "credentials" in lowered:
        return GitProblem(f"{where} asks for a credential that was not given or was refused ({public_url(text)})")
    if "not found" in lowered or "404" in text or "does not appear to be a git repository" in lowered:
        return GitProblem(f"{where} is not a git repository that can be read ({public_url(text)})")
    return GitProblem(f"{where} cannot be reached ({public_url(text)})")


def git_dir(folder: Path) -> Path:
    """The git directory of the repository exactly at `folder`, never a parent's: its `.git` folder, the folder its
    `.git` file's `gitdir:` line names, or the folder itself when it is a bare repository; resolved (symlinks
    followed), so the caller checks the place that will be read. GitProblem when the folder is none of these."""
    dot = folder / ".git"
    if dot.is_file():
        try:
            line = dot.read_text(encoding="utf-8", errors="replace")[:4096].strip()
        except OSError as exc:
            raise GitProblem(f"{folder}/.git cannot be read") from exc
        if not line.startswith("gitdir:") or not line[7:].strip():
            raise GitProblem(f"{folder}/.git is neither a repository nor a gitdir: file")
        return (folder / line[7:].strip()).resolve()
    if dot.is_dir():
        return dot.resolve()
    if (folder / "HEAD").is_file() and (folder / "objects").is_dir() and (folder / "refs").is_dir():
        return folder.resolve()
    raise GitProblem(f"{folder} is not a git repository (the folders above it are not searched)")


def git_dir_links(directory: Path) -> list[Path]:
    """The other places a git directory makes libgit2 read: `commondir` (a worktree's shared directory) and every
    object store listed in objects/info/alternates, resolved."""
    found: list[Path] = []
    common = directory / "commondir"
    if common.is_file():
        found.append((directory / common.read_text(errors="replace").strip()).resolve())
    for place in [directory, *found]:
        alternates = place / "objects" / "info" / "alternates"
        if alternates.is_file():
            for line in alternates.read_text(errors="replace").splitlines()[:100]:
                if line.strip() and not line.startswith("#"):
                    found.append(((place / "objects") / line.strip()).resolve())
    return found


def open_repository(location: str, cache: Path, *, timeout_s: float, credential: str = "") -> pygit2.Repository:
    """The repository exactly at a local path (read in place: its git directory, never a parent's), or a bare clone
    of a URL kept under `cache`, fetched now. `credential` (`user:token`) is handed to libgit2 when the server asks;
    the clone's configuration keeps the URL without it."""
    location = public_url(location)
    pygit2.settings.server_connect_timeout = int(min(timeout_s, 30) * 1000)
    pygit2.settings.server_timeout = int(timeout_s * 1000)
    if not is_url(location):
        try:
            return pygit2.Repository(str(git_dir(Path(location))), flags=RepositoryOpenFlag.NO_SEARCH)
        except pygit2.GitError as exc:
            raise GitProblem(f"{location} is not a git repository that can be read") from exc
    try:
        if (cache / "HEAD").is_file():
            repository = pygit2.Repository(str(cache))
            if repository.remotes["origin"].url != location:  # a clone made with the credential in its URL
                repository.remotes.set_url("origin", location)
            repository.remotes["origin"].fetch(
                ["+refs/heads/*:refs/remotes/origin/*", "+HEAD:refs/remotes/origin/HEAD"],
                callbacks=_Deadline(timeout_s, credential), prune=FetchPrune.PRUNE)  # fmt: skip
            return repository
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_name(cache.name + ".partial")
        if partial.exists():
            import shutil

            shutil.rmtree(partial)
        repository = pygit2.clone_repository(location, str(partial), bare=True,
                                             callbacks=_Deadline(timeout_s, credential))  # fmt: skip
        partial.rename(cache)
        return pygit2.Repository(str(cache))
    except (pygit2.GitError, KeyError, OSError, GitProblem) as exc:
        raise _explained(exc, location) from exc


def branch_head(repository: pygit2.Repository, branch: str) -> pygit2.Commit:
    """The branch's newest commit; the repository's HEAD when no branch is named."""
    candidates = [f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"] if branch else [
        "HEAD", "refs/remotes/origin/HEAD"]  # fmt: skip
    for name in candidates:
        try:
            target = repository.revparse_single(name)
        except (KeyError, pygit2.GitError, ValueError):
            continue
        commit = target.peel(pygit2.Commit)
        if commit is not None:
            return commit
    if branch:
        names = sorted({b.split("/", 1)[-1] if b.startswith("origin/") else b for b in repository.branches
                        if not b.endswith("/HEAD")})  # fmt: skip
        raise GitProblem(f"the repository has no branch {branch!r} (it has: {', '.join(names[:20]) or 'none'})")
    raise GitProblem("the repository has no commit on its HEAD yet")


def _tree_files(repository: pygit2.Repository, tree: pygit2.Tree, max_bytes: int) -> tuple[dict[str, str], list[Skip]]:
    """path → blob id of every file of the tree a folder source would read; the rest as Skips (ignore rules of
    .gitignore files in the tree, excluded folders, binary and oversized files: the folder walker's rules)."""
    present: dict[str, str] = {}
    skips: list[Skip] = []
    stack: list[tuple[pygit2.Tree, str, list[tuple[str, pathspec.PathSpec]]]] = [(tree, "", [])]
    while stack:
        current, prefix, inherited = stack.pop()
        specs = list(inherited)
        if ".gitignore" in current:
            lines = blob_bytes(repository, current[".gitignore"].id).decode("utf-8", errors="replace").splitlines()
            specs.append((prefix, pathspec.GitIgnoreSpec.from_lines(lines)))
        for entry in sorted(current, key=lambda e: e.name or ""):
            name = entry.name or ""
            key = f"{prefix}{name}"
            if entry.filemode == FileMode.TREE:
                if name in SKIP_DIRS or (name.startswith(".") and name != ".github"):
                    skips.append(Skip(key + "/", "excluded folder"))
                elif _ignored(specs, key + "/"):
                    skips.append(Skip(key + "/", "ignored by .gitignore"))
                else:
                    stack.append((cast(pygit2.Tree, repository[entry.id]), key + "/", specs))
                continue
            if entry.filemode == FileMode.COMMIT:
                skips.append(Skip(key, "submodule (not read)"))
                continue
            if entry.filemode == FileMode.LINK:
                skips.append(Skip(key, "symbolic link (not followed)"))
                continue
            reason = "ignored by .gitignore" if _ignored(specs, key) else name_skip_reason(name)
            if reason is None:
                size = cast(pygit2.Blob, repository[entry.id]).size
                limit = size_limit(name, max_bytes)
                if size > limit:
                    reason = f"larger than the {limit // 1024} KiB limit ({size // 1024} KiB)"
                elif size == 0:
                    reason = "empty"
            if reason:
                skips.append(Skip(key, reason))
            else:
                present[key] = str(entry.id)
    return present, skips


def _ignored(specs: list[tuple[str, pathspec.PathSpec]], key: str) -> bool:
    ignored = False
    for base, spec in specs:
        result = spec.check_file(key[len(base) :])
        if result.include is not None:
            ignored = bool(result.include)
    return ignored


def plan(repository: pygit2.Repository, *, branch: str, last: str, depth: int, max_bytes: int) -> Plan:
    """What a sync must do to bring a source that last read commit `last` ("" for none) to the branch's head."""
    head = branch_head(repository, branch)
    base, rewritten = "", False
    if last and SHA_RE.match(last):
        known = last in repository
        if known and (last == str(head.id) or repository.descendant_of(head.id, last)):
            base = last
        else:
            rewritten = True
            merge = repository.merge_base(head.id, last) if known else None
            base = str(merge) if merge is not None else ""
    present, skips = _tree_files(repository, head.tree, max_bytes)
    result = Plan(head=_commit(head), base=base, rewritten=rewritten, present=present, skips=skips)
    if base == str(head.id):
        return result
    events: dict[str, list[Change]] = {}
    origins: dict[str, str] = {}  # path now → path at base
    walker = repository.walk(head.id, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.simplify_first_parent()
    if base:
        walker.hide(base)
    for commit in walker:
        result.commits += 1
        info: Commit | None = None
        parent = commit.parents[0].tree if commit.parents else None
        diff = commit.tree.diff_to_tree(swap=True) if parent is None else parent.diff_to_tree(commit.tree)
        statuses = {delta.status for delta in diff.deltas}
        if DeltaStatus.ADDED in statuses and DeltaStatus.DELETED in statuses:
            diff.find_similar()
        for delta in diff.deltas:
            old, new = delta.old_file.path, delta.new_file.path
            if delta.status == DeltaStatus.DELETED:
                events.pop(old, None)
                origins.pop(old, None)
                continue
            info = info or _commit(commit)
            change = Change(info, str(delta.new_file.id))
            if delta.status == DeltaStatus.RENAMED:
                events[new] = [*events.pop(old, []), change][-depth:]
                origins[new] = origins.pop(old, old)
            else:
                history = events.setdefault(new, [])
                history.append(change)
                del history[:-depth]
    for key in present:
        if key in events:
            renamed = origins.get(key, "")
            result.files[key] = FileHistory(key, events[key], renamed_from=renamed if renamed != key else "")
    if rewritten:
        result.reachable = {str(c.id) for c in repository.walk(head.id)}
    return result


def blob_bytes(repository: pygit2.Repository, blob: str | pygit2.Oid) -> bytes:
    return cast(pygit2.Blob, repository[blob]).data
