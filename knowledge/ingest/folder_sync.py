"""A folder source's sync: walk it, read what changed (or moved) since the last sync, retire what went. A vault's
notes are read through knowledge/ingest/vault_sync.py, which the source registry hands in."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from inference.embedders import get_embedder
from knowledge import ids, jobs, timeline
from knowledge.ingest.lookahead import changed_files, lookahead_for
from knowledge.ingest.prepare import SYMBOLS_INDEXING
from knowledge.ingest.sync_run import checkpoint, files_listed, finish, ingest_one, record_failure, stopped_when_full
from knowledge.ingest.versions import document_move, retire_documents
from knowledge.ingest.walker import Skip, WalkedFile, walk
from knowledge.jobs import source_locked
from knowledge.models import DocumentVersion, IngestJob, JobFile, Source, Status
from knowledge.options import DEFAULT_OPTIONS, IngestOptions


class Notes:
    """How a folder's files are read. Plain files: as they are, read ahead while earlier ones are written. A kind
    that renders its files first (a vault, knowledge/ingest/vault_sync.py) overrides this."""

    images = False  # whether the walk keeps image files (a vault's notes embed them)
    reads_ahead = True

    def start(self, root: Path, files: list[WalkedFile], known: dict) -> set[str]:
        """Before the first file: the keys to read again even though their own file did not change."""
        return set()

    def read(self, walked: WalkedFile, options: IngestOptions) -> tuple[bytes | None, IngestOptions]:
        """A file's bytes as they are ingested (None: read the file itself) and its options."""
        return None, options

    def finish(self, job: IngestJob) -> None:
        """After the last file and the retirements."""


def _fast_unchanged(source: Source) -> dict[str, tuple[int, float | None]]:
    """key → (size, mtime) of each live document's current version, for the stat-only diff."""
    rows = (
        DocumentVersion.objects.filter(document__source=source, status=Status.ACTIVE, document__status=Status.ACTIVE)
        .exclude(document__mode="code", indexing_version__lt=SYMBOLS_INDEXING)  # read again: symbols and card
        .values_list("document__document_key", "size", "mtime")
    )
    return {key: (size, mtime) for key, size, mtime in rows}


def sync_folder(
    *, source: Source, root: Path, options: IngestOptions = DEFAULT_OPTIONS, job: IngestJob | None = None,
    progress: Callable[[IngestJob], None] | None = None, notes: Notes | None = None,
) -> IngestJob:  # fmt: skip
    """Bring a folder source up to date: add and update what changed, retire what disappeared. A file that moved
    (a new key with the content of one that went) keeps its document and history under the new key. `notes`: how
    its files are read (a vault's, knowledge/ingest/vault_sync.py)."""
    job = job or IngestJob.objects.create(  # run in-process by the operator (CLI): a retry re-reads this root
        tenant=source.tenant, source=source, kind=IngestJob.Kind.FOLDER,
        params={"path": str(Path(root).resolve()), "operator": True},
    )  # fmt: skip
    jobs.start(job)
    notes = notes or Notes()
    # One sync of a source at a time (knowledge/jobs.py); enrichment adds a chunk per document: it does not read ahead.
    wanted = options.enrichment is None and notes.reads_ahead
    embedder = get_embedder()
    with source_locked(source, job), stopped_when_full(job), lookahead_for(embedder if wanted else None) as lookahead:
        entries = list(walk(root, max_bytes=settings.RAG_MAX_FILE_BYTES, images=notes.images))
        files = [e for e in entries if isinstance(e, WalkedFile)]
        skips = [e for e in entries if isinstance(e, Skip)]
        job.skips = [{"key": s.key, "reason": s.reason} for s in skips]
        job.skipped = len(skips)
        job.documents_total, job.files_total = len(files), len(files) + len(skips)
        job.save()
        files_listed(job, [(s.key, JobFile.Status.SKIPPED, s.reason) for s in skips])
        known = _fast_unchanged(source)
        stale = notes.start(root, files, known)
        moves = _Moves(source, known, files)
        if lookahead is not None:
            lookahead.start(source.tenant, source, changed_files(files, known), options.mode, job)
        keep: set[str] = set()
        for number, walked in enumerate(files):
            try:
                key = ids.normalise_document_key(walked.key)
            except ids.InvalidIdentifier as exc:
                record_failure(job, walked.key, str(exc), position=number)
                job.documents_done = number + 1
                continue
            if key in keep:  # "café" written composed and decomposed: one document key, two files
                record_failure(job, walked.key, f"its name is the same as another file's once Unicode-normalised "
                                f"(an NFC/NFD twin of {key}); rename one of them", position=number)  # fmt: skip
                job.documents_done = number + 1
                continue
            keep.add(key)
            if (known.get(key) == (walked.size, walked.mtime) and key not in stale and options.enrichment is None
                    and not options.critical):  # fmt: skip
                job.unchanged += 1
            else:
                if lookahead is not None:
                    lookahead.fill(number)
                data, how = notes.read(walked, options)
                moved = moves.take(key, data, walked.path)
                if not ingest_one(job=job, source=source, key=walked.key, path=walked.path, mtime=walked.mtime,
                                   options=how, embedder=lookahead or embedder, lookahead=lookahead,
                                   position=number, data=data, size=walked.size, force=bool(moved)):  # fmt: skip
                    keep.discard(key)  # skipped (empty): like a file the walker skips, its old version is retired
                if moved:
                    JobFile.objects.filter(job=job, key=walked.key[:1000]).update(reason=f"moved from {moved}")
                if lookahead is not None:
                    lookahead.forget(walked.key)
            job.documents_done = number + 1
            if number % 20 == 0 or number + 1 == len(files):
                checkpoint(job, progress)
        job.retired = retire_documents(source=source, keep_keys=keep)
        notes.finish(job)
        timeline.resolve_pending_links(source_pk=source.pk)
        source.last_synced_at = timezone.now()
        source.save(update_fields=["last_synced_at"])
        return finish(job, progress)


class _Moves:
    """Files that moved since the last sync: a new key whose content is that of a key that went."""

    def __init__(self, source: Source, known: dict, files: list[WalkedFile]) -> None:
        present = set()
        for walked in files:
            try:
                present.add(ids.normalise_document_key(walked.key))
            except ids.InvalidIdentifier:
                continue
        gone = [key for key in known if key not in present]
        self.source, self.known = source, known
        self.gone: dict[str, str] = {}
        if gone:
            rows = DocumentVersion.objects.filter(
                document__source=source, document__document_key__in=gone, status=Status.ACTIVE
            ).values_list("content_hash", "document__document_key")
            self.gone = dict(rows)

    def take(self, key: str, data: bytes | None, path: Path) -> str:
        """The old key this new file moved from ("" when it did not), its document moved to the new key."""
        if not self.gone or key in self.known:
            return ""
        try:
            data = path.read_bytes() if data is None else data
        except OSError:
            return ""  # the ingest reads it again and records why it cannot
        old = self.gone.pop(hashlib.sha256(data).hexdigest(), "")
        return old if old and document_move(self.source, old, key) else ""
