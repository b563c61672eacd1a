"""Backup and restore: the database and the files of queued uploads.

The vector store is not copied. Every point is derived from SQL: each chunk keeps its dense vector,
its sparse vector and its payload there. So a backup is one consistent database snapshot, and a restore
rebuilds the store from it (`index_check --repair`), without re-embedding. Database and vector store then
agree by construction, and nothing has to stop while the backup is taken.

- SQLite (the embedded default): SQLite's online backup API, safe while the server writes.
- PostgreSQL: `pg_dump --format=custom` (one MVCC snapshot, safe while the server writes) and
  `pg_restore --clean --single-transaction`; PostgreSQL's own client tools must be on the PATH.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from knowledge.models import Chunk, Document
from tenants.models import Tenant

DATABASE_FILE = "ragsite.sqlite3"
PG_DUMP_FILE = "ragsite.pgdump"
MANIFEST_FILE = "manifest.json"
MEDIA_DIR = "media"
FORMAT = 1


class BackupError(Exception):
    pass


def _engine() -> str:
    if connection.vendor not in ("sqlite", "postgresql"):
        raise BackupError(f"backup/restore cover SQLite and PostgreSQL, not {connection.vendor}.")
    return connection.vendor


def _database_path() -> Path:
    return Path(settings.DATABASES["default"]["NAME"])


def _pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} is not installed; PostgreSQL's client tools are needed (Debian: apt-get install "
                          "postgresql-client, of the server's major version or newer).")  # fmt: skip
    return found


def _pg_environment() -> dict[str, str]:
    """libpq's variables for the configured database (the password never on a command line)."""
    db = settings.DATABASES["default"]
    values = {"PGHOST": db.get("HOST"), "PGPORT": db.get("PORT"), "PGUSER": db.get("USER"),
              "PGPASSWORD": db.get("PASSWORD"), "PGDATABASE": db.get("NAME")}  # fmt: skip
    return {**os.environ, **{k: str(v) for k, v in values.items() if v}}


def _run_pg(command: list[str]) -> None:
    done = subprocess.run(command, env=_pg_environment(), capture_output=True, text=True)
    if done.returncode != 0:
        raise BackupError(f"{Path(command[0]).name} failed: {done.stderr.strip()[-800:]}")


def _live_counts() -> dict[str, int]:
    return {"tenants": Tenant.objects.count(), "documents": Document.objects.count(), "chunks": Chunk.objects.count()}


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
    engine = _engine()
    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise BackupError(f"{target} is not empty; back up into a new folder.")
    target.mkdir(parents=True, exist_ok=True)
    if engine == "sqlite":
        snapshot = target / DATABASE_FILE
        with sqlite3.connect(_database_path()) as live, sqlite3.connect(snapshot) as copy:
            live.backup(copy)  # one transaction-consistent image, while others keep writing
        counts = _counts(snapshot)
    else:
        counts = _live_counts()  # as the dump starts (the dump is one snapshot; these are for the message)
        snapshot = target / PG_DUMP_FILE
        _run_pg([_pg_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges", f"--file={snapshot}"])
    media = Path(settings.MEDIA_ROOT)
    if media.is_dir():
        shutil.copytree(media, target / MEDIA_DIR, symlinks=True)
    manifest = {
        "format": FORMAT,
        "created_at": timezone.now().isoformat(),
        "database": {
            "engine": engine,
            "file": snapshot.name,
            "sha256": _sha256(snapshot),
            "size": snapshot.stat().st_size,
        },  # fmt: skip
        "counts": counts,
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
    database = Path(source) / manifest["database"].get("file", DATABASE_FILE)
    if not database.is_file() or _sha256(database) != manifest["database"]["sha256"]:
        raise BackupError(f"{database} is missing or does not match the manifest's sha256; not restoring it.")
    engine = manifest["database"].get("engine", "sqlite")
    if engine != _engine():
        raise BackupError(f"This is a backup of a {engine} database and this instance runs on {_engine()}; restore "
                          f"it into an instance on {engine}.")  # fmt: skip
    return manifest


def restore_files(source: Path, *, replace: bool) -> dict[str, Any]:
    """Put the backup's database and uploads in place (atomically); the caller then migrates and rebuilds the
    vector store. Refuses to overwrite a database that has tenants unless `replace`."""
    manifest = read_manifest(source)
    database = Path(source) / manifest["database"].get("file", DATABASE_FILE)
    if _engine() == "sqlite":
        _restore_sqlite(database, replace=replace)
    else:
        _restore_postgresql(database, replace=replace)
    media = Path(settings.MEDIA_ROOT)
    if (Path(source) / MEDIA_DIR).is_dir():
        shutil.rmtree(media, ignore_errors=True)
        shutil.copytree(Path(source) / MEDIA_DIR, media, symlinks=True)
    return manifest


def _restore_sqlite(database: Path, *, replace: bool) -> None:
    target = _database_path()
    connection.close()
    if target.exists() and not replace and _counts(target)["tenants"]:
        raise BackupError(f"{target} already holds tenants; pass --replace to overwrite it with the backup.")
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".restore-")
    os.close(handle)
    shutil.copyfile(database, temporary)
    for suffix in ("-wal", "-shm"):  # the old database's journal must not be replayed over the restored one
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    os.replace(temporary, target)


def _restore_postgresql(dump: Path, *, replace: bool) -> None:
    from django.db import DatabaseError

    try:
        tenants = Tenant.objects.count()
    except DatabaseError:  # an empty database: nothing to overwrite
        tenants = 0
    if tenants and not replace:
        raise BackupError(f"The database {settings.DATABASES['default']['NAME']} already holds tenants; pass "
                          "--replace to overwrite it with the backup.")  # fmt: skip
    connection.close()
    # One transaction: a restore that fails leaves the database as it was.
    _run_pg([_pg_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--no-privileges",
             "--single-transaction", f"--dbname={settings.DATABASES['default']['NAME']}", str(dump)])  # fmt: skip


def refuse_if_store_owned() -> None:
    """Refused while a process owns the embedded store (the web server): its open shards would write over the
    rebuild. Checked before the database is touched, so a refusal changes nothing."""
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


def clear_embedded_store() -> None:
    """Remove the embedded store's collections (derived data): the restore rebuilds them from SQL."""
    refuse_if_store_owned()
    root = Path(settings.RAG_QDRANT_PATH)
    if root.is_dir():
        for child in root.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            elif not child.name.endswith(".owner.lock"):
                child.unlink()
