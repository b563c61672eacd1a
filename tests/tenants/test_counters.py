"""The throttle's counters file (tenants/counters.py) when another connection holds it as a worker first opens it."""

from __future__ import annotations

import sqlite3
import threading

from tenants import counters


def test_a_counter_opened_while_another_connection_writes_the_fresh_file_waits_and_counts(settings, tmp_path):
    """Switching a fresh file to WAL is answered "locked" at once, without SQLite's busy wait, while another
    connection writes it (CI saw a retrieve fail with 500 so, as a fresh worker's threads opened it together): the
    counter waits for the writer and counts."""
    settings.DATA_DIR = tmp_path
    settings.REDIS_URL = ""
    writer = sqlite3.connect(tmp_path / "throttle.sqlite3", isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE early (n INTEGER)")
    writer.execute("BEGIN IMMEDIATE")  # another thread's first write, still going on
    writer.execute("INSERT INTO early VALUES (1)")
    finishing = threading.Timer(0.5, lambda: writer.execute("COMMIT"))
    finishing.start()
    try:
        counted = [counters.hit(f"throttle_fresh_{n}", 60)[0] for n in range(3)]
    finally:
        finishing.join()
        writer.close()
    assert counted == [1, 1, 1]
    assert sqlite3.connect(tmp_path / "throttle.sqlite3").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
