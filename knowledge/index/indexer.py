"""Apply SQL to the vector store: the single writer of the embedded store (an outbox drain).

SQL is the source of truth. Jobs (django-q2 workers, the CLI) write each new document version
with its chunks *and their vectors* to SQL as `pending`. `drain()` — run by the process that
owns the store — upserts those points (invisible: payload status "pending"), then flips the new
version to active and the previous one to superseded, in Qdrant and then in SQL. A reader never
sees a half-indexed version; if anything dies midway the previous version stays active and the
next drain completes the work (every step is idempotent). Curation changes (tags, critical,
retire) set `Document.needs_sync`, and drain pushes the new payloads.

With QDRANT_URL every process may drain; with the embedded store only its owner can, and other
processes leave the work to it (see docs/ingestion.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q
from django.utils import timezone

from core.languages import DEFAULT as DEFAULT_LANGUAGE
from inference.embedders import EmbedderIdentity
from knowledge import timeline, validity
from knowledge.index import storage
from knowledge.index.shared import OwnerStore, StoreServer
from knowledge.index.vectorstore import (
    Scope,
    StoreBusy,
    StorePoint,
    VectorStore,
    get_store,
    is_shared_server,
    use_owner_store,
)
from knowledge.models import (
    Chunk,
    Document,
    DocumentVersion,
    IngestJob,
    Status,
    enforced_access,
    readers_text,
    version_access,
    version_list,
    versions_carrying,
)
from tenants.models import Tenant

logger = logging.getLogger(__name__)

UPSERT_BATCH = 256
REINDEXED = (Status.ACTIVE, Status.SUPERSEDED, Status.RETIRED)  # the versions an upgrade re-embeds
ACTIVATION_GROUP = 64  # pending versions stored, flushed once and activated together
_drain_lock = threading.Lock()
_owner = False  # set in the process that holds the embedded store for its whole life (the web server)


@dataclass
class DrainResult:
    activated: int = 0
    synced: int = 0
    busy: bool = False


def version_key(document_id: str, version: int) -> str:
    return f"{document_id}@{version}"


def version_identity(version: DocumentVersion) -> EmbedderIdentity:
    return EmbedderIdentity(version.embedding_provider, version.embedding_model, version.embedding_dims or 0)


def _effective_tags(document: Document, chunk: Chunk, chunk_tags: list[str], doc_tags: list[str]) -> list[str]:
    return sorted(set(doc_tags) | set(chunk_tags))


def chunk_payload(*, chunk: Chunk, document: Document, status: str, doc_tags: list[str], chunk_tags: list[str],
                  first: bool) -> dict:  # fmt: skip
    return {
        **validity.version_payload(chunk.document_version, first=first),
        "tenant": str(document.tenant.public_id),
        "source_id": document.source.source_id,
        "version": chunk.document_version.version,
        "version_key": version_key(document.document_id, chunk.document_version.version),
        "status": status,
        "mode": chunk.mode,
        "tags": _effective_tags(document, chunk, chunk_tags, doc_tags),
        "critical": int(document.critical or chunk.critical),
        "access": version_access(chunk.document_version.reader_list, document.reader_list),
        "defines": list(chunk.defines or []),
        "language": chunk.language or DEFAULT_LANGUAGE,  # the fusion weighs a leg by the question's language and this
        **chunk.location(document=document),
    }


def _doc_tags(document: Document) -> list[str]:
    return [t.name for t in document.tags.all()] + [t.name for t in document.source.tags.all()]


def _chunk_tags(chunks: list[Chunk]) -> dict[int, list[str]]:
    through = Chunk.tags.through
    tags: dict[int, list[str]] = defaultdict(list)
    for chunk_pk, name in through.objects.filter(chunk_id__in=[c.pk for c in chunks]).values_list(
        "chunk_id", "tag__name"
    ):
        tags[chunk_pk].append(name)
    return tags


def point_vectors(chunk: Chunk, identity: EmbedderIdentity) -> tuple[list[float], list[float] | None]:
    """A chunk's stored vector as its point's: the embedder's, and the multilingual leg's when the index has one."""
    stored = np.frombuffer(bytes(chunk.dense or b""), dtype=np.float32)
    if not identity.multilingual_dims:
        return stored.tolist(), None
    return stored[: identity.dims].tolist(), stored[identity.dims :].tolist()


def store_version_points(version: DocumentVersion, *, status: str | None = None) -> Document:
    """Upsert every chunk of a version from its stored vectors (no embedding), with `status` in the payload,
    or each chunk's own status from SQL when none is given (a repair or a restore)."""
    document = Document.objects.select_related("tenant", "source").get(pk=version.document_id)
    store = get_store()
    identity = version_identity(version)
    store.ensure_collection(identity)
    chunks = list(version.chunks.select_related("document_version").order_by("index"))
    for chunk in chunks:  # the window as staged just now, not as read before
        chunk.document_version = version
    first = validity.first_served(document) in (None, version.version)
    superseded = validity.supersession_payload(document)
    doc_tags = _doc_tags(document)
    chunk_tags = _chunk_tags(chunks)
    for start in range(0, len(chunks), UPSERT_BATCH):
        batch = chunks[start : start + UPSERT_BATCH]
        vectors = [point_vectors(chunk, identity) for chunk in batch]
        store.upsert(
            identity,
            [
                StorePoint(
                    id=chunk.point_id,
                    dense=vector[0],
                    multilingual=vector[1],
                    sparse=(chunk.sparse["i"], chunk.sparse["v"]) if chunk.sparse else ([], []),
                    payload={
                        **chunk_payload(
                            chunk=chunk,
                            document=document,
                            status=status or chunk.status,
                            doc_tags=doc_tags,
                            chunk_tags=chunk_tags.get(chunk.pk, []),
                            first=first,
                        ),
                        **superseded,
                    },
                )  # fmt: skip
                for chunk, vector in zip(batch, vectors, strict=True)
            ],
        )
    return document


def activate_version(version: DocumentVersion) -> None:
    """Store every point of a pending version, then make it the one readers see (raises if it could not)."""
    if not activate_versions([version]):
        raise RuntimeError(f"Indexing {version} failed (logged); the next drain retries it.")


def activate_versions(versions: list[DocumentVersion]) -> list[DocumentVersion]:
    """Store every point of these pending versions (of different documents) and flip them in Qdrant, flush the
    store once, then make them the ones readers see in SQL. Returns the versions activated: one that cannot be
    stored is logged, marked for a retry and left pending (as the whole group is if SQL refuses it); StoreBusy
    propagates before any SQL changes. One flush per group instead of per version: a flush costs about 16 ms
    however little it writes (1.8 s of the 3.4 s it took to index 112 documents one at a time)."""
    store = get_store()
    staged = []
    now = timezone.now()
    for version in versions:
        try:
            staged.append((version, *_store_and_flip(store, version, now)))
        except StoreBusy:
            raise
        except Exception as exc:  # one version that cannot be stored must not block the rest
            _retry_later(version, exc)
    if not staged:
        return []
    if hasattr(store, "flush"):
        store.flush()
    try:
        _make_active(staged, now)
    except Exception as exc:  # SQL refused the group (locked, full): every version stays pending for the next drain
        for version, _, _ in staged:
            _retry_later(version, exc)
        return []
    return [version for version, _, _ in staged]


def _retry_later(version: DocumentVersion, exc: Exception) -> None:
    logger.exception("Indexing %s failed", version)
    DocumentVersion.objects.filter(pk=version.pk).update(error=f"indexing failed, will retry: {exc}")


def _ended_at(document: Document, old: DocumentVersion, now):
    """When a superseded version stopped being served: when the first newer one began (a git commit's date for
    a git source's versions, now for any other), never later than now."""
    newer = (
        DocumentVersion.objects.filter(document_id=document.pk, version__gt=old.version, served_from__isnull=False)
        .exclude(status=Status.FAILED).aggregate(m=Min("served_from"))["m"]
    )  # fmt: skip
    return min(newer, now) if newer else now


def _make_active(staged: list[tuple[DocumentVersion, Document, list[DocumentVersion]]], now) -> None:
    with transaction.atomic():
        history = [version.pk for version, _, _ in staged if version.historical]
        DocumentVersion.objects.filter(pk__in=history).update(status=Status.SUPERSEDED, status_changed_at=now)
        Chunk.objects.filter(document_version__in=history).update(status=Status.SUPERSEDED)
        for version, document, previous in staged:
            if version.historical:
                continue
            timeline.version_served(document, version, previous, now)
            for old in previous:
                DocumentVersion.objects.filter(pk=old.pk).update(
                    status=Status.SUPERSEDED, status_changed_at=now, served_until=_ended_at(document, old, now)
                )
                Chunk.objects.filter(document_version=old).update(status=Status.SUPERSEDED)
            Document.objects.filter(pk=document.pk).update(
                status=Status.ACTIVE,
                version=version.version,
                title=version.title or document.title,
                updated_at=now,
            )
        done = [version.pk for version, _, _ in staged if not version.historical]
        DocumentVersion.objects.filter(pk__in=done).update(status=Status.ACTIVE, status_changed_at=now)
        Chunk.objects.filter(document_version__in=done).update(status=Status.ACTIVE)


def _store_and_flip(store: VectorStore, version: DocumentVersion, now) -> tuple[Document, list[DocumentVersion]]:
    """Upsert a pending version's points, then set its payload status to active (or retired) and its
    predecessors' to superseded (served until now), in the store only. Imported history (a git source's older
    commits) is stored as superseded, over the window it was given, and changes nothing else."""
    if version.historical:
        return store_version_points(version, status=Status.SUPERSEDED), []
    staging = Document.objects.select_related("tenant", "source").get(pk=version.document_id)
    timeline.stage_version(staging, version, now)
    document = store_version_points(version, status=Status.PENDING)
    identity = version_identity(version)
    tenant = str(document.tenant.public_id)
    previous = list(document.versions.filter(status=Status.ACTIVE).exclude(pk=version.pk))
    retired = document.status == Status.RETIRED and version.status != Status.PENDING
    new_status = Status.RETIRED if retired else Status.ACTIVE
    key = version_key(document.document_id, version.version)
    store.set_payload(identity, Scope(tenant=tenant, statuses=None, version_keys=[key]), {"status": new_status})
    for old in previous:
        old_key = version_key(document.document_id, old.version)
        store.set_payload(
            version_identity(old), Scope(tenant=tenant, statuses=None, version_keys=[old_key]),
            {"status": Status.SUPERSEDED, "served_until": validity.epoch(_ended_at(document, old, now))},
        )  # fmt: skip
    return document, previous


def sync_document(document: Document) -> None:
    """Push a document's curation state (tags, critical, status) to the payloads of all its points."""
    document = Document.objects.select_related("tenant", "source").get(pk=document.pk)
    store = get_store()
    tenant = str(document.tenant.public_id)
    doc_tags = _doc_tags(document)
    Document.objects.filter(pk=document.pk).update(needs_sync=False)  # before reading: a later change re-flags
    first = validity.first_served(document)
    superseded = validity.supersession_payload(document)
    for version in document.versions.exclude(status__in=[Status.PENDING, Status.FAILED]):
        identity = version_identity(version)
        window = {**validity.version_payload(version, first=version.version == first), **superseded}
        chunks = list(version.chunks.all())
        chunk_tags = _chunk_tags(chunks)
        groups: dict[tuple, list[str]] = defaultdict(list)
        for chunk in chunks:
            tags = tuple(sorted(set(doc_tags) | set(chunk_tags.get(chunk.pk, []))))
            groups[(tags, int(document.critical or chunk.critical), chunk.status)].append(chunk.point_id)
        for (tags, critical, status), point_ids in groups.items():
            payload = {"tags": list(tags), "critical": critical, "status": status, "title": document.title,
                       "access": version_access(version.reader_list, document.reader_list),
                       "document_id": document.document_id,
                       "document_key": document.display_key, **window}  # fmt: skip
            store.set_payload(identity, Scope(tenant=tenant, statuses=None, point_ids=point_ids), payload)


def sync_access(document: Document) -> bool:
    """Apply a document's new access list to every point of it (one payload update per embedder: no re-embedding,
    no new version), then enforce it in SQL. Until then SQL enforced the stricter of the old and new lists and the
    points still carried the old one, so no viewer saw the document early. False if it changed again meanwhile,
    or a version of it awaits activation (the next drain applies the newer list, after that version)."""
    document = Document.objects.select_related("tenant", "source").get(pk=document.pk)
    if document.versions.filter(status=Status.PENDING, historical=False).exists():
        return False  # its list may rest on a text not served yet (a vault note rendered again): after activation
    target = sorted(set(enforced_access(document)))
    tenant = str(document.tenant.public_id)
    served = list(document.versions.exclude(status__in=[Status.PENDING, Status.FAILED]))
    carrying = {v.pk for v in versions_carrying([document.pk]).get(document.pk, [])}
    own = {v.pk: version_list(v) if v.pk in carrying else ["tenant"] for v in served}
    # one payload update per embedder and per list: a version that carries another note's text gets the stricter one
    groups: dict[tuple[EmbedderIdentity, tuple[str, ...]], list[str]] = defaultdict(list)
    for version in served:
        access = tuple(sorted(set(version_access(own[version.pk], target))))
        groups[(version_identity(version), access)].append(version_key(document.document_id, version.version))
    store = get_store()
    for (identity, access), keys in groups.items():
        scope = Scope(tenant=tenant, statuses=None, document_ids=[document.document_id], version_keys=keys)
        store.set_payload(identity, scope, {"access": list(access)})
    with transaction.atomic():
        fresh = Document.objects.select_for_update().select_related("source").get(pk=document.pk)
        if sorted(set(enforced_access(fresh))) != target:
            return False
        fresh_carrying = {v.pk: version_list(v) for v in versions_carrying([document.pk]).get(document.pk, [])}
        # (versions_carrying again, under the lock: a carried note narrowed meanwhile must not be widened here)
        if any(fresh_carrying.get(pk, ["tenant"]) != listed for pk, listed in own.items()):
            return False  # a carried note changed meanwhile: the next drain applies its list
        stored = {v.pk: v.readers for v in served}
        for pk, listed in own.items():
            if readers_text(listed) != stored[pk]:  # most versions carry nothing: no write
                DocumentVersion.objects.filter(pk=pk).update(readers=readers_text(listed))
        Document.objects.filter(pk=document.pk).update(readers=readers_text(target), access_pending=False)
    return True


def _finish_jobs(job_ids: set[int]) -> None:
    from knowledge import jobs

    for job in IngestJob.objects.filter(pk__in=job_ids, state=IngestJob.State.INDEXING):
        jobs.finish_if_indexed(job)


def drain(*, limit: int | None = None) -> DrainResult:
    """Apply every pending version and curation change this process can; safe to call any time."""
    result = DrainResult()
    if not _drain_lock.acquire(blocking=False):
        return result  # another thread of this process is draining right now
    try:
        pending = DocumentVersion.objects.filter(status=Status.PENDING).order_by("pk")
        job_ids: set[int] = set()
        group: list[DocumentVersion] = []
        for version in [*(pending[:limit] if limit else pending), None]:
            if version is not None and not storage.room_to_index():
                logger.warning("Indexing paused: the disk holding the vector store is nearly full")
                version, result.busy = None, True
            if version is not None:
                group.append(version)
            if group and (version is None or len(group) >= ACTIVATION_GROUP):
                try:
                    activated = activate_versions(group)
                except StoreBusy:
                    result.busy = True
                    return result
                group = []
                result.activated += len(activated)
                job_ids |= {v.job_id for v in activated if v.job_id}
            if result.busy:
                return result
        if _write_reindexed(result):
            return result
        for document in Document.objects.filter(needs_sync=True):
            try:
                sync_document(document)
            except StoreBusy:
                Document.objects.filter(pk=document.pk).update(needs_sync=True)
                result.busy = True
                return result
            result.synced += 1
        for document in Document.objects.filter(access_pending=True).order_by("pk"):
            try:
                sync_access(document)
            except StoreBusy:
                result.busy = True
                return result
            result.synced += 1
        _finish_jobs(
            job_ids | set(IngestJob.objects.filter(state=IngestJob.State.INDEXING).values_list("pk", flat=True))
        )
    finally:
        _drain_lock.release()
    return result


REINDEX_GROUP = 64  # re-embedded versions written between two looks at pending ingestion
CLEANUP_AFTER_S = 60.0  # a finished upgrade's previous index is dropped this long after: reads have moved on
_upgraded: dict[int, float] = {}  # tenant pk → when this process wrote its last re-embedded version


def _write_reindexed(result: DrainResult) -> bool:
    """Write re-embedded versions (knowledge/reindex.py) into the configured index, a group per pass, from their
    stored vectors; True when the store is busy. Once a tenant's upgrade that added the multilingual leg is
    complete, and every reader has had time to move to the new index, its points in the previous index are
    dropped."""
    from inference.embedders import get_embedder

    store = get_store()
    versions = list(DocumentVersion.objects.filter(reindex_pending=True).order_by("pk")[:REINDEX_GROUP])
    for version in versions:
        if not storage.room_to_index():
            result.busy = True
            return True
        try:
            store_version_points(version)
        except StoreBusy:
            result.busy = True
            return True
        DocumentVersion.objects.filter(pk=version.pk).update(reindex_pending=False)
        _upgraded[version.tenant_id] = time.monotonic()
        result.synced += 1
    if versions and hasattr(store, "flush"):
        store.flush()
    identity = get_embedder().identity
    for tenant_pk, written in list(_upgraded.items()):
        if time.monotonic() - written < CLEANUP_AFTER_S or not identity.multilingual_dims:
            continue
        unfinished = DocumentVersion.objects.filter(tenant_id=tenant_pk, status__in=REINDEXED).filter(
            Q(reindex_pending=True) | ~Q(embedding_model=identity.model)
        )
        tenant = Tenant.objects.filter(pk=tenant_pk).first()  # deleted since: its points went with it
        if tenant is not None and not unfinished.exists():
            store.delete(identity.primary, Scope(tenant=str(tenant.public_id), statuses=None))
            logger.info("Dropped tenant %s's previous index %s: its upgrade is complete", tenant.slug,
                        identity.primary.collection)  # fmt: skip
        del _upgraded[tenant_pk]
    return False


def wait_until_written(tenant, *, timeout: float = 3600.0, poll: float = 0.5) -> bool:
    """Drain, or — when another process owns the store — wait for it to write this tenant's re-embedded versions."""
    deadline = time.monotonic() + timeout
    while True:
        result = drain()
        if not DocumentVersion.objects.filter(tenant=tenant, reindex_pending=True).exists():
            return True
        if time.monotonic() > deadline:
            return False
        if result.busy:
            time.sleep(poll)


def sync_documents(document_pks: list[int]) -> int:
    """Push the payloads of these curated documents now: a curation click's own documents, never the pending work
    of other documents or tenants (that is the background indexer's). What cannot be pushed now (the store busy,
    another thread draining) stays flagged, and the next drain pushes it."""
    if not _drain_lock.acquire(blocking=False):
        return 0  # a drain is running in this process: it pushes them
    try:
        synced = 0
        for document in Document.objects.filter(pk__in=document_pks, needs_sync=True):
            try:
                sync_document(document)
            except StoreBusy:
                Document.objects.filter(pk=document.pk).update(needs_sync=True)
                return synced
            synced += 1
        return synced
    finally:
        _drain_lock.release()


def wait_until_indexed(version_filter: Q, *, timeout: float = 600.0, poll: float = 0.5) -> bool:
    """Drain, or — when another process owns the store — wait for it to index these versions."""
    deadline = time.monotonic() + timeout
    while True:
        result = drain()
        if not DocumentVersion.objects.filter(version_filter, status=Status.PENDING).exists():
            return True
        if time.monotonic() > deadline:
            return False
        if result.busy:
            time.sleep(poll)


def optimize_when_quiet() -> bool:
    """Index what was written to the embedded store since its last optimization, once no search has come for
    RAG_STORE_OPTIMIZE_QUIET_S seconds (a search waits while it runs); a Qdrant server optimizes by itself."""
    store = get_store()
    optimize = getattr(store, "optimize", None)
    return bool(optimize and optimize(quiet_for=settings.RAG_STORE_OPTIMIZE_QUIET_S))


_background: threading.Thread | None = None


def start_background_indexer(*, interval: float = 1.0) -> None:
    """Run drain() every `interval` seconds in a daemon thread of the store's owner process."""
    global _background
    if _background is not None:
        return

    def loop() -> None:
        from django.db import close_old_connections

        from knowledge.jobs import recover_orphaned_jobs

        recovered_at = 0.0
        while True:
            try:
                close_old_connections()
                drain()
                optimize_when_quiet()
                if time.monotonic() - recovered_at >= settings.RAG_JOB_RECOVERY_INTERVAL_S:
                    recovered_at = time.monotonic()
                    recover_orphaned_jobs()  # a worker killed mid-job leaves it running: queue it again
            except Exception:  # keep the indexer alive; the failure is logged and retried
                logger.exception("Background indexer pass failed")
            time.sleep(interval)

    _background = threading.Thread(target=loop, name="ragsite-indexer", daemon=True)
    _background.start()


_server: StoreServer | None = None


def take_store_ownership(*, interval: float = 1.0, share: bool = False) -> bool:
    """Open the store now (taking its lock) and start the indexer thread; False if another process owns it.

    `share` (web processes): the owner also serves the other web processes' searches over a local socket, and a
    process that is not the owner reads through it (shared.py), so several web processes can answer retrieves."""
    from inference.embedders import get_embedder

    global _owner, _server
    try:
        get_store().ensure_collection(get_embedder().identity)
    except StoreBusy:
        if share:
            use_owner_store(OwnerStore(Path(settings.RAG_QDRANT_PATH)))
            logger.info("The embedded vector store is owned by another web process; this one reads through it.")
        else:
            logger.warning("The embedded vector store is owned by another process; this one will not index.")
        return False
    _owner = True
    if share and not is_shared_server() and _server is None:
        _server = StoreServer(get_store(), Path(settings.RAG_QDRANT_PATH))
    start_background_indexer(interval=interval)
    return True
