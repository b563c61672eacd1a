"""A document's bytes made ready to write: classified, extracted, chunked (code chunks with their symbols and the
file's card), what the embedder and the lexical leg read of each chunk, and the vectors, reused where the tenant
already has the very same input embedded."""

from __future__ import annotations

import hashlib
import logging
from typing import Any, NamedTuple

import numpy as np

from inference.embedders import Embedder, embed_for_index
from knowledge import ids
from knowledge.ingest import symbols
from knowledge.ingest.chunkers import ChunkDraft, assign_pages, chunk_code, chunk_documental
from knowledge.ingest.classify import classify
from knowledge.ingest.extraction import extract
from knowledge.ingest.office import OFFICE_TYPES, PAGED_OFFICE
from knowledge.jobs import report_activity
from knowledge.models import (
    Chunk,
    IngestJob,
    Source,
)  # fmt: skip
from tenants.models import Tenant

logger = logging.getLogger(__name__)

INDEXING_VERSION = 3
CODE_PATH_INDEXING = 2  # from this version on, code chunks are embedded with their file's path
# From this version on, code chunks carry the names they define and each code file has a card: a code file indexed
# before is read again by its source's next sync, even unchanged (knowledge/ingest/symbols.py).
SYMBOLS_INDEXING = 3
CARD_HEADING = "File card"


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


def known_vectors(tenant: Tenant, identity, texts: list[str]) -> dict[str, bytes]:
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
    return embed_missing(embedder, inputs, known_vectors(tenant, embedder.identity, texts))


def embed_missing(embedder: Embedder, inputs: list[str], known: dict[str, Any]) -> list:
    """A vector per input: from `known` (bytes from SQL or arrays), else embedded, each distinct input once."""
    missing = list(dict.fromkeys(text for text in inputs if text not in known))
    fresh = dict(zip(missing, embed_for_index(embedder, missing), strict=True)) if missing else {}
    vectors = []
    for text in inputs:
        vector = fresh[text] if text in fresh else known[text]
        vectors.append(np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else vector)
    return vectors
