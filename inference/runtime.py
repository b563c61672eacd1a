"""The local chat model in its own process: llama.cpp's OpenAI-compatible server, supervised.

A crash in native code must never take a web worker down, so no web worker, django-q worker or test
runner loads a chat model. `manage.py llm_serve` (started by up.sh beside gunicorn and the worker) runs
`Supervisor`: it starts `python -m llama_cpp.server` on a free loopback port with the first model of the
chain, waits until the port answers (llama_cpp.server loads the default model before it listens), asks
for one token as a self-test, and then watches the process. A process that dies is restarted; a model that
fails to load, or crashes RAG_LLM_MAX_CRASHES times within RAG_LLM_CRASH_WINDOW_S, gives way to the next
model of the chain (1.5B → 0.5B → none: extractive answers), and the reason is kept for the answers to say.

Everything a client needs (URL, per-start API key, the models served, state, restarts, failures) is in
one JSON file, `RAG_LLM_RUNTIME_DIR/state.json`, replaced atomically at every change. Readers are the web
process and the django-q worker (`inference.llm`), the health endpoint and the chat page.

Other models the product may ask for (an assistant's catalog model, an enrichment model) are served by
the same process under their file names: llama_cpp.server swaps the loaded model on demand, one at a time.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from core.processes import process_alive
from inference.gguf import ModelLoadError, chat_format_for, configured_paths, gguf_info, server_threads

logger = logging.getLogger(__name__)

# The states a client sees. starting/restarting: come back shortly (503 + Retry-After); failed: no model of
# the chain could be served (extractive answers); stopped: the supervisor exited.
STARTING, READY, RESTARTING, FAILED, STOPPED = "starting", "ready", "restarting", "failed", "stopped"
POLL_S = 0.2
RESTART_BACKOFF_S = (1, 2, 5, 10)
CHAIN_RETRY_S = 300  # after the whole chain failed, try again this much later (a model file may be fixed)
SELF_TEST_TIMEOUT_S = 120


@dataclass
class RuntimeState:
    state: str
    url: str = ""
    api_key: str = ""
    model: str = ""  # the alias serving by default (a file name)
    models: dict[str, str] = field(default_factory=dict)  # alias → GGUF path, everything this server can load
    n_ctx: int = 0
    pid: int | None = None  # the model server
    supervisor_pid: int | None = None
    restarts: int = 0
    last_exit: str = ""  # how the model process last ended, in words
    failures: list[str] = field(default_factory=list)  # why earlier models of the chain are not serving
    detail: str = ""
    since: float = 0.0

    def is_current(self) -> bool:
        """Whether the supervisor that wrote this is still alive (a killed one leaves a stale file behind)."""
        if self.supervisor_pid is None:
            return False
        try:
            os.kill(self.supervisor_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def public(self) -> dict[str, Any]:
        """What the health endpoint and the pages may show: everything but the key and the paths. A ready model
        whose process is gone reads as restarting at once, before its supervisor has noticed."""
        state = self.state if self.is_current() else STOPPED
        if state == READY and not process_alive(self.pid):
            state = RESTARTING
        return {
            "state": state,
            "model": self.model,
            "models": sorted(self.models),
            "restarts": self.restarts,
            "last_exit": self.last_exit,
            "failures": self.failures,
            "detail": self.detail,
            "since": self.since,
        }


def runtime_dir() -> Path:
    return Path(settings.RAG_LLM_RUNTIME_DIR)


def state_path() -> Path:
    return runtime_dir() / "state.json"


def read_state() -> RuntimeState | None:
    try:
        data = json.loads(state_path().read_text(encoding="utf-8"))
        return RuntimeState(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_state(state: RuntimeState) -> None:
    directory = runtime_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".state.", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as out:  # mkstemp: 0600, the file holds the server's key
        json.dump(asdict(state), out)
    os.replace(temp, state_path())


def signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def crash_advice(returncode: int) -> str:
    """What an operator can do about a native crash, in words."""
    if returncode in (-signal.SIGILL, -signal.SIGSEGV, -signal.SIGBUS):
        return (
            " llama.cpp died in native code: it was probably built for another CPU (SIGILL) or uses instructions "
            "this machine advertises but faults on (AMX in a VM: SIGSEGV). Rebuild it for the fleet: "
            "rm -rf .venv && ./scripts/up.sh (scripts/_llama.sh), or set RAG_LLAMA_CMAKE_ARGS."
        )
    return ""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served_models(default: str, failed: list[str]) -> dict[str, str]:
    """alias → path: the default first, then every other GGUF the product may ask this server for (not the
    models of the chain that already failed: they would crash or fail again when swapped in)."""
    candidates = [default, *configured_paths()]
    models_dir = Path(settings.RAG_MODELS_DIR)
    if models_dir.is_dir():
        candidates += sorted(str(p) for p in models_dir.glob("*.gguf"))
    try:
        from inference.models import ModelEntry

        candidates += [e.path for e in ModelEntry.objects.exclude(loads=False).exclude(path="")]
    except Exception:  # no database yet (a fresh install before migrate): the chain alone
        logger.info("Model catalog unavailable; serving the configured chain only")
    models: dict[str, str] = {}
    for path in candidates:
        if not path or path in models.values() or path in failed or not Path(path).is_file():
            continue
        if path != default:
            try:
                gguf_info(path)  # a damaged file is not offered: loading it could take the server down
            except ModelLoadError:
                logger.warning("Not serving %s: it is not a readable GGUF", path)
                continue
        alias = Path(path).name if Path(path).name not in models else path
        models[alias] = path
    return models


def server_config(models: dict[str, str], *, port: int, api_key: str) -> dict[str, Any]:
    threads = server_threads()
    return {
        "host": "127.0.0.1",
        "port": port,
        "api_key": api_key,
        # One answer at a time, each to its end: a second request waits instead of cutting the first short.
        "interrupt_requests": False,
        "models": [
            {
                "model": path,
                "model_alias": alias,
                "n_ctx": settings.RAG_LLM_CONTEXT,
                "n_batch": 512,
                "n_threads": threads,
                "n_threads_batch": threads,
                "logits_all": False,
                "verbose": True,
                "chat_format": chat_format_for(path),
            }  # fmt: skip
            for alias, path in models.items()
        ],
    }


# llama_cpp.server reads its settings from the environment too (PORT, HOST, MODEL, API_KEY… in any case), and
# they beat the config file: the server gets only what a process needs, never the web's PORT or keys.
SERVER_ENV_KEEP = {"PATH", "HOME", "LANG", "LANGUAGE", "TMPDIR", "TZ", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "USER"}
SERVER_ENV_PREFIXES = ("LC_", "OMP_", "GGML_", "CUDA_", "HIP_", "ROCR_")


def server_environment() -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if k in SERVER_ENV_KEEP or k.startswith(SERVER_ENV_PREFIXES)}
    return {**kept, "PYTHONUNBUFFERED": "1"}  # its log is read while it runs


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The model server gets SIGTERM when its supervisor dies, however it dies."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Supervisor:
    """Start, watch and restart the local model server; walk down the chain when a model keeps failing."""

    def __init__(self, chain: list[str]) -> None:
        self.chain = chain
        self.position = 0
        self.state = RuntimeState(state=STARTING, supervisor_pid=os.getpid(), since=time.time())
        self.process: subprocess.Popen[bytes] | None = None
        self.stopping = False
        self.crashes: deque[float] = deque()

    # -- bookkeeping --------------------------------------------------------------------------------------
    def publish(self, state: str, detail: str = "") -> None:
        self.state.state, self.state.detail, self.state.since = state, detail, time.time()
        self.state.pid = self.process.pid if self.process and self.process.poll() is None else None
        write_state(self.state)
        logger.info("Chat model server: %s%s", state, f" ({detail})" if detail else "")

    def give_up_on_current(self, reason: str) -> None:
        self.state.failures.append(f"{Path(self.chain[self.position]).name}: {reason}")
        self.position += 1
        self.crashes.clear()

    def stop(self, *_: Any) -> None:
        self.stopping = True

    # -- the loop -------------------------------------------------------------------------------------------
    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        try:
            while not self.stopping:
                if self.position >= len(self.chain):
                    self.process = None
                    self.publish(FAILED, "No model of the chain could be served; answers are extractive. "
                                 f"Trying again in {CHAIN_RETRY_S} s.")  # fmt: skip
                    self.sleep(CHAIN_RETRY_S)
                    self.position, self.state.failures = 0, []
                    continue
                self.serve_current()
        finally:
            self.terminate()
            self.publish(STOPPED, "The supervisor stopped.")

    def serve_current(self) -> None:
        path = self.chain[self.position]
        if not Path(path).is_file():
            self.give_up_on_current("no such file")
            return
        outcome = self.start(path)
        if isinstance(outcome, str):  # never answered: a model that does not load gives way at once
            self.give_up_on_current(outcome)
            return
        if isinstance(outcome, int):  # it died answering its first token (the AMX fault): a crash
            self.record_crash(outcome, "at its first token (self-test)")
            return
        self.publish(READY)
        while not self.stopping and self.process is not None and self.process.poll() is None:
            time.sleep(POLL_S)
        if self.stopping or self.process is None:
            return
        self.record_crash(self.process.returncode, "while serving")

    def record_crash(self, returncode: int, when: str) -> None:
        self.state.restarts += 1
        self.state.last_exit = f"{signal_name(returncode)} {when} at {time.strftime('%H:%M:%S')}"
        now = time.monotonic()
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > settings.RAG_LLM_CRASH_WINDOW_S:
            self.crashes.popleft()
        logger.error("Chat model server %s.%s", self.state.last_exit, crash_advice(returncode))
        if len(self.crashes) >= settings.RAG_LLM_MAX_CRASHES:
            self.give_up_on_current(
                f"crashed {len(self.crashes)} times ({signal_name(returncode)}).{crash_advice(returncode)}"
            )
            return
        backoff = RESTART_BACKOFF_S[min(len(self.crashes), len(RESTART_BACKOFF_S)) - 1]
        self.publish(RESTARTING, f"The model process {signal_name(returncode)}; restarting in {backoff} s.")
        self.sleep(backoff)

    def start(self, path: str) -> str | int | None:
        """Start the server on `path`: None once it answered a one-token self-test; the exit status when it
        died answering it; otherwise why it never got that far."""
        models = served_models(path, failed=self.chain[: self.position])
        port, api_key = free_port(), secrets.token_urlsafe(24)
        config = runtime_dir() / "server.json"
        runtime_dir().mkdir(parents=True, exist_ok=True)
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(server_config(models, port=port, api_key=api_key), out)
        self.state.url, self.state.api_key = f"http://127.0.0.1:{port}/v1", api_key
        self.state.model, self.state.models, self.state.n_ctx = next(iter(models)), models, settings.RAG_LLM_CONTEXT
        self.terminate()
        log = (runtime_dir() / "server.log").open("ab")
        log.write(f"\n== {time.strftime('%Y-%m-%d %H:%M:%S')} starting {path} on port {port}\n".encode())
        log.flush()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config)], env=server_environment(),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )  # fmt: skip
        log.close()
        self.publish(STARTING if self.state.restarts == 0 else RESTARTING, f"Loading {Path(path).name}.")
        deadline = time.monotonic() + settings.RAG_LLM_START_TIMEOUT_S
        while time.monotonic() < deadline and not self.stopping:
            if self.process.poll() is not None:
                return f"failed to load ({signal_name(self.process.returncode)}; its log is llm/server.log)"
            if _answers(f"http://127.0.0.1:{port}/openapi.json"):
                break
            time.sleep(POLL_S)
        else:
            self.terminate()
            return f"did not start within {settings.RAG_LLM_START_TIMEOUT_S} s"
        failure = self.self_test()
        if failure is None:
            return None
        try:  # a process that died answering may take a moment to be reaped
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.process.poll() is not None:
            return int(self.process.returncode)
        self.terminate()
        return f"failed its self-test: {failure}"

    def self_test(self) -> str | None:
        body = json.dumps({"model": self.state.model, "max_tokens": 1, "temperature": 0.0,
                           "messages": [{"role": "user", "content": "Say OK."}]}).encode()  # fmt: skip
        request = urllib.request.Request(f"{self.state.url}/chat/completions", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {self.state.api_key}"})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=SELF_TEST_TIMEOUT_S) as response:
                json.loads(response.read())
            return None
        except (OSError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"

    def terminate(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(POLL_S)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class SelfTest:
    ok: bool
    detail: str
    system_info: str = ""
    seconds: float = 0.0


SELF_TEST_SCRIPT = """
import sys, llama_cpp
print(llama_cpp.llama_print_system_info().decode(), flush=True)
llama = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False)
llama.create_chat_completion(messages=[{"role": "user", "content": "Say OK."}], max_tokens=1)
print("token ok", flush=True)
"""


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def runtime_self_test(model_path: str, timeout_s: float = 300) -> SelfTest:
    """Load a GGUF and generate one token in a child process: native code that faults kills the child only.

    On failure the detail says how the child died, which instruction sets this CPU advertises that the build
    uses (llama.cpp's own system info line), and what to do."""
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", SELF_TEST_SCRIPT, model_path], capture_output=True, text=True,
                              timeout=timeout_s, stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired:
        return SelfTest(False, f"no token within {timeout_s:.0f} s")
    lines = done.stdout.strip().splitlines()
    system_info = lines[0].strip() if lines else ""
    if done.returncode == 0 and "token ok" in lines:
        return SelfTest(True, "", system_info, time.perf_counter() - started)
    flags = cpu_flags()
    advertised = sorted(f for f in flags if f.startswith(("amx", "avx512")))
    detail = f"the child {signal_name(done.returncode)}."
    if done.returncode < 0:
        detail += (f" The build reports: {system_info or 'nothing'}. This CPU advertises "
                   f"{', '.join(advertised) or 'no AVX-512 or AMX'}.{crash_advice(done.returncode)}")  # fmt: skip
    else:
        detail += " " + (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return SelfTest(False, detail, system_info)


REMOTE_PROBE_TTL_S = 10.0  # the chat page and /healthz ask a remote engine at most this often
_remote_probe: dict[str, tuple[float, bool]] = {}


def _remote_reachable(url: str, api_key: str) -> bool:
    """Whether RAG_LLM_URL answers GET /models (cached briefly: a page load never waits on it twice)."""
    cached = _remote_probe.get(url)
    if cached is not None and time.monotonic() - cached[0] < REMOTE_PROBE_TTL_S:
        return cached[1]
    request = urllib.request.Request(url.rstrip("/") + "/models", headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            reachable = response.status == 200
    except (OSError, urllib.error.URLError):
        reachable = False
    _remote_probe[url] = (time.monotonic(), reachable)
    return reachable


def model_status() -> dict[str, Any]:
    """The chat model's state as the health endpoint and the chat page show it (no key, no paths)."""
    if settings.RAG_LLM_URL:
        reachable = _remote_reachable(settings.RAG_LLM_URL, settings.RAG_LLM_API_KEY or "")
        return {"state": READY if reachable else "unreachable", "model": settings.RAG_LLM_MODEL, "remote": True}
    state = read_state()
    if state is None:
        return {"state": STOPPED, "model": "", "detail": "No chat model server has run here (manage.py llm_serve)."}
    return state.public()
