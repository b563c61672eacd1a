"""source → walk → extract → chunk → embed → SQL (pending version) → indexer → vector store.

The ingest stage's entry points, for the jobs, the command line and the tests. Each step is a module of its own:
- knowledge/ingest/sources.py: the source kinds, one registry (what each kind reads, checks and syncs);
- knowledge/ingest/folder_sync.py, vault_sync.py, git_sync.py, website.py, upload_sync.py: one kind's sync each;
- knowledge/ingest/sync_run.py: the steps every sync shares (file list, one file, failure, checkpoint, finish);
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
    *, source: Source, root: Path, options: IngestOptions = DEFAULT_OPTIONS, job: IngestJob | None = None,
    progress: Callable[[IngestJob], None] | None = None,
) -> IngestJob:  # fmt: skip
    """One sync of a folder or vault source from `root`, as its kind reads it (run in-process: the operator's
    command line, the demo, the tests; a job without `job` records `root` as the operator's)."""
    return sources.kind_of(source).sync(source, str(root), options, job, progress)  # type: ignore[misc]
