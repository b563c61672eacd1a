"""source → walk → extract → chunk → embed → SQL (pending version) → indexer → vector store."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from django.conf import settings
from django.db import connections, transaction
from django.db.models import Max, Q
from django.utils import timezone

from core.errors import error_reference
from inference.embedders import Embedder, get_embedder
from knowledge import claims, ids, jobs, timeline, validity
from knowledge import links as link_graph
from knowledge.access import access_enforce
from knowledge.index import indexer
from knowledge.index.lexical import document_vector
from knowledge.index.storage import StorageFull, check_free_space, is_storage_full, storage_full_reason
from knowledge.index.vectorstore import point_id
from knowledge.ingest import obsidian, symbols
from knowledge.ingest.chunkers import ChunkDraft, assign_pages, chunk_code, chunk_documental
from knowledge.ingest.classify import classify
from knowledge.ingest.enrichment import READ_CHARS, enrich
from knowledge.ingest.extraction import EmptyDocument, ExtractionError, NeedsOCR, extract
from knowledge.ingest.metadata import file_metadata, problem_text
from knowledge.ingest.office import OFFICE_TYPES, PAGED_OFFICE
from knowledge.ingest.walker import Skip, WalkedFile, walk
from knowledge.jobs import report_activity, source_locked
from knowledge.models import (
    RANKING_ONLY_MODES,
    Chunk,
    Document,
    DocumentLink,
    DocumentVersion,
    IngestJob,
    JobFile,
    Source,
    Status,
    Tag,
    readers_text,
)  # fmt: skip
from knowledge.options import DEFAULT_OPTIONS, IngestOptions
from knowledge.selectors import document_writable_by
from knowledge.source_rows import folder_source_get_or_create as folder_source_get_or_create
from tenants.models import Tenant
from tenants.principals import admits_all_of

logger = logging.getLogger(__name__)

INDEXING_VERSION = 3
CODE_PATH_INDEXING = 2  # from this version on, code chunks are embedded with their file's path
# From this version on, code chunks carry the names they define and each code file has a card: a code file indexed
# before is read again by its source's next sync, even unchanged (knowledge/ingest/symbols.py).
SYMBOLS_INDEXING = 3
CARD_HEADING = "File card"


@dataclass
class Outcome:
    key: str
    result: str  # added | updated | unchanged | failed
    chunks: int = 0
    error: str = ""
    ocr_pages: int = 0
    document_pk: int | None = None


def embedding_text(display_key: str, title: str, mode: str, heading: str, text: str) -> str:
    """What the embedder sees for a chunk: where it sits, then the chunk itself. A code chunk sits at its
    file's path (`requests/sessions.py › class Session › def send`): a bare file name such as `core.py` says
    little, and a question about code often names the package or module. Prose sits under its title."""
    where = display_key if mode == "code" else title
    context = " › ".join(part for part in (where, heading) if part)
    return f"{context}\n{text}" if context else text


def stored_embedding_text(chunk: Chunk) -> str:
    """The embedder input of a stored chunk (its document and version loaded with it)."""
    document = chunk.document
    return embedding_text(document.display_key, chunk.document_version.title, document.mode, chunk.heading, chunk.text)


def lexical_text(key: str, title: str, heading: str, text: str) -> str:
    return f"{key}\n{title}\n{heading}\n{text}"


def _drafts(text: str, *, mode: str, source_type: str) -> list[ChunkDraft]:
    if mode == "code":
        return chunk_code(text, language=source_type)
    if source_type in OFFICE_TYPES.values():
        # Extracted as Markdown (headings, tables); a slide or a sheet (a level-1 heading there) is a chunk of its own.
        return chunk_documental(text, source_type="markdown", break_level=1 if source_type in PAGED_OFFICE else 0)
    return chunk_documental(text, source_type=source_type)


class Prepared(NamedTuple):
    mode: str
    source_type: str
    extracted: Any  # extraction.Extracted
    drafts: list[ChunkDraft]


def prepare_text(source: Source, key: str, data: bytes, mode: str, *, job: IngestJob | None = None) -> Prepared:
    """A document's bytes classified, extracted and chunked; raises ExtractionError / NeedsOCR. A scanned PDF
    takes seconds a page: the job's activity follows its pages."""
    head = data[:200].decode("utf-8", errors="ignore")
    forced = mode if mode != "auto" else (source.default_mode or "auto")
    doc_mode, source_type = classify(key, head, forced=forced)
    if key.lower().endswith(".pdf"):
        source_type = "pdf"

    def progress(done: int, total: int) -> None:
        logger.info("OCR %s: %d of %d pages read", key, done, total)
        report_activity(job, f"Reading {ids.display_name(key)} with OCR: {done} of {total} scanned pages read")

    extracted = extract(data, key=key, source_type=source_type, ocr_languages=source.ocr_languages, progress=progress)
    drafts = _drafts(extracted.text, mode=doc_mode, source_type=source_type)
    assign_pages(drafts, [(p.offset, p.number, p.label) for p in extracted.pages])
    if doc_mode == "code" and drafts:
        _add_symbols(drafts, extracted.text, key=key, language=source_type)
    return Prepared(doc_mode, source_type, extracted, drafts)


def _add_symbols(drafts: list[ChunkDraft], text: str, *, key: str, language: str) -> None:
    """Each code chunk's definitions, and the file's card as one more chunk (ranked, never returned itself)."""
    found = symbols.file_symbols(text, language)
    if found is None or not found.symbols:
        return
    for draft, names in zip(drafts, symbols.chunk_defines(found, [(d.line_start, d.line_end) for d in drafts]),
                            strict=True):  # fmt: skip
        draft.defines = names
    card = ChunkDraft(symbols.card_text(ids.display_name(ids.normalise_document_key(key)), found), 0, 0, CARD_HEADING)
    card.line_start = card.line_end = None  # type: ignore[assignment]  # a card has no lines: it is never shown
    drafts.append(card)


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
        stored = _known_vectors(self._tenant, self.identity, texts)  # ingest_bytes takes these from SQL itself
        pending = set().union(*(wanted for _, wanted, _ in self._ahead)) if self._ahead else set()
        wanted = [t for t in dict.fromkeys(inputs) if t not in stored and t not in self.vectors and t not in pending]
        future = self._embedding.submit(lambda: dict(zip(wanted, _embed_missing(self.embedder, wanted, {}),
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
        return _embed_missing(self.embedder, texts, self.vectors)


def ingest_bytes(
    *, source: Source, key: str, data: bytes, source_path: str = "", mtime: float | None = None,
    options: IngestOptions = DEFAULT_OPTIONS, job: IngestJob | None = None, embedder: Embedder | None = None,
    lookahead: Lookahead | None = None, commit: dict | None = None, history: tuple | None = None,
    force: bool = False, size: int | None = None,
) -> Outcome:  # fmt: skip
    """Ingest one document's bytes as a new pending version, unless its content is unchanged (`force`: even then).
    A git source's version carries its `commit`; `history` = (served_from, served_until) makes it imported history,
    which the indexer stores as superseded, never serves now (knowledge/ingest/git_sync.py)."""
    mode, tags, enrichment, critical = options.mode, options.tags, options.enrichment, options.critical
    tenant = source.tenant
    normalised_key = ids.normalise_document_key(key)
    document_id = ids.document_id(source.source_id, key)
    digest = hashlib.sha256(data).hexdigest()
    document = Document.objects.filter(source=source, document_key=normalised_key).first()
    if document is not None:
        current = document.versions.filter(status__in=[Status.ACTIVE, Status.PENDING]).order_by("-version").first()
        wants_enrichment = enrichment is not None and (
            current is None
            or current.enrichment.get("status") != "ok"
            or current.enrichment.get("model") != enrichment.model_name
            or current.enrichment.get("directives") != enrichment.directives
        )
        if (
            not force
            and current is not None
            and current.content_hash == digest
            and document.status != Status.RETIRED
            and not (document.mode == "code" and current.indexing_version < SYMBOLS_INDEXING)
            and not (wants_enrichment)
        ):
            if critical and not document.critical:
                Document.objects.filter(pk=document.pk).update(critical=True, needs_sync=True)
            if mtime is not None and current.mtime != mtime:
                DocumentVersion.objects.filter(pk=current.pk).update(mtime=mtime)
            return Outcome(key, "unchanged", document_pk=document.pk)

    prepared = lookahead.take(key, digest) if lookahead is not None else None
    doc_mode, source_type, extracted, drafts = prepared or prepare_text(source, key, data, mode, job=job)
    if not drafts:
        if not extracted.text.strip():
            raise EmptyDocument("empty")
        raise ExtractionError("The document has no text to index.")

    embedder = embedder or get_embedder()
    title = extracted.title[:500]
    display_key = ids.display_name(normalised_key)
    enriched: dict = {}
    if enrichment is not None:
        report_activity(job, f"The model {enrichment.model_name} is reading {display_key} (title, summary, topics)…")
        enriched = enrich(request=enrichment, title=title, text=extracted.text)
        if enriched.get("status") == "ok":  # one summary chunk, even when no summary sentence held: title and topics
            enriched = _checked(enriched, extracted.text, embedder)  # still rank the document
            drafts.append(ChunkDraft(_summary_text(title, enriched), None, None, "Summary"))  # type: ignore[arg-type]
    inputs = [embedding_text(display_key, title, doc_mode, d.heading, d.text) for d in drafts]
    vectors = embed_reusing(tenant, embedder, inputs, [d.text for d in drafts])

    with transaction.atomic():
        if document is None:
            document = Document.objects.create(
                tenant=tenant, source=source, document_key=normalised_key, document_id=document_id,
                source_path=source_path, source_type=source_type, mode=doc_mode, title=title,
                status=Status.PENDING, critical=critical, readers=readers_text(source.access),
            )  # fmt: skip
            result = "added"
        else:
            document.source_path = source_path or document.source_path
            document.source_type, document.mode = source_type, doc_mode
            document.critical = document.critical or critical
            document.save(update_fields=["source_path", "source_type", "mode", "critical"])
            result = "updated"
        for name in tags:
            document.tags.add(Tag.objects.get_or_create(tenant=tenant, name=Tag.normalise(name))[0])
        # A newer pending version replaces one that was never activated.
        if history is None:
            DocumentVersion.objects.filter(document=document, status=Status.PENDING, historical=False).update(
                status=Status.FAILED
            )
        number = (document.versions.aggregate(m=Max("version"))["m"] or 0) + 1
        version = DocumentVersion.objects.create(
            tenant=tenant, document=document, version=number, status=Status.PENDING, content_hash=digest,
            size=len(data) if size is None else size, mtime=mtime, title=title, chunk_count=len(drafts),
            embedding_provider=embedder.identity.provider, embedding_model=embedder.identity.model,
            embedding_dims=embedder.identity.dims, indexing_version=INDEXING_VERSION,
            warnings=extracted.warnings, job=job, enrichment=enriched,
            stated=_stated(data, source_type, extracted.text), commit=commit or {}, historical=history is not None,
            served_from=history[0] if history else None, served_until=history[1] if history else None,
        )  # fmt: skip
        rows = []
        for index, (draft, vector) in enumerate(zip(drafts, vectors, strict=True)):
            chunk_mode = _draft_mode(draft, doc_mode)
            chunk_id = ids.chunk_id(document_id, chunk_mode, 0 if chunk_mode in RANKING_ONLY_MODES else index)
            sparse_i, sparse_v = document_vector(lexical_text(display_key, title, draft.heading, draft.text))
            rows.append(
                Chunk(
                    tenant=tenant,
                    document=document,
                    document_version=version,
                    chunk_id=chunk_id,
                    index=index,
                    mode=chunk_mode,
                    heading=draft.heading[:1000],
                    text=draft.text,
                    defines=draft.defines,
                    line_start=draft.line_start,
                    line_end=draft.line_end,
                    page=draft.page,
                    page_label=draft.page_label[:50],
                    page_end=draft.page_end,
                    page_spans=draft.page_spans,
                    content_hash=hashlib.sha256(draft.text.encode()).hexdigest(),
                    status=Status.PENDING,
                    embedding_provider=embedder.identity.provider,
                    embedding_model=embedder.identity.model,
                    embedding_dims=embedder.identity.dims,
                    indexing_version=INDEXING_VERSION,
                    dense=np.asarray(vector, dtype=np.float32).tobytes(),
                    sparse={"i": sparse_i, "v": sparse_v},
                    point_id=point_id(chunk_id, number),
                )  # fmt: skip
            )
        Chunk.objects.bulk_create(rows, batch_size=500)
    return Outcome(key, result, chunks=len(drafts), ocr_pages=extracted.ocr_pages, document_pk=document.pk)


def _draft_mode(draft: ChunkDraft, doc_mode: str) -> str:
    """A chunk's mode: its document's, or summary (a model wrote it) or card (a code file's card)."""
    if draft.line_start is None and draft.heading == "Summary":
        return "summary"
    if draft.line_start is None and draft.heading == CARD_HEADING:
        return "card"
    return doc_mode


def _stated(data: bytes, source_type: str, text: str) -> dict:
    """The validity the file states (frontmatter, Office properties), checked; a problem is named, not dropped."""
    metadata = file_metadata(data, source_type=source_type, text=text)
    unreadable = metadata.pop("problems", [])
    stated = validity.stated_values(metadata)
    if unreadable:
        stated["problems"] = [*unreadable, *stated.get("problems", [])]
    return stated


def _known_vectors(tenant: Tenant, identity, texts: list[str]) -> dict[str, bytes]:
    """Embedder input → stored vector, for this tenant's chunks whose text is one of `texts` (same embedder)."""
    hashes = {hashlib.sha256(text.encode()).hexdigest() for text in texts}
    known: dict[str, bytes] = {}
    candidates = (
        Chunk.objects.for_tenant(tenant)
        .filter(content_hash__in=hashes, embedding_provider=identity.provider, embedding_model=identity.model,
                embedding_dims=identity.dims, dense__isnull=False)
        .exclude(document__mode="code", document_version__indexing_version__lt=CODE_PATH_INDEXING)
        .select_related("document_version", "document")
        .only("text", "heading", "dense", "document_version__title", "document__document_key", "document__mode")
    )  # fmt: skip
    for chunk in candidates.iterator():
        if chunk.dense is not None:
            known.setdefault(stored_embedding_text(chunk), bytes(chunk.dense))
    return known


def embed_reusing(tenant: Tenant, embedder: Embedder, inputs: list[str], texts: list[str]) -> list:
    """Vectors for the embedder inputs, taking any this tenant already has for the very same input and embedder
    from SQL (an edit re-embeds only the chunks it changed; boilerplate shared by documents is embedded once)."""
    return _embed_missing(embedder, inputs, _known_vectors(tenant, embedder.identity, texts))


def _embed_missing(embedder: Embedder, inputs: list[str], known: dict[str, Any]) -> list:
    """A vector per input: from `known` (bytes from SQL or arrays), else embedded, each distinct input once."""
    missing = list(dict.fromkeys(text for text in inputs if text not in known))
    fresh = dict(zip(missing, embedder.embed(missing), strict=True)) if missing else {}
    vectors = []
    for text in inputs:
        vector = fresh[text] if text in fresh else known[text]
        vectors.append(np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else vector)
    return vectors


def _checked(enriched: dict, text: str, embedder: Embedder) -> dict:
    """The enrichment with only the summary sentences and key points the document's text supports (the checks the
    answers use); the rest are dropped and kept, with why, for the document page."""
    sentences = [s for s in claims.SENTENCE_RE.split(str(enriched.get("summary") or "")) if s.strip()]
    points = [str(p) for p in enriched.get("key_points") or []]
    rejected = claims.unsupported([*sentences, *points], text[:READ_CHARS], embed=embedder.embed)
    return {
        **enriched,
        "summary": " ".join(s for s in sentences if s not in rejected),
        "key_points": [p for p in points if p not in rejected],
        "checked": len(sentences) + len(points),
        "dropped": [{"text": sentence, "reason": reason} for sentence, reason in rejected.items()],
    }


def _summary_text(title: str, enriched: dict) -> str:
    lines = [enriched.get("title") or title]
    if enriched.get("summary"):
        lines += ["", f"Summary: {enriched['summary']}"]
    if enriched.get("topics"):
        lines.append("Topics: " + ", ".join(enriched["topics"]))
    if enriched.get("key_points"):
        lines += ["Key points:", *[f"- {point}" for point in enriched["key_points"]]]
    return "\n".join(lines)


def retire_documents(*, source: Source, keep_keys: set[str]) -> int:
    """Retire the source's live documents whose key is not in keep_keys (files that disappeared)."""
    gone = Document.objects.filter(source=source).exclude(status=Status.RETIRED).exclude(document_key__in=keep_keys)
    now = timezone.now()
    count = 0
    for document in gone:
        with transaction.atomic():
            DocumentVersion.objects.filter(document=document, status__in=[Status.ACTIVE, Status.PENDING]).update(
                status=Status.RETIRED, status_changed_at=now
            )
            Chunk.objects.filter(document=document, status__in=[Status.ACTIVE, Status.PENDING]).update(
                status=Status.RETIRED
            )
            Document.objects.filter(pk=document.pk).update(status=Status.RETIRED, needs_sync=True, updated_at=now)
            timeline.retired([document.pk], now)
        count += 1
    return count


def document_move(source: Source, old_key: str, new_key: str) -> bool:
    """A renamed or moved file keeps its document (versions, history, curation) under its new key and id; False
    when there is nothing to move or the new key is taken. Its points take the new id and key at the next drain;
    the caller writes a version under the new key, so its chunks carry the new ids."""
    old, new = ids.normalise_document_key(old_key), ids.normalise_document_key(new_key)
    document = Document.objects.filter(source=source, document_key=old).first()
    if document is None or Document.objects.filter(source=source, document_key=new).exists():
        return False
    Document.objects.filter(pk=document.pk).update(
        document_key=new, document_id=ids.document_id(source.source_id, new_key), source_path=new_key,
        needs_sync=True, updated_at=timezone.now(),
    )  # fmt: skip
    return True


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
    progress: Callable[[IngestJob], None] | None = None,
) -> IngestJob:  # fmt: skip
    """Bring a folder source up to date: add and update what changed, retire what disappeared. A file that moved
    (a new key with the content of one that went) keeps its document and history under the new key. A vault source
    (knowledge/ingest/obsidian.py) reads its notes as Obsidian shows them and keeps their links."""
    job = job or IngestJob.objects.create(  # run in-process by the operator (CLI): a retry re-reads this root
        tenant=source.tenant, source=source, kind=IngestJob.Kind.FOLDER,
        params={"path": str(Path(root).resolve()), "operator": True},
    )  # fmt: skip
    jobs.start(job)
    vault_kind = source.is_vault
    # One sync of a source at a time (knowledge/jobs.py); enrichment adds a chunk per document, and a vault's notes
    # are rendered before they are read, so neither reads ahead.
    wanted = options.enrichment is None and not vault_kind
    with source_locked(source, job), stopped_when_full(job), _lookahead(wanted) as lookahead:
        entries = list(walk(root, max_bytes=settings.RAG_MAX_FILE_BYTES, images=vault_kind))
        files = [e for e in entries if isinstance(e, WalkedFile)]
        skips = [e for e in entries if isinstance(e, Skip)]
        job.skips = [{"key": s.key, "reason": s.reason} for s in skips]
        job.skipped = len(skips)
        job.documents_total, job.files_total = len(files), len(files) + len(skips)
        job.save()
        files_listed(job, [(s.key, JobFile.Status.SKIPPED, s.reason) for s in skips])
        known = _fast_unchanged(source)
        vault = obsidian.Vault([f.key for f in files], root, _embed_rule(source)) if vault_kind else None
        stale = _embedding_changed(source, files, known) if vault_kind else set()
        moves = _Moves(source, known, files, vault)
        if lookahead is not None:
            lookahead.start(source.tenant, source, _changed(files, known), options.mode, job)
        keep: set[str] = set()
        links: dict[str, list[obsidian.Link]] = {}
        embedder = get_embedder()
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
                data, how = _read_walked(walked, vault, options, links)
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
        if vault_kind:
            link_graph.links_store(source, links)
            job.params = {**(job.params or {}), "link_problems": link_graph.links_resolve(source)}
            job.save(update_fields=["params"])
            access_enforce(Document.objects.filter(source=source, links_out__embed=True).distinct()
                           .select_related("source"))  # fmt: skip
        timeline.resolve_pending_links(source_pk=source.pk)
        source.last_synced_at = timezone.now()
        source.save(update_fields=["last_synced_at"])
        return finish(job, progress)


def _read_walked(walked: WalkedFile, vault: obsidian.Vault | None, options: IngestOptions,
                 links: dict[str, list[obsidian.Link]]) -> tuple[bytes | None, IngestOptions]:  # fmt: skip
    """A walked file's bytes as they are ingested (None: read it when ingesting) and its options: a vault's note
    rendered (knowledge/ingest/obsidian.py), its tags added to the job's and its links kept in `links`."""
    if vault is None or not obsidian.is_note(walked.key):
        return None, options
    try:
        text = walked.path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None, options  # the ingest reads it again and records why it cannot
    rendered = obsidian.render(vault, walked.key, text)
    links[ids.normalise_document_key(walked.key)] = rendered.links
    tags = tuple(dict.fromkeys([*options.tags, *rendered.tags]))
    return rendered.text.encode("utf-8"), dataclasses.replace(options, tags=tags)


def _embed_rule(source: Source) -> Callable[[str, str], bool]:
    """Whether a vault note may show another's text: every reader of the note may read the embedded one, by their
    lists now (a note not yet ingested has its source's). Otherwise the embed renders as a placeholder."""
    lists = {key: (own if own is not None else source.access)
             for key, own in Document.objects.filter(source=source).values_list("document_key", "access")}  # fmt: skip

    def access_of(key: str) -> list[str]:
        try:
            return lists.get(ids.normalise_document_key(key), source.access)
        except ids.InvalidIdentifier:
            return []

    return lambda note, embedded: admits_all_of(access_of(embedded), access_of(note))


def _embedding_changed(source: Source, files: list[WalkedFile], known: dict) -> set[str]:
    """Keys of vault notes that embed a file changed (or gone) since the last sync: their text shows its text."""
    present = {f.key: (f.size, f.mtime) for f in files}
    changed = {key for key, stat in known.items() if present.get(key) != stat}
    if not changed:
        return set()
    rows = DocumentLink.objects.filter(source=source, embed=True, resolved__document_key__in=changed)
    return set(rows.values_list("document__document_key", flat=True))


class _Moves:
    """Files that moved since the last sync: a new key whose content is that of a key that went."""

    def __init__(self, source: Source, known: dict, files: list[WalkedFile], vault: obsidian.Vault | None) -> None:
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


HIDDEN_WRITE = (
    "Not ingested: access to this source changed while the upload waited; only someone who sees all of "
    "it may upload to it."
)  # the same words whether the name is taken by a hidden document or not


def _hidden_from(writer: list[str], source: Source, key: str) -> bool:
    """Whether the upload's key names a document its uploader may not see (made hidden after the upload was
    accepted): a new version of it would overwrite what its readers are served."""
    try:
        document = Document.objects.filter(source=source, document_key=ids.normalise_document_key(key)).first()
    except ids.InvalidIdentifier:
        return False
    return document is not None and not document_writable_by(writer, document)


def ingest_files(
    *, source: Source, files: list[tuple[str, bytes]], options: IngestOptions = DEFAULT_OPTIONS,
    job: IngestJob | None = None, skips: list[dict] | None = None, errors: list[dict] | None = None,
) -> IngestJob:  # fmt: skip
    """Ingest uploaded (key, bytes) pairs into a source; other documents of the source are left alone."""
    job = job or IngestJob.objects.create(tenant=source.tenant, source=source, kind=IngestJob.Kind.UPLOAD)
    jobs.start(job)
    with source_locked(source, job), stopped_when_full(job):  # one sync of a source at a time (knowledge/jobs.py)
        job.skips, job.skipped = list(skips or []), len(skips or [])
        job.errors, job.failed = list(errors or []), len(errors or [])
        job.documents_total, job.files_total = len(files), len(files) + job.skipped + job.failed
        job.save()  # the totals show at once, not after the first document (an enriched one takes a minute)
        if not job.files.exists():  # uploads list their files when they are stored (knowledge/services.py)
            files_listed(job, [(k, JobFile.Status.WAITING, "") for k, _ in files])
        embedder = get_embedder()
        writer = (job.params or {}).get("writer")
        for number, (key, data) in enumerate(files):
            report_activity(job, f"Document {number + 1} of {len(files)}: {ids.display_name(key)}")
            if writer is not None and _hidden_from(writer, source, key):
                record_failure(job, key, HIDDEN_WRITE, kind="rejected", position=number)
                job.documents_done = number + 1
                continue
            ingest_one(job=job, source=source, key=key, data=data, options=options, embedder=embedder,
                        position=number)  # fmt: skip
            job.documents_done = number + 1
            checkpoint(job, None)
        return finish(job, None)


@contextmanager
def stopped_when_full(job: IngestJob) -> Iterator[None]:
    """A full disk (or one below RAG_MIN_FREE_BYTES) fails the job with the reason and raises StorageFull."""
    try:
        yield
    except Exception as exc:
        if not isinstance(exc, StorageFull) and not is_storage_full(exc):
            raise
        reason = str(exc) if isinstance(exc, StorageFull) else storage_full_reason(None)
        try:
            jobs.fail(job, reason)
        except Exception:  # noqa: BLE001  (the disk is still full: the log has it, the job stays to be recovered)
            logger.error("Job %s stopped and could not be updated: %s", job.public_id, reason)
        raise StorageFull(reason) from exc


@contextmanager
def _lookahead(wanted: bool) -> Iterator[Lookahead | None]:
    lookahead = Lookahead(get_embedder()) if wanted else None
    try:
        yield lookahead
    finally:
        if lookahead is not None:
            lookahead.close()


def _changed(files: list[WalkedFile], known: dict) -> list[tuple[int, str, Path]]:
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


def ingest_one(
    *, job: IngestJob, source: Source, key: str, options: IngestOptions, embedder: Embedder | Lookahead,
    path: Path | None = None, mtime: float | None = None, data: bytes | None = None,
    lookahead: Lookahead | None = None, position: int = 0, commit: dict | None = None, force: bool = False,
    size: int | None = None, location: str | None = None,
) -> bool:  # fmt: skip
    """Ingest one file into the job's counts and its row of the job's file list; False when it was skipped
    (empty), so a sync retires its old version. A failure is recorded on the job and keeps the old version (True),
    as an unreadable file should. A full disk is not one document's failure: it raises StorageFull and stops the
    job."""
    check_free_space(key)
    started = time.monotonic()
    try:
        if data is None:
            assert path is not None
            data = path.read_bytes()
        outcome = ingest_bytes(
            source=source, key=key, data=data, source_path=location or str(path or key), mtime=mtime, options=options,
            size=size,
            job=job, embedder=embedder, lookahead=lookahead, commit=commit, force=force,  # a Lookahead embeds too
        )  # fmt: skip
    except EmptyDocument:
        job.skipped += 1
        job.skips = [*job.skips, {"key": key, "reason": "empty"}]
        _file_record(job, key, position, JobFile.Status.SKIPPED, reason="empty: no text to index", started=started)
        return False
    except NeedsOCR as exc:
        record_failure(job, key, str(exc), kind="needs_ocr", position=position, started=started)
        return True
    except (ExtractionError, ids.InvalidIdentifier, ValueError) as exc:
        record_failure(job, key, str(exc), position=position, started=started)
        return True
    except Exception as exc:
        if is_storage_full(exc):  # every document after this one would fail the same way
            raise StorageFull(storage_full_reason(key)) from exc
        return _record_unexpected(job, key, exc, position=position, started=started)
    if outcome.result == "unchanged":
        job.unchanged += 1
    else:
        setattr(job, outcome.result, getattr(job, outcome.result) + 1)
        job.chunks_total += outcome.chunks
        job.chunks_done += outcome.chunks
    _file_record(job, key, position, outcome.result, chunks=outcome.chunks, ocr_pages=outcome.ocr_pages,
                 document_pk=outcome.document_pk, started=started)  # fmt: skip
    return True


def files_listed(job: IngestJob, rows: list[tuple[str, str, str]]) -> None:
    """The job's file list, at its start: (key, status, reason) in order."""
    JobFile.objects.bulk_create(
        [JobFile(tenant_id=job.tenant_id, job=job, position=n, key=key[:1000], status=status, reason=reason,
                 kind="skipped" if status == JobFile.Status.SKIPPED else "") for n, (key, status, reason) in
         enumerate(rows)], batch_size=500)  # fmt: skip


def _file_record(job: IngestJob, key: str, position: int, status: str, *, reason: str = "", kind: str = "",
                 chunks: int = 0, ocr_pages: int = 0, document_pk: int | None = None,
                 started: float | None = None) -> None:  # fmt: skip
    """What became of one file, on its row of the job's list (created for a file a sync found)."""
    values = {"status": status, "reason": reason, "kind": kind, "chunks": chunks, "ocr_pages": ocr_pages,
              "document_id": document_pk,
              "seconds": round(time.monotonic() - started, 3) if started is not None else None}  # fmt: skip
    if not JobFile.objects.filter(job=job, key=key[:1000]).update(**values):
        JobFile.objects.create(tenant_id=job.tenant_id, job=job, key=key[:1000], position=position, **values)


def _record_unexpected(job: IngestJob, key: str, exc: Exception, *, position: int, started: float) -> bool:
    """A document that failed for a reason of its own (unreadable, a bug): recorded, the batch goes on."""
    if isinstance(exc, OSError):  # the reason, not the server's path
        logger.warning("Reading %s failed: %s", key, exc)
        record_failure(job, key, f"the file could not be read ({exc.strerror or 'input/output error'})",
                        position=position, started=started)  # fmt: skip
        return True
    reference = error_reference()
    logger.error("Ingesting %s failed (ref %s)", key, reference, exc_info=exc)
    record_failure(job, key, f"unexpected error while indexing; the details were logged (ref {reference})",
                    position=position, started=started)  # fmt: skip
    return True


def record_failure(job: IngestJob, key: str, error: str, *, kind: str = "error", position: int = 0,
                    started: float | None = None) -> None:  # fmt: skip
    error = problem_text(error)  # it may quote the file (a parser's message): cut
    job.failed += 1
    job.errors = [*job.errors, {"key": key[:1000], "error": error, "kind": kind}]
    _file_record(job, key, position, JobFile.Status.FAILED, reason=error, kind=kind, started=started)


def checkpoint(job: IngestJob, progress: Callable[[IngestJob], None] | None) -> None:
    jobs.checkpoint(job)
    if progress:
        progress(job)


def finish(job: IngestJob, progress: Callable[[IngestJob], None] | None) -> IngestJob:
    jobs.indexing(job)
    indexer.drain()
    job.refresh_from_db()
    jobs.finish_if_indexed(job)
    if progress:
        progress(job)
    return job


def wait_for_job(job: IngestJob, *, timeout: float = 600.0) -> IngestJob:
    indexer.wait_until_indexed(Q(job=job), timeout=timeout)
    indexer.drain()
    job.refresh_from_db()
    jobs.finish_if_indexed(job)
    return job
