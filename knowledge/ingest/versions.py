"""One document's bytes → a new pending version with its chunks and vectors in SQL (the indexer moves them to the
vector store); retiring the documents a sync no longer finds; a moved file keeping its document."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from core.languages import DEFAULT as DEFAULT_LANGUAGE
from core.languages import detect_many
from inference.embedders import Embedder, get_embedder
from knowledge import claims, ids, timeline, validity
from knowledge.index.lexical import document_vector
from knowledge.index.vectorstore import point_id
from knowledge.ingest.chunkers import ChunkDraft
from knowledge.ingest.enrichment import READ_CHARS, enrich
from knowledge.ingest.extraction import EmptyDocument, ExtractionError
from knowledge.ingest.lookahead import Lookahead
from knowledge.ingest.metadata import file_metadata
from knowledge.ingest.prepare import (
    CARD_HEADING,
    INDEXING_VERSION,
    SYMBOLS_INDEXING,
    embed_reusing,
    embedding_text,
    lexical_text,
    prepare_text,
)
from knowledge.ingest.tables import MAX_TABLES
from knowledge.jobs import report_activity
from knowledge.models import (
    RANKING_ONLY_MODES,
    Chunk,
    Document,
    DocumentTable,
    DocumentVersion,
    IngestJob,
    Source,
    Status,
    Tag,
    readers_text,
)  # fmt: skip
from knowledge.options import DEFAULT_OPTIONS, IngestOptions


@dataclass
class Outcome:
    key: str
    result: str  # added | updated | unchanged | failed
    chunks: int = 0
    error: str = ""
    ocr_pages: int = 0
    document_pk: int | None = None


def ingest_bytes(
    *, source: Source, key: str, data: bytes, source_path: str = "", mtime: float | None = None,
    options: IngestOptions = DEFAULT_OPTIONS, job: IngestJob | None = None, embedder: Embedder | None = None,
    lookahead: Lookahead | None = None, commit: dict | None = None, history: tuple | None = None,
    force: bool = False, size: int | None = None, access: list[str] | None = None,
) -> Outcome:  # fmt: skip
    """Ingest one document's bytes as a new pending version, unless its content is unchanged (`force`: even then).
        A git source's version carries its `commit`; `history` = (served_from, served_until) makes it imported history,
        which the indexer stores as superseded, never serves now (knowledge/ingest/git_sync.py). `access`: a new
    document's own access list, as its system says (a wiki page's rights), set before any of its text is stored; an
    existing document's list is changed through knowledge/access.py first."""
    mode, tags, enrichment, critical = options.mode, options.tags, options.enrichment, options.critical
    tenant = source.tenant
    normalised_key = ids.normalise_document_key(key)
    document_id = ids.document_id(source.source_id, key)
    digest = hashlib.sha256(data).hexdigest()
    document = Document.objects.filter(source=source, document_key=normalised_key).first()
    if document is not None and not force and _kept(document, digest, options, mtime):
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
    languages = detect_many([f"{d.heading}\n{d.text}" for d in drafts])

    with transaction.atomic():
        if document is None:
            document = Document.objects.create(
                tenant=tenant, source=source, document_key=normalised_key, document_id=document_id,
                source_path=source_path, source_type=source_type, mode=doc_mode, title=title,
                status=Status.PENDING, critical=critical, access=access,
                readers=readers_text(source.access if access is None else access),
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
            stated=_stated(data, source_type), commit=commit or {}, historical=history is not None,
            served_from=history[0] if history else None, served_until=history[1] if history else None,
        )  # fmt: skip
        rows = []
        for index, (draft, vector) in enumerate(zip(drafts, vectors, strict=True)):
            chunk_mode = _draft_mode(draft, doc_mode)
            chunk_id = ids.chunk_id(document_id, chunk_mode, 0 if chunk_mode in RANKING_ONLY_MODES else index)
            language = DEFAULT_LANGUAGE if chunk_mode == "code" else languages[index]
            sparse_i, sparse_v = document_vector(lexical_text(display_key, title, draft.heading, draft.text), language)
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
                    language=language,
                    point_id=point_id(chunk_id, number),
                )  # fmt: skip
            )
        Chunk.objects.bulk_create(rows, batch_size=500)
        DocumentTable.objects.bulk_create([
            DocumentTable(tenant=tenant, document=document, version=version, position=position, name=table.name[:500],
                          columns=[{"name": c, "type": t} for c, t in zip(table.columns, table.types, strict=True)],
                          rows=table.rows, row_numbers=table.row_numbers, row_count=len(table.rows))
            for position, table in enumerate(extracted.tables[:MAX_TABLES])
        ], batch_size=50)  # fmt: skip
    return Outcome(key, result, chunks=len(drafts), ocr_pages=extracted.ocr_pages, document_pk=document.pk)


def _kept(document: Document, digest: str, options: IngestOptions, mtime: float | None) -> bool:
    """Whether the document's current version already is these bytes, indexed as this version of ragsite indexes
    and enriched as asked: then nothing is written but its critical flag and its file's mtime."""
    current = document.versions.filter(status__in=[Status.ACTIVE, Status.PENDING]).order_by("-version").first()
    if current is None or current.content_hash != digest or document.status == Status.RETIRED:
        return False
    if document.mode == "code" and current.indexing_version < SYMBOLS_INDEXING:
        return False
    enrichment = options.enrichment
    if enrichment is not None and (
        current.enrichment.get("status") != "ok"
        or current.enrichment.get("model") != enrichment.model_name
        or current.enrichment.get("directives") != enrichment.directives
    ):
        return False
    if options.critical and not document.critical:
        Document.objects.filter(pk=document.pk).update(critical=True, needs_sync=True)
    if mtime is not None and current.mtime != mtime:
        DocumentVersion.objects.filter(pk=current.pk).update(mtime=mtime)
    return True


def _draft_mode(draft: ChunkDraft, doc_mode: str) -> str:
    """A chunk's mode: its document's, or summary (a model wrote it) or card (a code file's card)."""
    if draft.line_start is None and draft.heading == "Summary":
        return "summary"
    if draft.line_start is None and draft.heading == CARD_HEADING:
        return "card"
    return doc_mode


def _stated(data: bytes, source_type: str) -> dict:
    """The validity the file states (frontmatter, Office properties), checked; a problem is named, not dropped."""
    metadata = file_metadata(data, source_type=source_type)
    unreadable = metadata.pop("problems", [])
    stated = validity.stated_values(metadata)
    if unreadable:
        stated["problems"] = [*unreadable, *stated.get("problems", [])]
    return stated


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
