"""Real server processes for tests: a clean environment on a data directory, manage.py, gunicorn."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
# The test process's own configuration never leaks into a server it starts (a server is on the embedded
# default unless told otherwise: QDRANT_URL=:memory: is a store inside one process and cannot be shared).
INHERITED_NOT = ("RAG_", "DJANGO_", "SECRET_KEY", "DATABASE", "REDIS_URL", "QDRANT_")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED_NOT)}
    env.update(
        DJANGO_SETTINGS_MODULE="ragsite.settings",
        RAG_DATA_DIR=str(data),
        RAG_DEBUG="true",
        PORT=str(free_port()),
        RAG_LLM_PRELOAD="false",
        RAG_WEB_WORKERS="1",
    )  # fmt: skip  (two: said so)
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def start_gunicorn(env: dict[str, str], log: IO[str] | None = None) -> subprocess.Popen:
    """gunicorn on `env["PORT"]` in its own process group (so a test can kill master and workers), once it answers."""
    output = log if log is not None else subprocess.DEVNULL
    command = [sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config", "ragsite/gunicorn_conf.py"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                              start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{env['PORT']}/accounts/login/", timeout=2).read()
            return server
        except OSError:
            if server.poll() is not None:
                raise AssertionError(f"gunicorn exited with {server.returncode}") from None
            time.sleep(0.2)
    server.terminate()
    raise AssertionError("gunicorn did not start")


def stop(server: subprocess.Popen, within: float = 10) -> None:
    """SIGTERM to the server's whole process group (each was started in its own); what is left after `within`
    seconds is killed, so no test leaves a process of its servers behind."""
    try:
        own_group = os.getpgid(server.pid) == server.pid
    except ProcessLookupError:
        own_group = False
    signal_all = (lambda sig: os.killpg(server.pid, sig)) if own_group else server.send_signal
    try:
        signal_all(signal.SIGTERM)
        server.wait(timeout=within)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        signal_all(signal.SIGKILL)  # the leader's children too, had any outlived it
    except ProcessLookupError:
        pass
    server.wait(timeout=30)


def start_model_server(runtime: Path, chain: list[str], log: IO[str] | None = None, **extra: str) -> subprocess.Popen:
    """`manage.py llm_serve` (the supervisor, which runs llama.cpp's server) on `chain`, state in `runtime`.

    Returns once the state file exists; `wait_for_model` waits for a state."""
    runtime.mkdir(parents=True, exist_ok=True)
    env = environment(runtime / "data", RAG_LLM_RUNTIME_DIR=str(runtime), RAG_LLM_MODEL_PATH=chain[0],
                      RAG_LLM_FALLBACK_PATHS=",".join(chain[1:]), RAG_LLM_THREADS="2",
                      RAG_MODELS_DIR=str(runtime / "no-models"), **extra)  # fmt: skip
    output = log if log is not None else (runtime / "supervisor.log").open("a")
    process = subprocess.Popen([sys.executable, "manage.py", "llm_serve"], cwd=ROOT, env=env, stdout=output,
                               stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    return process


def model_state(runtime: Path) -> dict:  # type: ignore[type-arg]
    import json

    try:
        return dict(json.loads((runtime / "state.json").read_text()))
    except (OSError, ValueError):
        return {}


def wait_for_model(runtime: Path, states: tuple[str, ...] = ("ready",), timeout: float = 300, **match: object) -> dict:  # type: ignore[type-arg]
    """The supervisor's state once it is one of `states` (and matches `match`, e.g. restarts=1)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = model_state(runtime)
        if state.get("state") in states and all(state.get(k) == v for k, v in match.items()):
            return state
        time.sleep(0.1)
    log = (runtime / "server.log").read_text(errors="replace")[-3000:] if (runtime / "server.log").exists() else ""
    raise AssertionError(f"model server never reached {states} {match}: {model_state(runtime)}\n{log}")
