"""source → walk → extract → chunk → embed → SQL (pending version) → indexer → vector store.

The ingest stage's entry points, for the jobs, the command line and the tests. Each step is a module of its own:
- knowledge/ingest/sources.py: the source kinds, one registry (what each kind reads, checks, keeps as options);
- knowledge/ingest/producer.py: the seam a kind plugs into (what a producer yields);
- knowledge/ingest/folder_sync.py, vault_sync.py, git_sync.py, website.py: one kind's producer each;
- knowledge/ingest/sync_run.py: SyncRun, one sync of any kind (job, lock, ingest, retire, links, stamp, finish),
  and the steps it shares with an upload's ingest (knowledge/ingest/upload_sync.py);
- knowledge/ingest/versions.py: one document's bytes → a pending version with its chunks and vectors;
- knowledge/ingest/prepare.py: classify, extract, chunk; what the embedder and the lexical leg read; vector reuse;
- knowledge/ingest/lookahead.py: reading and embedding ahead of a sync's writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from knowledge.ingest import sources
from knowledge.ingest.sync_run import wait_for_job as wait_for_job
from knowledge.ingest.upload_sync import ingest_files as ingest_files
from knowledge.models import IngestJob, Source
from knowledge.options import DEFAULT_OPTIONS, IngestOptions
from knowledge.source_rows import folder_source_get_or_create as folder_source_get_or_create


def sync_folder(
    *,
    source: Source,
    root: Path,
    options: IngestOptions = DEFAULT_OPTIONS,
    job: IngestJob | None = None,
    progress: Callable[[IngestJob], None] | None = None,
) -> IngestJob:
    """One sync of a folder or vault source from `root`, as its kind reads it (run in-process: the operator's
    command line, the demo, the tests; a job without `job` records `root` as the operator's)."""
    return sources.sync(source, str(root), options, job, progress)


def sync_git(
    *,
    source: Source,
    location: str | None = None,
    options: IngestOptions = DEFAULT_OPTIONS,
    job: IngestJob | None = None,
) -> IngestJob:
    """One sync of a git source in-process (the operator's command line, the tests): `location` as checked by the
    caller, the source's own path when none; its credential (in `location`, else the source's sealed one) goes to
    libgit2 only: the job records the URL without it."""
    return sources.sync(source, location or source.path, options, job)
