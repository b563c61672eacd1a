"""Reading and embedding ahead of a sync's writes (see Lookahead)."""

from __future__ import annotations

import hashlib
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connections

from inference.embedders import Embedder
from knowledge import ids
from knowledge.ingest.prepare import Prepared, embed_missing, embedding_text, known_vectors, prepare_text
from knowledge.ingest.walker import WalkedFile
from knowledge.models import (
    IngestJob,
    Source,
)  # fmt: skip
from tenants.models import Tenant


class Lookahead:
    """Prepares and embeds the next files of a sync while the current ones are written, in three stages.

    Embedding each small document on its own costs about 12% of the embedder's throughput (measured:
    380 chunks of 60 documents, 36.2 chunks/s one document at a time against 40.9 all at once), so chunks
    are embedded in batches of at least BATCH_CHUNKS, across files. Three stages overlap:
    - a thread reads, extracts and chunks the files in order, a batch at a time, up to DEPTH batches ahead
      (PDF extraction is pure Python and takes a core of its own);
    - a thread embeds the next batch (on every replica of the embedder) while
    - the sync's own thread writes the current batch's documents to SQL and the vector store.
    The extracted text is kept, so nothing is extracted twice. The SQL lookup of vectors already stored
    (an edit, boilerplate) is made on the sync's thread, before the batch is embedded. Nothing is written
    here: a file that fails is prepared again by ingest_bytes, which reports it, and a file whose bytes
    changed since is prepared again too. `embed` answers from what was embedded ahead and embeds only what
    it has not seen."""

    BATCH_CHUNKS = 256
    DEPTH = 2  # batches prepared or embedded ahead of the one being written

    def __init__(self, embedder: Embedder) -> None:
        self.embedder, self.identity = embedder, embedder.identity
        self.vectors: dict[str, Any] = {}
        self.prepared: dict[tuple[str, str], tuple[int, Prepared]] = {}  # (key, sha256) → (position, prepared)
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lookahead")
        self._embedding = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lookahead-embed")
        self._ready: queue.Queue[list[tuple[int, str, str, Prepared]] | None] = queue.Queue(maxsize=self.DEPTH)
        self._ahead: deque[tuple[list, set[str], Future[dict[str, Any]]]] = deque()  # being embedded, in order
        self._stop = threading.Event()
        self._tenant: Tenant | None = None
        self._job: IngestJob | None = None
        self._read_all = True
        self.failed: dict[tuple[str, str], Exception] = {}  # (key, sha256) → why it could not be prepared

    def start(
        self, tenant: Tenant, source: Source, files: list[tuple[int, str, Path]], mode: str, job: IngestJob | None
    ) -> None:
        """Begin reading `files` ((position in the sync, key, path), in the order the sync visits them)."""
        self._tenant, self._job, self._read_all = tenant, job, not files
        if files:
            self._reader.submit(self._read, source, files, mode)

    def take(self, key: str, digest: str) -> Prepared | None:
        """What was prepared for these bytes, or None; raises what preparing them raised (a scan is not read
        twice to fail twice)."""
        failure = self.failed.pop((key, digest), None)
        if failure is not None:
            raise failure
        entry = self.prepared.pop((key, digest), None)
        return entry[1] if entry else None

    def forget(self, key: str) -> None:
        """The file was handled: drop what was prepared for it."""
        for entry in [e for e in self.prepared if e[0] == key]:
            del self.prepared[entry]
        for entry in [e for e in self.failed if e[0] == key]:
            del self.failed[entry]

    def close(self) -> None:
        self._stop.set()
        while True:  # let a reader blocked on a full queue see the stop
            try:
                self._ready.get_nowait()
            except queue.Empty:
                break
        self._reader.shutdown(wait=True, cancel_futures=True)
        self._embedding.shutdown(wait=True, cancel_futures=True)

    def _read(self, source: Source, files: list[tuple[int, str, Path]], mode: str) -> None:
        batch, chunks = [], 0
        try:
            for position, key, path in files:
                if self._stop.is_set():
                    return
                try:
                    data = path.read_bytes()
                except OSError:
                    continue  # ingest_bytes meets the same error and records it
                digest = hashlib.sha256(data).hexdigest()
                try:
                    prepared = prepare_text(source, key, data, mode, job=self._job)
                except Exception as exc:  # noqa: BLE001  (ingest_bytes takes it and records it)
                    self.failed[(key, digest)] = exc
                    continue
                batch.append((position, key, digest, prepared))
                chunks += len(prepared.drafts)
                if chunks >= self.BATCH_CHUNKS:
                    self._put(batch)
                    batch, chunks = [], 0
            if batch:
                self._put(batch)
        finally:
            self._put(None)  # the end: the sync prepares anything else itself
            connections.close_all()  # this thread's own connection (activity reports)

    def _put(self, item: list | None) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _embed_next(self, *, wait: bool) -> bool:
        """Hand the next prepared batch to the embedding thread; False when there is none (yet, or at all)."""
        if self._read_all:
            return False
        try:
            batch = self._ready.get() if wait else self._ready.get_nowait()
        except queue.Empty:
            return False
        if batch is None:
            self._read_all = True
            return False
        inputs: list[str] = []
        texts: list[str] = []
        for _, key, _, prepared in batch:
            display_key, title = ids.display_name(ids.normalise_document_key(key)), prepared.extracted.title[:500]
            inputs += [embedding_text(display_key, title, prepared.mode, d.heading, d.text) for d in prepared.drafts]
            texts += [d.text for d in prepared.drafts]
        assert self._tenant is not None  # set by start()
        stored = known_vectors(self._tenant, self.identity, texts)  # ingest_bytes takes these from SQL itself
        pending = set().union(*(wanted for _, wanted, _ in self._ahead)) if self._ahead else set()
        wanted = [t for t in dict.fromkeys(inputs) if t not in stored and t not in self.vectors and t not in pending]
        future = self._embedding.submit(lambda: dict(zip(wanted, embed_missing(self.embedder, wanted, {}),
                                                         strict=True)))  # fmt: skip
        self._ahead.append((batch, set(wanted), future))
        return True

    def fill(self, number: int) -> None:
        """Before the sync's file at `number`: have its batch's vectors ready, and the next batches under way."""
        if len(self._ahead) < self.DEPTH:
            self._embed_next(wait=False)
        if any(position >= number for position, _ in self.prepared.values()):
            return  # still in the current batch
        self.prepared.clear()  # what is left is for files the sync did not ingest
        if not self._ahead and not self._embed_next(wait=True):
            return
        batch, _, future = self._ahead.popleft()
        self.vectors = future.result()
        self.prepared = {(key, digest): (position, prepared) for position, key, digest, prepared in batch}
        if len(self._ahead) < self.DEPTH:
            self._embed_next(wait=False)

    def embed(self, texts: list[str]):
        return embed_missing(self.embedder, texts, self.vectors)


@contextmanager
def lookahead_for(embedder: Embedder | None) -> Iterator[Lookahead | None]:
    """A Lookahead on this embedder for the duration of a sync (None: the sync does not read ahead)."""
    lookahead = Lookahead(embedder) if embedder is not None else None
    try:
        yield lookahead
    finally:
        if lookahead is not None:
            lookahead.close()


def changed_files(files: list[WalkedFile], known: dict) -> list[tuple[int, str, Path]]:
    """(position, key, path) of the files whose size or mtime changed (the others are not read at all)."""
    changed = []
    for position, walked in enumerate(files):
        try:
            key = ids.normalise_document_key(walked.key)
        except ids.InvalidIdentifier:
            continue
        if known.get(key) != (walked.size, walked.mtime):
            changed.append((position, walked.key, walked.path))
    return changed
