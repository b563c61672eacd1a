"""Sync a git source: each commit that changed a file is a version of its document (knowledge/ingest/git.py reads
the repository; this writes what it found, through the pipeline every source uses).

- The first import reads, for each file of the branch's head, the last `history_depth` commits that changed it:
  the older ones as imported history (stored superseded, each served over its commit's window, so an as-of read
  sees what the repository said then), the newest as the version readers are served.
- A later sync reads only the commits since the last one it read: changed files get their new versions, deleted
  files are retired, a renamed file keeps its history under its new key, the others are not touched.
- A force-push is detected (the last commit read is no longer in the branch): the sync goes on from the merge base,
  and the versions of commits the branch lost are kept, marked `unreachable`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inference.embedders import get_embedder
from knowledge import ids, jobs, timeline
from knowledge.index.storage import is_storage_full
from knowledge.ingest import git
from knowledge.ingest.extraction import ExtractionError
from knowledge.ingest.sync_run import (  # the steps every source's sync shares
    checkpoint,
    files_listed,
    finish,
    ingest_one,
    stopped_when_full,
)  # fmt: skip
from knowledge.ingest.versions import document_move, ingest_bytes, retire_documents
from knowledge.ingest.walker import size_limit
from knowledge.jobs import report_activity, source_locked
from knowledge.models import Document, DocumentVersion, IngestJob, JobFile, Source
from knowledge.options import DEFAULT_OPTIONS, IngestOptions
from knowledge.sealed import CredentialUnreadable, split_credential, unseal

logger = logging.getLogger(__name__)


def cache_dir(source: Source) -> Path:
    """Where the clone of a URL source is kept between syncs."""
    return Path(settings.RAG_GIT_CACHE_DIR) / f"{source.public_id}.git"


def sync_git(
    *, source: Source, location: str | None = None, options: IngestOptions = DEFAULT_OPTIONS,
    job: IngestJob | None = None, progress: Callable[[IngestJob], None] | None = None,
) -> IngestJob:  # fmt: skip
    """Bring a git source up to the head of its branch. `location`: the repository as checked by the caller
    (the source's own path when the operator runs it). Raises git.GitProblem with the reason, nothing changed.
    The URL's credential (given in `location` by the operator, else the source's sealed one) goes to libgit2 only:
    the job records the URL without it."""
    location, given = split_credential(location or source.path)
    try:
        credential = given or unseal(source.credential)
    except CredentialUnreadable as exc:
        raise git.GitProblem(str(exc)) from exc
    job = job or IngestJob.objects.create(
        tenant=source.tenant, source=source, kind=IngestJob.Kind.GIT, params={"location": location, "operator": True}
    )
    jobs.start(job)
    with source_locked(source, job), stopped_when_full(job):
        report_activity(job, f"Reading the repository {git.public_url(location)}")
        depth = source.history_depth or settings.RAG_GIT_HISTORY_DEPTH
        try:  # nothing is changed before the repository and its branch are read
            repository = git.open_repository(location, cache_dir(source), timeout_s=settings.RAG_GIT_TIMEOUT_S,
                                             credential=credential)  # fmt: skip
            plan = git.plan(repository, branch=source.branch, last=source.synced_commit, depth=depth,
                            max_bytes=settings.RAG_MAX_FILE_BYTES)  # fmt: skip
        except git.GitProblem as exc:
            jobs.fail(job, str(exc))
            raise
        job.skips = [{"key": s.key, "reason": s.reason} for s in plan.skips]
        job.skipped = len(plan.skips)
        job.documents_total, job.files_total = len(plan.files), len(plan.files) + len(plan.skips)
        job.unchanged = len(plan.present) - len(plan.files)
        job.params = {**(job.params or {}), "git": {"head": plan.head.sha, "base": plan.base, "commits": plan.commits,
                                                    "rewritten": plan.rewritten, "depth": depth}}  # fmt: skip
        job.save()
        files_listed(job, [(s.key, JobFile.Status.SKIPPED, s.reason) for s in plan.skips])
        embedder = get_embedder()
        keep = {ids.normalise_document_key(key) for key in plan.present}
        imported = 0
        for number, (key, history) in enumerate(sorted(plan.files.items())):
            report_activity(job, f"File {number + 1} of {len(plan.files)}: {key} ({len(history.changes)} commits)")
            moved = bool(history.renamed_from) and document_move(source, history.renamed_from, key)
            new = (
                not moved
                and not Document.objects.filter(source=source, document_key=ids.normalise_document_key(key)).exists()
            )
            made = _history(job, source, key, history, repository, embedder)
            imported += made
            last = history.changes[-1]
            if not ingest_one(job=job, source=source, key=key, data=git.blob_bytes(repository, last.blob),
                               mtime=last.commit.date.timestamp(), options=options, embedder=embedder,
                               position=number, commit=last.commit.as_dict(last.blob),
                               force=moved and not made):  # fmt: skip
                keep.discard(ids.normalise_document_key(key))
            if moved:
                JobFile.objects.filter(job=job, key=key[:1000]).update(reason=f"renamed from {history.renamed_from}")
            elif (
                new
                and made
                and JobFile.objects.filter(job=job, key=key[:1000], status=JobFile.Status.UPDATED).update(
                    status=JobFile.Status.ADDED, reason=f"with {made} earlier version(s) from its history"
                )
            ):  # a file new to the source is added, its history with it
                job.updated, job.added = job.updated - 1, job.added + 1
            job.documents_done = number + 1
            if number % 20 == 0 or number + 1 == len(plan.files):
                checkpoint(job, progress)
        job.retired = retire_documents(source=source, keep_keys=keep)
        lost = _mark_unreachable(source, plan.reachable) if plan.rewritten else 0
        job.params = {**job.params, "git": {**job.params["git"], "history_versions": imported, "unreachable": lost}}
        timeline.resolve_pending_links(source_pk=source.pk)
        source.synced_commit = plan.head.sha
        source.last_synced_at = timezone.now()
        source.save(update_fields=["synced_commit", "last_synced_at"])
        job.save()
        return finish(job, progress)


def _history(job: IngestJob, source: Source, key: str, history: git.FileHistory, repository, embedder) -> int:
    """The older commits of a file as imported history (each served until the next commit's date); an unreadable
    one is passed over (its newest version is what the job reports on). Returns how many were written."""
    made = 0
    changes = history.changes
    limit = size_limit(key, settings.RAG_MAX_FILE_BYTES)
    for change, following in zip(changes[:-1], changes[1:], strict=True):
        window = (change.commit.date, following.commit.date)
        data = git.blob_bytes(repository, change.blob)
        if not data or len(data) > limit:  # an old version over the size limit, or empty: not history worth keeping
            continue
        try:
            outcome = ingest_bytes(source=source, key=key, data=data, source_path=key,
                                   mtime=change.commit.date.timestamp(), job=job, embedder=embedder,
                                   commit=change.commit.as_dict(change.blob), history=window)  # fmt: skip
        except (ExtractionError, ids.InvalidIdentifier, ValueError) as exc:
            logger.info("%s at %s not imported: %s", key, change.commit.sha[:12], exc)
            continue
        except Exception as exc:  # one old version's bug never stops the batch; the log has it
            if is_storage_full(exc):  # every version after it would fail the same way: the job stops and says why
                raise
            logger.exception("%s at %s not imported (unexpected error)", key, change.commit.sha[:12])
            continue
        made += outcome.result != "unchanged"
    return made


def _mark_unreachable(source: Source, reachable: set[str]) -> int:
    """After a force-push: the versions of commits the branch no longer holds are kept, marked."""
    lost = []
    for version in DocumentVersion.objects.filter(document__source=source).exclude(commit={}).only("pk", "commit"):
        sha = (version.commit or {}).get("sha")
        if sha and sha not in reachable and not version.commit.get("unreachable"):
            lost.append((version.pk, {**version.commit, "unreachable": True}))
    with transaction.atomic():
        for pk, commit in lost:
            DocumentVersion.objects.filter(pk=pk).update(commit=commit)
    return len(lost)
