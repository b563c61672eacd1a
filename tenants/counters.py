"""Fixed-window counters every web process shares: the throttles' state (requests per API key, wrong keys per client
address, password-reset requests).

On Redis (REDIS_URL) they are the cache's atomic INCR. On the embedded default they are rows of a small SQLite file
of their own under the data directory (`throttle.sqlite3`, WAL, no fsync: a counter lost in a power cut costs
nothing), one UPSERT per event: atomic across processes, so RAG_WEB_WORKERS=N counts against one limit, and about
0.05 ms a request. Chosen over Django's file or database cache, which increment with a read and a write (lost
updates between processes) and, for the file cache, three file operations and a directory listing per event
(bench/throttle.py measures both).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings

_local = threading.local()
CLEANUP_EVERY = 1000  # events between two sweeps of expired rows

UPSERT = """
INSERT INTO counters (name, n, started, expires) VALUES (?, 1, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    n = CASE WHEN counters.expires <= excluded.started THEN 1 ELSE counters.n + 1 END,
    started = CASE WHEN counters.expires <= excluded.started THEN excluded.started ELSE counters.started END,
    expires = CASE WHEN counters.expires <= excluded.started THEN excluded.expires ELSE counters.expires END
RETURNING n, started
"""


def _path() -> Path:
    return Path(settings.DATA_DIR) / "throttle.sqlite3"


def _connection() -> sqlite3.Connection:
    path = _path()
    connection: sqlite3.Connection | None = getattr(_local, "connection", None)
    if connection is not None and getattr(_local, "path", None) == path:
        return connection
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=5.0, isolation_level=None, check_same_thread=False)
    _write_ahead(connection)
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute(
        "CREATE TABLE IF NOT EXISTS counters "
        "(name TEXT PRIMARY KEY, n INTEGER NOT NULL, started REAL NOT NULL, expires REAL NOT NULL)"
    )
    _local.connection, _local.path, _local.events = connection, path, 0
    return connection


def _write_ahead(connection: sqlite3.Connection) -> None:
    """The file in WAL mode. Switching needs the file to itself and SQLite answers "locked" at once (no busy wait)
    when another connection holds it, as when a fresh worker's threads all open it at the first requests: wait for
    whichever switches it, a few times, rather than fail a request."""
    for _ in range(100):
        try:
            if connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError:
            time.sleep(0.02)
    connection.execute("PRAGMA journal_mode=WAL")  # still locked after 2 s: say so


def _redis() -> Any:
    from django.core.cache import cache

    return cache


def hit(name: str, window: int) -> tuple[int, float]:
    """One more event under `name` in its window of `window` seconds (opened by its first event): (the count so far,
    when the window opened)."""
    now = time.time()
    if settings.REDIS_URL:
        cache = _redis()
        if cache.add(name, 0, window):
            cache.set(name + ":since", now, window)
        try:
            count = int(cache.incr(name))
        except ValueError:  # it expired between add and incr
            cache.set(name, 1, window)
            cache.set(name + ":since", now, window)
            count = 1
        return count, float(cache.get(name + ":since") or now)
    connection = _connection()
    count, started = connection.execute(UPSERT, (name, now, now + window)).fetchone()
    _local.events = getattr(_local, "events", 0) + 1
    if _local.events % CLEANUP_EVERY == 0:
        connection.execute("DELETE FROM counters WHERE expires <= ?", (now,))
    return int(count), float(started)


def peek(name: str) -> tuple[int, float] | None:
    """(the count, when its window opened) of an open window, None when there is none."""
    now = time.time()
    if settings.REDIS_URL:
        cache = _redis()
        started = cache.get(name + ":since")
        return None if started is None else (int(cache.get(name) or 0), float(started))
    row = (
        _connection().execute("SELECT n, started FROM counters WHERE name = ? AND expires > ?", (name, now)).fetchone()
    )
    return None if row is None else (int(row[0]), float(row[1]))


def reset() -> None:
    """Every counter back to nothing (tests; an operator after a false alarm)."""
    if settings.REDIS_URL:
        from django.core.cache import cache

        cache.clear()
        return
    _connection().execute("DELETE FROM counters")
