"""The read side of the knowledge base: every door (pages, REST, Dify, MCP, chat, bootstrap) reads documents,
chunks, sources and jobs through these functions, so one rule has one owner.

- Every function takes the tenant and scopes itself; a public id of another tenant finds nothing.
- The scope rule of a search lives here once (`scope_documents`, `scope_chunks`): a tag matches a
  chunk's own tags, its document's and its source's, as the vector payloads do (knowledge/index/indexer.py).
- One set of document filters (`DocumentFilters`) serves the documents page and the documents API.
- Who sees a document is decided here, once, for SQL (`visible_documents`, `visible_chunks`): every read of
  documents, chunks, sources or jobs takes the request's Viewer (tenants/principals.py) and starts from these.
  The vector query applies the same principals inside Qdrant (knowledge/index/vectorstore.py, `access`).

Writes live in knowledge/services.py; shapes (what a location or a hit looks like) in knowledge/shapes.py.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max, OuterRef, Q, Subquery

from knowledge import ids
from knowledge.models import (
    RANKING_ONLY_MODES,
    AllowedLocation,
    Chunk,
    Document,
    DocumentTable,
    DocumentVersion,
    IngestJob,
    JobFile,
    Source,
    Status,
    Tag,
    readers_match,
)
from tenants.models import Tenant, TenantQuerySet
from tenants.principals import Viewer, admits_all_of


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return None


# --- the access rule ----------------------------------------------------------------------------------------
def visible_documents(viewer: Viewer) -> TenantQuerySet[Document]:
    """Every document of the viewer's tenant the viewer may see (any status)."""
    return Document.objects.for_tenant(viewer.tenant).filter(readers_match(viewer))


def visible_versions(viewer: Viewer, document: Document) -> TenantQuerySet[DocumentVersion]:
    """The versions of a document the viewer sees (itself visible): each passes its own list too, the notes whose
    text that version carries (models.VersionCarry), so history is decided like the version served now."""
    rows = DocumentVersion.objects.for_tenant(viewer.tenant).filter(document=document)
    return rows.filter(readers_match(viewer, path="document__"), readers_match(viewer))


def visible_chunks(viewer: Viewer) -> TenantQuerySet[Chunk]:
    """Every chunk of the viewer's tenant it may read: its document's list and its version's both admit the viewer."""
    rule = readers_match(viewer, path="document__") & readers_match(viewer, path="document_version__")
    return Chunk.objects.for_tenant(viewer.tenant).filter(rule)


def query_principals(viewer: Viewer) -> list[str] | None:
    """The principals a vector query of this viewer filters on, or None when the filter would leave nothing out:
    the viewer holds a principal of every access list the tenant uses (an admin; anyone in a tenant that restricts
    nothing). Then the query runs as fast as before access lists existed. The lists in use are the sources' and the
    documents' own (a document without its own list enforces its source's, except while a change is pending: those
    are read too). Retrieval checks each hit against its document's enforced list in SQL as well, so a list missed
    here could cost recall, never show a hidden document."""
    if viewer.principals is None:
        return None
    tenant = viewer.tenant
    lists = {tuple(access) for access in Source.objects.for_tenant(tenant).values_list("access", flat=True)}
    own = Document.objects.for_tenant(tenant).filter(Q(access__isnull=False) | Q(access_pending=True))
    lists |= {tuple(readers.split()) for readers in own.order_by().values_list("readers", flat=True).distinct()}
    carrying = DocumentVersion.objects.for_tenant(tenant).exclude(readers=" tenant ")  # versions' own lists
    lists |= {tuple(readers.split()) for readers in carrying.order_by().values_list("readers", flat=True).distinct()}
    if all(viewer.sees(access) for access in lists):
        return None
    return viewer.principal_list


def source_hides_documents(*, viewer: Viewer, source: Source) -> bool:
    """Whether the source holds a document (of any status) the viewer may not see: a write to the whole source
    (upload, sync, delete, settings) by such a viewer is refused, with a message that names no document."""
    if viewer.sees_all:
        return False
    return Document.objects.for_tenant(viewer.tenant).filter(source=source).exclude(readers_match(viewer)).exists()


def document_writable_by(principals: list[str] | None, document: Document) -> bool:
    """Whether a write recorded as made by these principals (a job's `readers`; None: someone who sees all) may
    create a version of, retire or re-point this document: they may see it."""
    return principals is None or not set(principals).isdisjoint(document.reader_list)


# --- the scope rule ------------------------------------------------------------------------------------------
def _tag_names(tags: Iterable[str] | None) -> list[str]:
    return [Tag.normalise(t) for t in tags or () if t.strip()]


def scope_documents(
    documents: TenantQuerySet[Document], *, source_ids: list[str] | None = None, tags: Iterable[str] | None = None
) -> TenantQuerySet[Document]:
    """Documents of these sources (None: all) carrying any of these tags, their own or their source's."""
    if source_ids is not None:
        documents = documents.filter(source__source_id__in=source_ids)
    names = _tag_names(tags)
    if names:
        documents = documents.filter(Q(tags__name__in=names) | Q(source__tags__name__in=names)).distinct()
    return documents


def scope_chunks(
    chunks: TenantQuerySet[Chunk], *, source_ids: list[str] | None = None, tags: Iterable[str] | None = None
) -> TenantQuerySet[Chunk]:
    """Chunks of these sources carrying any of these tags: the chunk's own, its document's or its source's."""
    if source_ids is not None:
        chunks = chunks.filter(document__source__source_id__in=source_ids)
    names = _tag_names(tags)
    if names:
        chunks = chunks.filter(
            Q(tags__name__in=names) | Q(document__tags__name__in=names) | Q(document__source__tags__name__in=names)
        ).distinct()
    return chunks


def live_chunks(*, viewer: Viewer, source_ids: list[str] | None = None, tags: Iterable[str] | None = None):
    """The active chunks a search in this scope can find."""
    chunks = visible_chunks(viewer).filter(status=Status.ACTIVE)
    return scope_chunks(chunks, source_ids=source_ids, tags=tags)


def live_documents(
    *, viewer: Viewer, source_ids: list[str] | None = None, tags: Iterable[str] | None = None
) -> TenantQuerySet[Document]:
    documents = visible_documents(viewer).filter(status=Status.ACTIVE)
    return scope_documents(documents, source_ids=source_ids, tags=tags)


# --- sources -------------------------------------------------------------------------------------------------
def source_list(*, viewer: Viewer) -> TenantQuerySet[Any]:  # Source rows annotated with `live`
    """The tenant's sources the viewer may know of, by source_id, with their tags and the count of the viewer's
    documents not retired (`live`). A restricted viewer is shown a source when it sees one of its documents or
    the source itself is open to it (so it may upload there); a source with neither is not listed."""
    visible = ~Q(documents__status=Status.RETIRED) & readers_match(viewer, path="documents__")
    sources = (
        Source.objects.for_tenant(viewer.tenant)
        .annotate(
            live=Count("documents", filter=visible, distinct=True),
            pending=Count("documents", filter=Q(documents__access_pending=True), distinct=True),  # access changes
        )
        .prefetch_related("tags")
        .order_by("source_id")
    )
    if viewer.sees_all:
        return sources
    shown = [s.pk for s in sources if s.live or viewer.sees(s.access)]
    return sources.filter(pk__in=shown)


def source_get(*, viewer: Viewer, public_id: Any) -> Source | None:
    """By the source's public id (a UUID, or its text); None when it is not this tenant's or not shown to the
    viewer."""
    wanted = public_id if isinstance(public_id, uuid.UUID) else _uuid(str(public_id))
    if wanted is None:
        return None
    return source_list(viewer=viewer).filter(public_id=wanted).first()


def source_documents(*, viewer: Viewer, source: Source) -> TenantQuerySet[Document]:
    return visible_documents(viewer).filter(source=source).exclude(status=Status.RETIRED).order_by("document_key")


# --- documents -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DocumentFilters:
    """The documents page's and the documents API's filters, one meaning each."""

    q: str = ""  # in the key or the title
    source: str = ""  # a source's source_id or its public id
    status: str = ""
    mode: str = ""
    tag: str = ""  # the document's own tag or its source's
    critical: bool = False

    @classmethod
    def from_params(cls, params: Any) -> DocumentFilters:
        """From a query string: `source` or `source_id`, `critical=1|true`."""
        return cls(
            q=(params.get("q") or "").strip(),
            source=(params.get("source") or params.get("source_id") or "").strip(),
            status=(params.get("status") or "").strip(),
            mode=(params.get("mode") or "").strip(),
            tag=(params.get("tag") or "").strip(),
            critical=params.get("critical") in ("1", "true"),
        )


def document_list(*, viewer: Viewer, filters: DocumentFilters = DocumentFilters()) -> TenantQuerySet[Document]:
    documents = visible_documents(viewer).select_related("source").prefetch_related("tags")
    if filters.q:
        documents = documents.filter(Q(document_key__icontains=filters.q) | Q(title__icontains=filters.q))
    if filters.source:
        wanted = _uuid(filters.source)
        documents = documents.filter(
            Q(source__public_id=wanted) if wanted is not None else Q(source__source_id=filters.source)
        )
    if filters.status:
        documents = documents.filter(status=filters.status)
    if filters.mode:
        documents = documents.filter(mode=filters.mode)
    if filters.tag:
        documents = scope_documents(documents, tags=[filters.tag])
    if filters.critical:
        documents = documents.filter(critical=True)
    return documents.order_by("source__source_id", "document_key")


def document_get(*, viewer: Viewer, document_id: Any) -> Document | None:
    """By the `document_id` hits and citations carry, or by the document's public id (a UUID); None when the
    viewer may not see it (so every door answers a hidden document like a missing one)."""
    lookup = Q(document_id=str(document_id))
    wanted = document_id if isinstance(document_id, uuid.UUID) else _uuid(str(document_id))
    if wanted is not None:
        lookup |= Q(public_id=wanted)
    return (
        visible_documents(viewer).select_related("source").prefetch_related("tags", "versions").filter(lookup).first()
    )


def recent_documents(*, viewer: Viewer, limit: int) -> list[Document]:
    documents = visible_documents(viewer).exclude(status=Status.RETIRED).order_by("-updated_at")
    return list(documents[:limit])


def version_chunks(*, viewer: Viewer, version: DocumentVersion) -> TenantQuerySet[Chunk]:
    """A version's source chunks in order: a model-written summary or a code file's card ranks documents, it is
    never an excerpt."""
    chunks = visible_chunks(viewer).filter(document_version=version)
    return chunks.exclude(mode__in=RANKING_ONLY_MODES).order_by("index")


def document_history(*, viewer: Viewer, document: Document) -> list[tuple[DocumentVersion, dict[str, int] | None]]:
    """Every version, oldest first, with what changed from the one before it (chunks added, removed, kept)."""
    versions = list(visible_versions(viewer, document).order_by("version"))
    hashes: dict[int, set[str]] = {v.pk: set() for v in versions}
    rows = visible_chunks(viewer).filter(document=document).values_list("document_version_id", "content_hash")
    for version_pk, content_hash in rows:
        hashes.setdefault(version_pk, set()).add(content_hash)
    history: list[tuple[DocumentVersion, dict[str, int] | None]] = []
    previous: DocumentVersion | None = None
    for version in versions:
        mine = hashes.get(version.pk, set())
        if previous is None:
            history.append((version, None))
        else:
            before = hashes.get(previous.pk, set())
            history.append((version, {"chunks_added": len(mine - before), "chunks_removed": len(before - mine),
                                      "chunks_kept": len(mine & before)}))  # fmt: skip
        previous = version
    return history


# --- jobs ----------------------------------------------------------------------------------------------------
def job_list(*, viewer: Viewer) -> TenantQuerySet[IngestJob]:
    """The tenant's jobs; a restricted viewer sees the jobs of sources open to it only (a job's report names the
    files it read, and their reasons)."""
    jobs = IngestJob.objects.for_tenant(viewer.tenant).select_related("source").order_by("-created_at")
    if viewer.sees_all:
        return jobs
    open_sources = [s.pk for s in Source.objects.for_tenant(viewer.tenant) if viewer.sees(s.access)]
    return jobs.filter(source__in=open_sources)


def job_get(*, viewer: Viewer, public_id: Any) -> IngestJob | None:
    wanted = public_id if isinstance(public_id, uuid.UUID) else _uuid(str(public_id))
    if wanted is None:
        return None
    return job_list(viewer=viewer).filter(public_id=wanted).first()


def job_report(*, viewer: Viewer, job: IngestJob) -> IngestJob:
    """The job as the viewer may read it: a copy whose errors and skips leave out entries about documents of its
    source the viewer does not see (one that has its own, stricter list), and whose counts leave them out too
    (_counts_seen). For output only: never save it."""
    if viewer.sees_all or job.source_id is None:
        return job
    hidden = dict(
        Document.objects.for_tenant(viewer.tenant).filter(source_id=job.source_id).exclude(readers_match(viewer))
        .values_list("document_key", "status")
    )  # fmt: skip
    masked = copy.copy(job)
    if (job.params or {}).get("link_problems"):  # they name notes, maybe hidden ones
        masked.params = {**job.params, "link_problems": []}
    if not hidden:
        return masked

    def shown(entry: Any) -> bool:
        if not isinstance(entry, dict):
            return True
        try:
            return ids.normalise_document_key(str(entry.get("key") or "")) not in hidden
        except ids.InvalidIdentifier:
            return True

    masked.errors = [e for e in job.errors or [] if shown(e)]
    masked.skips = [e for e in job.skips or [] if shown(e)]
    _counts_seen(masked, hidden)
    return masked


def _counts_seen(job: IngestJob, hidden: dict[str, str]) -> None:
    """Take the hidden documents out of a job's counts: each file row of one out of its status's count, and, for a
    sync (which reads every file of its source), each hidden live document without a row out of `unchanged` and
    each retired one since the job started out of `retired` (clamped: a count never goes below zero)."""
    rows = list(JobFile.objects.filter(job=job, key__in=list(hidden)).values_list("key", "status"))
    with_rows = {key for key, _ in rows}
    by_status = {"added": 0, "updated": 0, "unchanged": 0, "skipped": 0, "failed": 0}
    for _, state in rows:
        if state in by_status:
            by_status[state] += 1
    if not job.is_upload:
        by_status["unchanged"] += sum(1 for key, state in hidden.items()
                                      if key not in with_rows and state != Status.RETIRED)  # fmt: skip
    documents = by_status["added"] + by_status["updated"] + by_status["unchanged"] + by_status["failed"]
    for name, count in by_status.items():
        setattr(job, name, max(0, getattr(job, name) - count))
    job.documents_total = max(0, job.documents_total - documents)
    job.documents_done = max(0, job.documents_done - documents)
    job.files_total = max(0, job.files_total - documents - by_status["skipped"])
    if job.retired:
        job.retired = max(0, job.retired - sum(1 for state in hidden.values() if state == Status.RETIRED))


def last_job_by_source(*, tenant: Tenant) -> dict[int, IngestJob]:
    """Each source's newest job (by source pk), in one query however many jobs the tenant has run."""
    newest = IngestJob.objects.filter(source=OuterRef("source")).order_by("-created_at", "-pk").values("pk")[:1]
    jobs = IngestJob.objects.for_tenant(tenant).filter(source__isnull=False, pk=Subquery(newest))
    return {job.source_id: job for job in jobs if job.source_id is not None}


def embedded_origin(*, document: Document, key: str) -> Document | None:
    """The note of `key` in the same source as `document` whose text `document` carries (a vault embed), when
    everyone who may read `document` may read it too; None otherwise, so a citation never names a note its reader
    may not see (whoever the reader is: the rule holds for every viewer of the cited chunk)."""
    origin = Document.objects.filter(tenant_id=document.tenant_id, source_id=document.source_id,
                                     document_key=key).first()  # fmt: skip
    if origin is None or not admits_all_of(origin.reader_list, document.reader_list):
        return None
    return origin


def document_rows(*, viewer: Viewer, document: Document) -> TenantQuerySet[Document]:
    """The one document as rows a curation service changes."""
    return visible_documents(viewer).filter(pk=document.pk)


def reading_blocks(chunks: Iterable[Chunk]) -> list[dict[str, Any]]:
    """A version's text as its chunks hold it, in order, each once: a chunk's first lines that repeat the end of the
    one before (the overlap that keeps a sentence whole in retrieval) are left out; cards and summaries are not the
    document's text."""
    blocks: list[dict[str, Any]] = []
    last_line = 0
    for chunk in sorted(chunks, key=lambda c: c.index):
        if chunk.mode in RANKING_ONLY_MODES:
            continue
        text = chunk.text
        if chunk.line_start and chunk.line_end and chunk.line_start <= last_line:
            text = "\n".join(text.split("\n")[last_line - chunk.line_start + 1 :])
        last_line = max(last_line, chunk.line_end or 0)
        blocks.append(
            {
                "chunk_id": chunk.chunk_id,
                "heading": chunk.heading,
                "text": text,
                "page": chunk.page,
                "lines": (chunk.line_start, chunk.line_end),
                "language": chunk.language,
            }
        )
    return blocks


def version_text(*, viewer: Viewer, version: DocumentVersion) -> str:
    """A version's text as the viewer may read it, its chunks joined once each (reading_blocks): what an owner edits
    when a content gap's missing sentence goes into an existing document (insights/owners.py)."""
    blocks = reading_blocks(version_chunks(viewer=viewer, version=version))
    return "\n".join(block["text"].rstrip("\n") for block in blocks)


def version_get(*, viewer: Viewer, document: Document, version: int) -> DocumentVersion | None:
    """One version of a document the viewer sees; None when it has no such version or the viewer may not read it."""
    return visible_versions(viewer, document).filter(version=version).first()


# --- chunks and tags -----------------------------------------------------------------------------------------
def chunk_get(*, viewer: Viewer, public_id: Any) -> Chunk | None:
    wanted = public_id if isinstance(public_id, uuid.UUID) else _uuid(str(public_id))
    if wanted is None:
        return None
    chunks = visible_chunks(viewer).select_related("document").prefetch_related("tags")
    return chunks.filter(public_id=wanted).first()


def live_chunks_by_key(*, viewer: Viewer, chunk_ids: list[str]) -> dict[str, Chunk]:
    """The active chunks with these stable chunk ids the viewer may see (a hit kept earlier: a reindex may have
    replaced it, an access change hidden it)."""
    rows = visible_chunks(viewer).filter(chunk_id__in=chunk_ids, status=Status.ACTIVE)
    return {row.chunk_id: row for row in rows}


def live_tables(*, viewer: Viewer) -> TenantQuerySet[DocumentTable]:
    """The tables of the live documents the viewer may see, as their current versions hold them (what an answer may
    compute over: access and the current version decided here, as for chunks)."""
    return (DocumentTable.objects.for_tenant(viewer.tenant)
            .filter(readers_match(viewer, path="document__"), readers_match(viewer, path="version__"),
                    document__status=Status.ACTIVE, version__status=Status.ACTIVE)
            .select_related("document", "version"))  # fmt: skip


def tables_of_versions(*, viewer: Viewer, version_ids: list[int]) -> TenantQuerySet[DocumentTable]:
    """The tables of these document versions (those retrieval found: current ones, or those in force as of a past
    day) that the viewer may see: an answer computes over the very version its excerpts come from."""
    return (DocumentTable.objects.for_tenant(viewer.tenant)
            .filter(readers_match(viewer, path="document__"), readers_match(viewer, path="version__"),
                    version_id__in=version_ids)
            .select_related("document", "version"))  # fmt: skip


def cited_texts(*, viewer: Viewer, cited: list[tuple[str, int | None]]) -> dict[tuple[str, int | None], str]:
    """The text of each cited chunk (chunk id, version number; None: the live one) the viewer may see now, for an
    answer reopened later: the version it cited, whatever has been written since."""
    wanted = [chunk_id for chunk_id, _ in cited]
    rows = (visible_chunks(viewer).filter(chunk_id__in=wanted).select_related("document_version")
            .only("chunk_id", "text", "status", "document_version__version"))  # fmt: skip
    texts: dict[tuple[str, int | None], str] = {}
    for row in rows:
        texts[(row.chunk_id, row.document_version.version)] = row.text
        if row.status == Status.ACTIVE:
            texts[(row.chunk_id, None)] = row.text
    return {key: texts.get(key) or texts.get((key[0], None), "") for key in cited if texts.get(key) or
            texts.get((key[0], None))}  # fmt: skip


def index_state(*, viewer: Viewer) -> dict[str, Any]:
    """The live documents the viewer sees: how many, and when the last one changed (a reindex or a curation
    moves it)."""
    live = visible_documents(viewer).filter(status=Status.ACTIVE).aggregate(n=Count("pk"), last=Max("updated_at"))
    return {"live_documents": live["n"], "changed_at": live["last"].isoformat() if live["last"] else None}


def chunk_rows(*, viewer: Viewer, chunk: Chunk) -> TenantQuerySet[Chunk]:
    return visible_chunks(viewer).filter(pk=chunk.pk)


def tag_list(*, tenant: Tenant) -> TenantQuerySet[Tag]:
    return Tag.objects.for_tenant(tenant)


def upload_sources(*, viewer: Viewer, kinds: list[str]) -> TenantQuerySet[Source]:
    """The sources an upload may go to: those of the kinds that accept uploads (knowledge.ingest.sources)."""
    return source_list(viewer=viewer).filter(kind__in=kinds)


def knowledge_scope(*, viewer: Viewer, knowledge_id: str) -> tuple[str, str] | None:
    """Dify's `knowledge_id`: ("source", source_id) for a source's id, public id or label; ("tag", name) for a
    tag; None for neither (or a source the viewer is not shown)."""
    sources = source_list(viewer=viewer)
    source = sources.filter(source_id=knowledge_id).first()
    wanted = _uuid(knowledge_id)
    if source is None and wanted is not None:
        source = sources.filter(public_id=wanted).first()
    if source is None:
        source = sources.filter(label__iexact=knowledge_id).first()
    if source is not None:
        return "source", source.source_id
    name = Tag.normalise(knowledge_id)
    if scope_documents(visible_documents(viewer), tags=[name]).exists():  # a tag of hidden documents only: unknown
        return "tag", name
    return None


def allowed_locations() -> list[AllowedLocation]:
    """What the operator's page allows every tenant to read (the settings' own lists aside)."""
    return list(AllowedLocation.objects.all())
