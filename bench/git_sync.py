"""Git sources: the first import of a 5,000-commit repository, an incremental sync, and the history walk in pygit2
against dulwich (the two libraries the issue names).

    python bench/git_sync.py [COMMITS] [FILES]

Builds a repository with git fast-import (COMMITS commits, default 5,000, each changing one or two of FILES
Markdown files, default 200), then times:
- the history walk alone (every commit of the branch diffed against its first parent) with pygit2 (libgit2, what
  knowledge/ingest/git.py uses) and with dulwich, when dulwich is installed (`pip install dulwich==1.2.21`);
- the first import through the real pipeline and embedder (RAG_GIT_HISTORY_DEPTH, default 50 commits a file), with
  how many versions were written and how long the embedder took of it;
- an incremental sync after 10 new commits (only those are read).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _django import setup


def build(root: Path, commits: int, files: int) -> None:
    """A repository with `commits` commits on main, through git fast-import (seconds, not minutes)."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    lines: list[str] = []
    contents = {n: [f"# Topic {n}", "", f"Topic {n} starts here."] for n in range(files)}
    for number in range(commits):
        touched = {number % files, (number * 7 + 3) % files} if number % 3 == 0 else {number % files}
        lines += ["commit refs/heads/main", f"mark :{number + 1}",
                  f"committer Bench <bench@example.com> {1_700_000_000 + number * 600} +0000"]  # fmt: skip
        message = f"Change {number}: topics {sorted(touched)}"
        lines += [f"data {len(message.encode())}", message]
        if number:
            lines.append(f"from :{number}")
        for topic in sorted(touched):
            contents[topic].append(
                f"Revision {number} adds a sentence about item {number * 13 % 997} to topic {topic}."
            )
            body = "\n".join(contents[topic][-40:]) + "\n"  # a note of a few KiB, as real pages are
            lines += [f"M 100644 inline docs/area{topic % 10}/topic{topic:03d}.md", f"data {len(body.encode())}", body]
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="\n".join(lines).encode() + b"\n", check=True)


def walk_pygit2(root: Path) -> tuple[int, float]:
    import pygit2
    from pygit2.enums import SortMode

    started = time.perf_counter()
    repository = pygit2.Repository(str(root))
    walker = repository.walk(repository.head.target, SortMode.TOPOLOGICAL | SortMode.REVERSE)
    walker.simplify_first_parent()
    changes = 0
    for commit in walker:
        diff = (
            commit.parents[0].tree.diff_to_tree(commit.tree) if commit.parents else commit.tree.diff_to_tree(swap=True)
        )
        changes += len(diff)
    return changes, time.perf_counter() - started


def walk_dulwich(root: Path) -> tuple[int, float] | None:
    try:
        from dulwich.diff_tree import tree_changes
        from dulwich.repo import Repo
    except ImportError:
        return None
    started = time.perf_counter()
    repository = Repo(str(root))
    changes = 0
    for entry in repository.get_walker(include=[repository.head()], reverse=True):
        commit = entry.commit
        parent = repository[commit.parents[0]].tree if commit.parents else None
        changes += sum(1 for _ in tree_changes(repository.object_store, parent, commit.tree))
    return changes, time.perf_counter() - started


def main() -> None:
    commits = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    setup()
    from django.conf import settings

    from inference.embedders import get_embedder
    from knowledge.index import indexer
    from knowledge.ingest.pipeline import sync_git
    from knowledge.models import DocumentVersion
    from knowledge.services import git_source_create
    from tenants.services import tenant_create

    root = Path(tempfile.mkdtemp(prefix="ragsite-git-")) / "repo"
    started = time.perf_counter()
    build(root, commits, files)
    print(f"repository: {commits} commits over {files} files, built in {time.perf_counter() - started:.1f} s")

    changes, seconds = walk_pygit2(root)
    print(f"history walk, pygit2 {__import__('pygit2').__version__}: {changes} file changes in {seconds:.2f} s")
    other = walk_dulwich(root)
    if other is None:
        print("history walk, dulwich: not installed (pip install dulwich==1.2.21 to compare)")
    else:
        print(f"history walk, dulwich {__import__('dulwich').__version__}: {other[0]} file changes in {other[1]:.2f} s "
              f"({other[1] / seconds:.1f}x pygit2)")  # fmt: skip

    embedder = get_embedder()
    embedder.embed(["warm up"])
    spent = {"s": 0.0, "texts": 0}
    original = type(embedder).embed

    def timed(self, texts):  # type: ignore[no-untyped-def]
        begun = time.perf_counter()
        try:
            return original(self, texts)
        finally:
            spent["s"] += time.perf_counter() - begun
            spent["texts"] += len(texts)

    type(embedder).embed = timed  # type: ignore[method-assign]
    tenant = tenant_create(slug="bench")
    source = git_source_create(tenant=tenant, name="repo", location=str(root), operator=True)
    started = time.perf_counter()
    job = sync_git(source=source)
    indexer.drain()
    elapsed = time.perf_counter() - started
    versions = DocumentVersion.objects.filter(document__source=source).count()
    print(f"first import (depth {settings.RAG_GIT_HISTORY_DEPTH} commits a file): {job.added} documents, "
          f"{versions} versions, {job.chunks_done} chunks of current versions in {elapsed:.1f} s "
          f"(embedder {spent['s']:.1f} s for {spent['texts']} texts; the rest is git, extraction, SQL and the "
          f"vector store)")  # fmt: skip

    more = ["commit refs/heads/main", f"committer Bench <bench@example.com> {1_800_000_000} +0000", "data 9",
            "new pages", "from refs/heads/main^0"]  # fmt: skip
    for number in range(10):
        body = f"# New {number}\n\nA new page about item {number}.\n"
        more += [f"M 100644 inline docs/new/new{number}.md", f"data {len(body.encode())}", body]
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input="\n".join(more).encode() + b"\n", check=True)
    spent["s"], spent["texts"] = 0.0, 0
    started = time.perf_counter()
    again = sync_git(source=type(source).objects.get(pk=source.pk))
    indexer.drain()
    print(f"incremental sync: {again.params['git']['commits']} commit read, {again.added} added, "
          f"{again.unchanged} unchanged (not read) in {time.perf_counter() - started:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
