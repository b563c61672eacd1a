"""Stopping is clean: `up.sh` and the worker end within 10 s of SIGTERM, with nothing of theirs left running.

Real processes: the script as a user runs it (web, worker, model server), and the worker with a task in progress.
What is "left" is found by the data directory each process inherited in its environment, whatever its process
group (django-q2's sentinel and its workers run in a group of their own)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.servers import ROOT, environment, manage

STOP_WITHIN_S = 10


def _left(marker: str) -> list[str]:
    """Command lines of the processes whose environment carries this data directory."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def _stopped_within(marker: str, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _left(marker):
            return []
        time.sleep(0.2)
    return _left(marker)


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).read()
    except OSError:
        return False
    return True


@pytest.mark.slow
def _pids_of(data: str, command: str) -> list[int]:
    """The live processes of this data directory whose command line holds `command`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if data.encode() not in (entry / "environ").read_bytes():
                continue
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if command in line and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_up_sh_stops_within_10_s_of_sigterm_to_its_group_with_nothing_left(tmp_path, settings):
    from inference.packaged import QWEN_0_5B, assemble_gguf

    data = tmp_path / "data"
    model = str(assemble_gguf(QWEN_0_5B))
    env = environment(data, RAG_MODELS_DIR=str(settings.RAG_MODELS_DIR), RAG_LLM_MODEL_PATH=model,
                      RAG_VENV=sys.prefix, EXTRAS="[test]")  # fmt: skip
    env.pop("RAG_DEBUG")  # as a user runs it
    log = (tmp_path / "up.log").open("w")
    up = subprocess.Popen(["bash", "scripts/up.sh"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not _answers(f"http://127.0.0.1:{env['PORT']}/healthz"):
            assert up.poll() is None, (tmp_path / "up.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "up.sh did not start in 10 minutes"
            time.sleep(1)
        running = _left(str(data))
        assert any("gunicorn" in c for c in running) and any("manage.py worker" in c for c in running)
        assert any("llm_serve" in c for c in running)
        # A worker that dies (a crash in native code, the OOM killer) is started again.
        dead = _pids_of(str(data), "manage.py worker")
        for pid in dead:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while not set(_pids_of(str(data), "manage.py worker")) - set(dead):
            assert time.monotonic() < deadline, "up.sh did not start the worker again"
            time.sleep(0.5)
        assert "starting it again" in (tmp_path / "up.log").read_text()
        time.sleep(3)  # the model server is starting or loaded: it must stop too

        os.killpg(up.pid, signal.SIGTERM)
        left = _stopped_within(str(data), STOP_WITHIN_S)
        assert left == [], f"still running {STOP_WITHIN_S} s after SIGTERM: {left}"
        assert up.wait(timeout=5) is not None
    finally:
        for pid in [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]:
            try:
                if str(data).encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_the_worker_stops_within_10_s_of_sigterm_cutting_a_long_task_at_its_deadline(tmp_path):
    data = tmp_path / "data"
    env = environment(data, RAG_WORKER_STOP_S="4")
    assert manage(env, "migrate", "-v0").returncode == 0
    worker = subprocess.Popen([sys.executable, "manage.py", "worker"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        # A task that would run for ten minutes.
        enqueue = "from django_q.tasks import async_task; print(async_task('time.sleep', 600))"
        queued = manage(env, "shell", "-c", enqueue)
        assert queued.returncode == 0, queued.stderr
        deadline = time.monotonic() + 60
        while "time.sleep" not in " ".join(_left(str(data))) and time.monotonic() < deadline:
            busy = manage(env, "shell", "-c", "from django_q.models import OrmQ; print(OrmQ.objects.count())")
            if busy.stdout.strip() == "0":
                break  # taken by the worker's pusher
            time.sleep(0.5)
        time.sleep(2)  # the worker process is inside time.sleep(600)

        os.killpg(worker.pid, signal.SIGTERM)
        left = _stopped_within(str(data), STOP_WITHIN_S)
        assert left == [], f"still running {STOP_WITHIN_S} s after SIGTERM: {left}"
        output = worker.communicate(timeout=5)[0]
        assert "stopped at the 4 s deadline" in output, output
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="needs Tesseract (scripts/_ocr.sh)")
def test_an_ingestion_job_cut_by_the_stop_is_queued_again_and_the_next_worker_finishes_it(tmp_path):
    from tests.factories import scanned_pdf

    data = tmp_path / "data"
    env = environment(data, RAG_WORKER_STOP_S="2")
    assert manage(env, "migrate", "-v0").returncode == 0
    scan = tmp_path / "scan.pdf"  # OCR reads it a page at a time: the job runs for many seconds
    scan.write_bytes(scanned_pdf([["Returns policy", "Customers may return an unopened dishwasher."]] * 30))
    enqueue = ("from pathlib import Path; from tenants.models import Tenant; from knowledge.services import "
               "upload_enqueue; t = Tenant.objects.create(slug='acme', name='Acme'); "
               f"scan = Path('{scan}').read_bytes(); "
               "print(upload_enqueue(tenant=t, source=None, uploads=[('scan.pdf', scan)]).pk)")  # fmt: skip
    job_pk = manage(env, "shell", "-c", enqueue).stdout.strip().splitlines()[-1]
    state = f"from knowledge.models import IngestJob; j = IngestJob.objects.get(pk={job_pk}); print(j.state, j.message)"

    def job_state() -> str:
        return manage(env, "shell", "-c", state).stdout.strip().splitlines()[-1]

    def start_worker() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "manage.py", "worker"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip

    worker = start_worker()
    try:
        deadline = time.monotonic() + 120
        while not job_state().startswith("running"):
            assert time.monotonic() < deadline, job_state()
            time.sleep(0.5)
        os.killpg(worker.pid, signal.SIGTERM)
        assert _stopped_within(str(data), STOP_WITHIN_S) == []
        assert "1 running job(s) queued again" in worker.communicate(timeout=5)[0]
        assert job_state().startswith("queued The worker running this job stopped")
        worker = start_worker()  # the next start takes it up and finishes it
        deadline = time.monotonic() + 300
        while not job_state().startswith(("indexing", "succeeded")):
            assert time.monotonic() < deadline, job_state()
            time.sleep(1)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
