"""A git source's producer: each commit that changed a file is a version of its document (knowledge/ingest/git.py reads
the repository; this yields what it found, and the sync — knowledge/ingest/sync_run.py — writes it).

- The first import reads, for each file of the branch's head, the last `history_depth` commits that changed it:
  the older ones as imported history (stored superseded, each served over its commit's window, so an as-of read
  sees what the repository said then), the newest as the version readers are served.
- A later sync reads only the commits since the last one it read: changed files get their new versions, deleted
  files are retired, a renamed file keeps its history under its new key, the others are not touched.
- A force-push is detected (the last commit read is no longer in the branch): the sync goes on from the merge base,
  and the versions of commits the branch lost are kept, marked `unreachable`.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_lazy as _

from knowledge.ingest import git
from knowledge.ingest.producer import (
    Activity,
    Done,
    Event,
    Item,
    KindConfig,
    Past,
    Planned,
    Reading,
    Skipped,
    Unchanged,
    option,
)
from knowledge.ingest.walker import size_limit
from knowledge.models import Source


def cache_dir(source: Source) -> Path:
    """Where the clone of a URL source is kept between syncs."""
    return Path(settings.RAG_GIT_CACHE_DIR) / f"{source.public_id}.git"


def forget_clone(source: Source) -> None:
    """A URL source's bare clone goes with the source (a local repository has none)."""
    shutil.rmtree(cache_dir(source), ignore_errors=True)


@dataclass(frozen=True)
class GitConfig(KindConfig):
    """A git source's options."""

    branch: str = option(_("Branch (git; empty: HEAD)"), _("The branch read (blank: the repository's HEAD)."))
    history_depth: int | None = option(
        _("History depth"),
        _("Commits of each file's history the first import reads (blank: RAG_GIT_HISTORY_DEPTH)."),
        default=None,
    )

    def check(self) -> None:
        if self.branch and not git.BRANCH_RE.match(self.branch):
            raise ValueError(f"{self.branch!r} is not a branch name.")
        if self.history_depth is not None and not 1 <= int(self.history_depth) <= 100_000:
            raise ValueError("The history depth is a number of commits from 1 to 100,000.")


def produce_git(reading: Reading) -> Iterator[Event]:
    """A git source's files at the head of its branch, each with the commits that changed it since the last sync
    (see the module). Raises git.GitProblem (a SourceProblem) with the reason before yielding anything."""
    source, location, config = reading.source, reading.location, reading.config
    yield Activity(f"Reading the repository {git.public_url(location)}")
    depth = config.history_depth or settings.RAG_GIT_HISTORY_DEPTH
    repository = git.open_repository(
        location, cache_dir(source), timeout_s=settings.RAG_GIT_TIMEOUT_S, credential=reading.credential
    )
    plan = git.plan(
        repository,
        branch=config.branch,
        last=reading.state.get("commit", ""),
        depth=depth,
        max_bytes=settings.RAG_MAX_FILE_BYTES,
    )
    for skip in plan.skips:
        yield Skipped(skip.key, skip.reason)
    yield Planned(len(plan.files))
    for key in sorted(set(plan.present) - set(plan.files)):
        yield Unchanged(key, counted=False)
    limit = size_limit  # an old version over the size limit, or empty: not history worth keeping
    for number, (key, history) in enumerate(sorted(plan.files.items())):
        yield Activity(f"File {number + 1} of {len(plan.files)}: {key} ({len(history.changes)} commits)")
        changes, last = history.changes, history.changes[-1]
        most = limit(key, settings.RAG_MAX_FILE_BYTES)

        def read(blob: Any, most: int = most) -> bytes:
            data = git.blob_bytes(repository, blob)
            return data if data and len(data) <= most else b""

        past = [
            Past(
                partial(read, change.blob),
                change.commit.date.timestamp(),
                change.commit.as_dict(change.blob),
                (change.commit.date, following.commit.date),
            )
            for change, following in zip(changes[:-1], changes[1:], strict=True)
        ]
        yield Item(
            key,
            data=git.blob_bytes(repository, last.blob),
            position=number,
            mtime=last.commit.date.timestamp(),
            commit=last.commit.as_dict(last.blob),
            history=tuple(past),
            moved_from=history.renamed_from or "",
            moved_how="renamed",
        )
    report = {
        "head": plan.head.sha,
        "base": plan.base,
        "commits": plan.commits,
        "rewritten": plan.rewritten,
        "depth": depth,
    }
    yield Done(
        state={**reading.state, "commit": plan.head.sha},
        report={"git": report},
        reachable=frozenset(plan.reachable) if plan.rewritten else None,
    )
