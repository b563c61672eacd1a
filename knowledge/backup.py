"""Backup and restore of the embedded default: the SQLite database and the files of queued uploads.

The vector store is not copied. Every point is derived from SQL: each chunk keeps its dense vector,
its sparse vector and its payload there. So a backup is one consistent SQLite snapshot (the online
backup API, safe while the server writes), and a restore rebuilds the store from it, without
re-embedding. Database and vector store then agree by construction, and nothing has to stop while
the backup is taken. For PostgreSQL and a Qdrant server, use pg_dump and Qdrant snapshots
(docs/production.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from knowledge.models import Chunk, Document
from tenants.models import Tenant

DATABASE_FILE = "ragsite.sqlite3"
MANIFEST_FILE = "manifest.json"
MEDIA_DIR = "media"
FORMAT = 1


class BackupError(Exception):
    pass


def _database_path() -> Path:
    if connection.vendor != "sqlite":
        raise BackupError("backup/restore cover the embedded SQLite database; for PostgreSQL use pg_dump "
                          "(docs/production.md).")  # fmt: skip
    return Path(settings.DATABASES["default"]["NAME"])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _counts(database: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        tables = {"tenants": Tenant._meta.db_table, "documents": Document._meta.db_table,
                  "chunks": Chunk._meta.db_table}  # fmt: skip
        return {name: db.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0] for name, table in tables.items()}


def backup(target: Path) -> dict[str, Any]:
    """Write a consistent snapshot of the database (and the queued uploads) into an empty or new folder."""
    source = _database_path()
    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise BackupError(f"{target} is not empty; back up into a new folder.")
    target.mkdir(parents=True, exist_ok=True)
    snapshot = target / DATABASE_FILE
    with sqlite3.connect(source) as live, sqlite3.connect(snapshot) as copy:
        live.backup(copy)  # one transaction-consistent image, while others keep writing
    media = Path(settings.MEDIA_ROOT)
    if media.is_dir():
        shutil.copytree(media, target / MEDIA_DIR, symlinks=True)
    manifest = {
        "format": FORMAT,
        "created_at": timezone.now().isoformat(),
        "database": {"file": DATABASE_FILE, "sha256": _sha256(snapshot), "size": snapshot.stat().st_size},
        "counts": _counts(snapshot),
        "vector_store": "not copied: rebuilt from the chunks' stored vectors on restore",
    }
    (target / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2))
    return manifest


def read_manifest(source: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((Path(source) / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{source} is not a ragsite backup ({MANIFEST_FILE} missing or unreadable).") from exc
    if manifest.get("format") != FORMAT:
        raise BackupError(f"Backup format {manifest.get('format')!r} is not supported (expected {FORMAT}).")
    database = Path(source) / DATABASE_FILE
    if not database.is_file() or _sha256(database) != manifest["database"]["sha256"]:
        raise BackupError(f"{database} is missing or does not match the manifest's sha256; not restoring it.")
    return manifest


def restore_files(source: Path, *, replace: bool) -> dict[str, Any]:
    """Put the backup's database and uploads in place (atomically for the database); the caller then
    rebuilds the vector store. Refuses to overwrite a database that has tenants unless `replace`."""
    manifest = read_manifest(source)
    target = _database_path()
    connection.close()
    if target.exists() and not replace and _counts(target)["tenants"]:
        raise BackupError(f"{target} already holds tenants; pass --replace to overwrite it with the backup.")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".restore-")
    os.close(handle)
    shutil.copyfile(Path(source) / DATABASE_FILE, temporary)
    for suffix in ("-wal", "-shm"):  # the old database's journal must not be replayed over the restored one
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    os.replace(temporary, target)
    media = Path(settings.MEDIA_ROOT)
    if (Path(source) / MEDIA_DIR).is_dir():
        shutil.rmtree(media, ignore_errors=True)
        shutil.copytree(Path(source) / MEDIA_DIR, media, symlinks=True)
    return manifest


def clear_embedded_store() -> None:
    """Remove the embedded store's collections (derived data): the restore rebuilds them from SQL.

    Refused while a process owns the store (the web server): its open shards would write over the rebuild."""
    root = Path(settings.RAG_QDRANT_PATH)
    for lock in root.glob("*.owner.lock") if root.is_dir() else []:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            raise BackupError("The embedded vector store is owned by a running process; stop the web server "
                              "(and workers) before restoring.") from None  # fmt: skip
        finally:
            os.close(fd)
    if root.is_dir():
        for child in root.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            elif not child.name.endswith(".owner.lock"):
                child.unlink()
