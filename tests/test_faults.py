"""Faults with real processes: gunicorn (the embedded store's owner) and a django-q2 cluster, killed with SIGKILL.

- a worker killed in the middle of an ingestion job: the job is queued again and completes; nothing is
  duplicated; no document is ever served half-indexed;
- the store's owner killed while it indexes: after a restart the store opens, what was pending is indexed,
  and `index_check` is clean;
- two syncs of one source at once: the second waits for the first; no duplicate documents or points.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.servers import ROOT, environment, manage, start_gunicorn

DOCUMENTS = 160
SETUP = """
from tenants.services import api_key_issue, tenant_create
tenant = tenant_create(slug="acme", name="Acme")
print(api_key_issue(tenant=tenant, scope="write")[1])
"""

RETRIEVE = """
from knowledge.search.retrieval import retrieve
from tenants.models import Tenant
from tenants.principals import Viewer
viewer = Viewer.everything(Tenant.objects.get(slug="acme"))
print(retrieve(viewer=viewer, query="%s", top_k=1)[0].chunk.document.display_key)
"""

pytestmark = pytest.mark.embedded_store  # the single-owner embedded store is what these faults are about


def _write_corpus(folder: Path, count: int, version: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        topic = ["invoices", "shipping", "returns", "warranty", "accounts"][n % 5]
        (folder / f"page-{n:03d}.md").write_text(
            f"# Page {n} about {topic}{version}\n\nThis page number {n} explains {topic} in detail. "
            f"Reference code P{n:03d}-{topic[:3].upper()}. " + "Background paragraph for the index. " * 20 + "\n"
        )


class Topology:
    """A data directory with a tenant, a gunicorn owning the embedded store, and a django-q2 cluster."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = environment(root / "data", RAG_ALLOWED_FOLDER_ROOTS=str(root), RAG_JOB_RECOVERY_INTERVAL_S="1",
                               RAG_WORKERS="2", RAG_EMBED_THREADS="1")  # fmt: skip
        self.port = int(self.env["PORT"])
        self.web: subprocess.Popen | None = None
        self.cluster: subprocess.Popen | None = None
        assert self.manage("migrate", "-v0").returncode == 0
        self.key = self.manage("shell", "-c", SETUP).stdout.strip().splitlines()[-1]

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return manage(self.env, *args)

    def start_web(self) -> None:
        self.web = start_gunicorn(self.env)

    def start_cluster(self) -> None:
        self.cluster = subprocess.Popen([sys.executable, "manage.py", "worker"], cwd=ROOT, env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)  # fmt: skip

    @staticmethod
    def kill(process: subprocess.Popen | None) -> None:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # the whole process group: master and workers
            process.wait(timeout=30)

    def api(self, method: str, path: str, body: dict | None = None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1/tenants/acme/{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Api-Key {self.key}", "Content-Type": "application/json"},
        )  # fmt: skip
        return json.loads(urllib.request.urlopen(request, timeout=60).read())

    def sql(self, query: str, *args: object) -> list[tuple]:
        with sqlite3.connect(self.root / "data" / "ragsite.sqlite3", timeout=30) as db:
            return db.execute(query, args).fetchall()

    def job(self, job_id: str) -> dict[str, Any]:
        return self.api("GET", f"jobs/{job_id}/")

    def wait_job(self, job_id: str, until, timeout: float = 240) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if until(job):
                return job
            self.assert_nothing_half_indexed()
            time.sleep(0.3)
        raise AssertionError(f"job {job_id} did not get there: {self.job(job_id)}")

    def assert_nothing_half_indexed(self) -> None:
        """Every version readers can see has all its chunks; every document has at most one such version."""
        visible = self.sql("""SELECT v.id, v.chunk_count, COUNT(c.id) FROM knowledge_documentversion v
                              LEFT JOIN knowledge_chunk c ON c.document_version_id = v.id
                              WHERE v.status = 'active' GROUP BY v.id""")  # fmt: skip
        assert all(expected == stored for _, expected, stored in visible), visible
        twice = self.sql("""SELECT document_id FROM knowledge_documentversion WHERE status = 'active'
                            GROUP BY document_id HAVING COUNT(*) > 1""")  # fmt: skip
        assert not twice

    def stop(self) -> None:
        for process in (self.cluster, self.web):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.kill(process)


@pytest.fixture
def topology(tmp_path):  # type: ignore[no-untyped-def]
    running = Topology(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _sync(topology: Topology, folder: Path, name: str = "pages") -> tuple[str, str]:
    source = topology.api("POST", "sources/", {"kind": "folder", "name": name, "path": str(folder), "sync": False})
    job = topology.api("POST", f"sources/{source['id']}/sync/")  # the sync route itself (creation would sync too)
    return source["id"], job["id"]


def _sync_running(topology: Topology, tmp_path: Path, until) -> str:  # type: ignore[no-untyped-def]
    """Web and cluster up, a sync of a DOCUMENTS-page folder started; its job id once `until(job)` holds."""
    _write_corpus(tmp_path / "pages", DOCUMENTS)
    topology.start_web()
    topology.start_cluster()
    _, job_id = _sync(topology, tmp_path / "pages")
    topology.wait_job(job_id, until)
    return job_id


def _worker_pid(topology: Topology, job_id: str) -> int:
    params = topology.sql("SELECT params FROM knowledge_ingestjob WHERE public_id = ?", job_id.replace("-", ""))
    return int(json.loads(params[0][0])["worker"]["pid"])


def _paused_between_writes(topology: Topology, pid: int) -> int:
    """Stop `pid` (SIGSTOP) at a moment it holds no write transaction on the database, so others can write."""
    for _ in range(200):
        os.kill(pid, signal.SIGSTOP)
        try:
            with sqlite3.connect(topology.root / "data" / "ragsite.sqlite3", timeout=0.5) as db:
                db.execute("BEGIN IMMEDIATE")
                db.rollback()
            return pid
        except sqlite3.OperationalError:  # stopped inside a write: let it finish and try again
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
    raise AssertionError(f"process {pid} never left its write transactions")


def test_a_worker_killed_mid_job_is_recovered_and_the_job_completes_without_duplicates(topology, tmp_path):
    job_id = _sync_running(
        topology, tmp_path, lambda j: j["status"] == "running" and j["progress"]["documents_done"] >= 20
    )
    victim = _worker_pid(topology, job_id)
    os.kill(victim, signal.SIGKILL)  # one django-q2 worker, mid-job; the cluster starts a new one
    done = topology.wait_job(job_id, lambda j: j["status"] in ("succeeded", "partial", "failed"))
    assert done["status"] == "succeeded", done
    assert "queued again to resume" in done["message"]  # recovered by the web process, then run to the end
    assert _worker_pid(topology, job_id) != victim
    rows = topology.sql("SELECT document_key, COUNT(*) FROM knowledge_document GROUP BY document_key")
    assert len(rows) == DOCUMENTS and all(count == 1 for _, count in rows)
    topology.assert_nothing_half_indexed()
    hits = topology.api("POST", "retrieve/", {"query": "Reference code P150-INV", "top_k": 3})["hits"]
    assert hits[0]["document_key"] == "page-150.md"
    topology.stop()
    check = topology.manage("index_check", "acme")
    assert check.returncode == 0 and "0 missing from the vector store, 0 points without a chunk" in check.stdout


def test_the_store_owner_killed_while_indexing_loses_nothing_after_a_restart(topology, tmp_path):
    job_id = _sync_running(topology, tmp_path, lambda j: j["progress"]["documents_done"] >= 40)
    topology.kill(topology.web)  # the owner of the embedded store, while versions wait to be indexed
    pending = topology.sql("SELECT COUNT(*) FROM knowledge_documentversion WHERE status = 'pending'")[0][0]
    topology.start_web()  # the store opens again (its lock died with the process)
    done = topology.wait_job(job_id, lambda j: j["status"] in ("succeeded", "partial", "failed"))
    assert done["status"] == "succeeded", done
    assert topology.sql("SELECT COUNT(*) FROM knowledge_documentversion WHERE status = 'active'")[0][0] == DOCUMENTS
    topology.stop()
    check = topology.manage("index_check", "acme")
    if check.returncode != 0:  # points written but not flushed when the owner died: --repair restores them
        assert topology.manage("index_check", "acme", "--repair").returncode == 0
        check = topology.manage("index_check", "acme")
    assert check.returncode == 0 and "0 missing from the vector store" in check.stdout, (pending, check.stdout)


def test_two_syncs_of_one_source_at_once_run_one_after_the_other(topology, tmp_path):
    """A worker's sync and the operator's CLI sync of the same source: the CLI waits, says why, then runs."""
    first = _sync_running(
        topology, tmp_path, lambda j: j["status"] == "running" and j["progress"]["documents_done"] >= 20
    )
    _write_corpus(tmp_path / "pages", DOCUMENTS, version=" (edited)")
    worker = _paused_between_writes(topology, _worker_pid(topology, first))  # however fast this machine is
    try:
        command = [sys.executable, "manage.py", "ingest", "acme", str(tmp_path / "pages"), "--source", "pages"]
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        cli = subprocess.Popen(command, cwd=ROOT, env=topology.env, text=True, **pipes)
        deadline, waiting = time.monotonic() + 120, []
        while not waiting and time.monotonic() < deadline:
            waiting = [j for j in topology.api("GET", "jobs/") if "Waiting for job" in (j.get("message") or "")]
            time.sleep(0.2)
    finally:
        os.kill(worker, signal.SIGCONT)
    assert waiting and first in waiting[0]["message"], topology.api("GET", "jobs/")
    out, err = cli.communicate(timeout=300)
    assert cli.returncode == 0, err
    assert topology.job(first)["status"] == "succeeded"
    rows = topology.sql("SELECT document_key, COUNT(*) FROM knowledge_document GROUP BY document_key")
    assert len(rows) == DOCUMENTS and all(count == 1 for _, count in rows)
    titles = topology.sql("SELECT title FROM knowledge_document")
    assert all("(edited)" in title for (title,) in titles)  # the CLI's sync ran after the worker's, whole
    topology.assert_nothing_half_indexed()
    topology.stop()
    check = topology.manage("index_check", "acme")
    assert check.returncode == 0 and "0 points without a chunk" in check.stdout


@contextmanager
def _small_disk(folder: Path, megabytes: int) -> Iterator[Path]:
    """A small ext4 filesystem loop-mounted at `folder` (no blocks reserved for root), unmounted afterwards.

    Not tmpfs: on tmpfs even reading a hole of a memory-mapped file allocates memory, so the embedded
    store's sparse 32 MiB files would fill it as they are opened, which no real disk does."""
    image = folder.with_suffix(".img")
    with image.open("wb") as handle:
        handle.truncate(megabytes * 2**20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(folder)], capture_output=True, text=True)
    assert mounted.returncode == 0, f"cannot loop-mount a small filesystem (this test needs root): {mounted.stderr}"
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        image.unlink()


def _fill(disk: Path, leave_bytes: int) -> Path:
    """A ballast file that leaves about `leave_bytes` free on the disk (0: not one block)."""
    ballast = disk / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while (free := shutil.disk_usage(disk).free) > leave_bytes:
            os.write(fd, b"\0" * max(4096, min(8 * 2**20, free - leave_bytes)))
    except OSError:  # not one block left
        pass
    finally:
        os.close(fd)
    return ballast


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a size-limited filesystem needs root")
def test_a_disk_that_fills_up_stops_the_job_with_the_reason_loses_nothing_and_the_next_sync_completes(tmp_path):
    with _small_disk(tmp_path / "data", 64) as disk:
        env = environment(disk, RAG_EMBED_THREADS="1", RAG_MIN_FREE_BYTES=str(6 * 2**20))
        assert manage(env, "migrate", "-v0").returncode == 0
        assert manage(env, "create_tenant", "acme").returncode == 0
        _write_corpus(tmp_path / "pages", 20)
        ingest = ("ingest", "acme", str(tmp_path / "pages"), "--source", "pages")
        assert manage(env, *ingest).returncode == 0  # the store's files exist now
        _write_corpus(tmp_path / "pages", 300)

        # 1. Below the watermark: the job stops before the next document, says why, and writes nothing half.
        ballast = _fill(disk, 6 * 2**20 + 2**19)
        stopped = manage(env, *ingest)
        assert stopped.returncode == 1 and "Traceback" not in stopped.stderr, stopped.stderr
        assert "MiB is free on the disk holding the data" in stopped.stderr
        sql = lambda query: sqlite3.connect(disk / "ragsite.sqlite3").execute(query).fetchall()  # noqa: E731
        state, message = sql("SELECT state, message FROM knowledge_ingestjob ORDER BY id DESC LIMIT 1")[0]
        assert state == "failed" and "indexing stopped before page-" in message and "sync again" in message
        assert sql("SELECT COUNT(*) FROM knowledge_document")[0][0] < 300

        # 2. Completely full (no watermark): a clear error, not 280 documents failed one by one.
        ballast.unlink()
        _fill(disk, 0)
        full = manage({**env, "RAG_MIN_FREE_BYTES": "0"}, *ingest)
        assert full.returncode == 1 and "The disk holding the data is full" in full.stderr, full.stderr[-2000:]
        assert full.stderr.count("failed (ref") == 0

        # 3. Space again: nothing was corrupted, and the next sync completes.
        (disk / "ballast").unlink()
        check = manage(env, "index_check", "acme")
        assert check.returncode == 0 and "0 points without a chunk" in check.stdout, check.stdout + check.stderr
        done = manage(env, *ingest)
        assert done.returncode == 0 and "(succeeded)" in done.stdout, done.stdout + done.stderr
        assert sql("SELECT COUNT(*) FROM knowledge_document WHERE status = 'active'")[0][0] == 300
        check = manage(env, "index_check", "acme")
        assert check.returncode == 0 and "0 missing from the vector store" in check.stdout, check.stdout
        found = manage(env, "shell", "-c", RETRIEVE % "Reference code P250-INV")
        assert found.stdout.strip().splitlines()[-1] == "page-250.md", found.stdout + found.stderr
