"""A folder source's producer (knowledge/ingest/producer.py): walk it, read what changed (or moved) since the last
sync; what went is retired by the sync. A vault's notes are read through knowledge/ingest/vault_sync.py."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from knowledge import ids
from knowledge.ingest.lookahead import changed_files
from knowledge.ingest.prepare import SYMBOLS_INDEXING
from knowledge.ingest.producer import Done, Event, Failed, Item, Planned, Reading, Skipped, Unchanged
from knowledge.ingest.walker import Skip, WalkedFile, walk
from knowledge.models import DocumentVersion, Source, Status


class Notes:
    """How a folder's files are read. Plain files: as they are, read ahead while earlier ones are written. A kind
    that renders its files first (a vault, knowledge/ingest/vault_sync.py) overrides this."""

    images = False  # whether the walk keeps image files (a vault's notes embed them)
    reads_ahead = True

    def start(self, root: Path, files: list[WalkedFile], known: dict) -> set[str]:
        """Before the first file: the keys to read again even though their own file did not change."""
        return set()

    def read(self, walked: WalkedFile) -> tuple[bytes | None, tuple[str, ...], tuple | None]:
        """A file's bytes as they are ingested (None: read the file itself), tags it adds, and the links it holds
        (None: a kind without links)."""
        return None, (), None


def _fast_unchanged(source: Source) -> dict[str, tuple[int, float | None]]:
    """key → (size, mtime) of each live document's current version, for the stat-only diff."""
    rows = (
        DocumentVersion.objects.filter(document__source=source, status=Status.ACTIVE, document__status=Status.ACTIVE)
        .exclude(document__mode="code", indexing_version__lt=SYMBOLS_INDEXING)  # read again: symbols and card
        .values_list("document__document_key", "size", "mtime")
    )
    return {key: (size, mtime) for key, size, mtime in rows}


def produce_folder(reading: Reading, notes: Notes | None = None) -> Iterator[Event]:
    """A folder's files: walked, those whose size or mtime did not change since the last sync kept unread, the
    others read (a file that moved — a new key with the content of one that went — keeps its document and history
    under the new key). `notes`: how its files are read (a vault's, knowledge/ingest/vault_sync.py)."""
    source, options, root = reading.source, reading.options, Path(reading.location)
    notes = notes or Notes()
    entries = list(walk(root, max_bytes=settings.RAG_MAX_FILE_BYTES, images=notes.images))
    files = [e for e in entries if isinstance(e, WalkedFile)]
    for skip in entries:
        if isinstance(skip, Skip):
            yield Skipped(skip.key, skip.reason)
    known = _fast_unchanged(source)
    stale = notes.start(root, files, known)
    moves = _Moves(source, known, files)
    ahead = tuple(changed_files(files, known)) if notes.reads_ahead else ()
    yield Planned(len(files), ahead=ahead)
    seen: set[str] = set()
    for number, walked in enumerate(files):
        try:
            key = ids.normalise_document_key(walked.key)
        except ids.InvalidIdentifier as exc:
            yield Failed(walked.key, str(exc), keep=False, position=number)
            continue
        if key in seen:  # "café" written composed and decomposed: one document key, two files
            yield Failed(
                walked.key,
                f"its name is the same as another file's once Unicode-normalised (an NFC/NFD "
                f"twin of {key}); rename one of them",
                keep=False,
                position=number,
            )
            continue
        seen.add(key)
        if (
            known.get(key) == (walked.size, walked.mtime)
            and key not in stale
            and options.enrichment is None
            and not options.critical
        ):
            yield Unchanged(walked.key)
            continue
        data, tags, links = notes.read(walked)
        yield Item(
            walked.key,
            data=data,
            path=walked.path,
            position=number,
            mtime=walked.mtime,
            size=walked.size,
            moved_from=moves.take(key, data, walked.path),
            tags=tags,
            links=links,
        )
    yield Done()


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
        """The old key this new file moved from ("" when it did not)."""
        if not self.gone or key in self.known:
            return ""
        try:
            data = path.read_bytes() if data is None else data
        except OSError:
            return ""  # the ingest reads it again and records why it cannot
        old = self.gone.pop(hashlib.sha256(data).hexdigest(), "")
        return old  # the sync moves its document (a write); a producer only says so
