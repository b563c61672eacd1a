"""Disk space for ingestion: stop a job cleanly before the disk fills, and recognise a full disk when it does.

A job that writes until the disk is full cannot even record why it stopped (SQLite needs space for its
write-ahead log to update the job's row). So, like a database's flood-stage watermark, ingestion checks the
free space where it writes (the data directory, the SQLite file, the embedded vector store) before each
document and stops at RAG_MIN_FREE_BYTES, with the reason on the job and nothing half-written. A disk that
fills anyway (another process, a huge document) is recognised in the error and stops the job the same way,
instead of failing every remaining document one by one.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path

from django.conf import settings
from django.db import connection

FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
FULL_MESSAGES = ("database or disk is full", "no space left on device", "disk quota exceeded")
POSTGRES_DISK_FULL = "53100"  # SQLSTATE disk_full
ALMOST_NOTHING = 1024 * 1024  # free bytes below which an I/O error on the database is taken for a full disk


class StorageFull(Exception):
    """Ingestion stopped because the disk it writes to is (nearly) full; what was indexed before stays."""


def write_paths() -> list[Path]:
    """Where ingestion writes on this machine: the data directory, the SQLite file's folder, the embedded store."""
    paths = [Path(settings.DATA_DIR)]
    if connection.vendor == "sqlite":
        paths.append(Path(settings.DATABASES["default"]["NAME"]).parent)
    if not settings.QDRANT_URL:
        paths.append(Path(settings.RAG_QDRANT_PATH))
    return [p for p in dict.fromkeys(paths) if p.exists()]


def free_bytes() -> int | None:
    """The least free space among the write paths (None when none exists yet)."""
    free = [shutil.disk_usage(path).free for path in write_paths()]
    return min(free) if free else None


def check_free_space(next_key: str) -> None:
    """Raise StorageFull when less than RAG_MIN_FREE_BYTES is free where ingestion writes."""
    minimum = settings.RAG_MIN_FREE_BYTES
    free = free_bytes() if minimum else None
    if free is not None and free < minimum:
        raise StorageFull(
            f"Only {free / 2**20:.1f} MiB is free on the disk holding the data (RAG_MIN_FREE_BYTES is "
            f"{minimum / 2**20:.0f} MiB): indexing stopped before {next_key}. What was indexed before is kept; "
            "free some space and sync again, it goes on from there."
        )


def room_to_index() -> bool:
    """Whether versions already accepted may still be written to the vector store: down to half the
    watermark, so that what ingestion took before it stopped is indexed, and a full disk never meets
    the embedded store's memory-mapped files (a write to one on a full disk kills the process, SIGBUS)."""
    free = free_bytes() if settings.RAG_MIN_FREE_BYTES else None
    return free is None or free >= settings.RAG_MIN_FREE_BYTES // 2


def is_storage_full(exc: BaseException) -> bool:
    """The error, or one it was raised from, says the disk or the database's storage is full."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in FULL_ERRNOS:
            return True
        if POSTGRES_DISK_FULL in (getattr(current, "sqlstate", None), getattr(current, "pgcode", None)):
            return True
        worded = isinstance(current, (sqlite3.OperationalError, OSError, RuntimeError))
        if (worded or "qdrant" in type(current).__module__) and any(m in str(current).lower() for m in FULL_MESSAGES):
            return True
        if isinstance(current, sqlite3.OperationalError) and "disk i/o error" in str(current).lower():
            # SQLite says only "disk I/O error" when it cannot grow its shared-memory file: full if the disk is.
            return (free_bytes() or 0) < ALMOST_NOTHING
        current = current.__cause__ or current.__context__
    return False


def storage_full_reason(key: str | None) -> str:
    where = f"indexing stopped at {key}, which was not indexed" if key else "indexing stopped"
    return (
        f"The disk holding the data is full: {where}. What was indexed before is kept; free some space and "
        "sync again, it goes on from there."
    )
