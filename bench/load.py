"""Load: N concurrent API clients (a retrieve/answer mix) against a real gunicorn, loopback only.

    python bench/load.py [--clients 16] [--answer-share 0.25] [--seconds 60] [--max-requests 2000]
                         [--production]

Sets up a throw-away data directory, ingests ragsite's own docs/ into a tenant (the packaged
embedder), issues a read key and starts gunicorn with the embedded defaults (SQLite, Qdrant Edge, the
packaged chat model). `--production` uses PostgreSQL and Redis instead (DATABASE_URL and REDIS_URL
from the environment, e.g. what scripts/_services.sh starts); the vector store stays embedded because
no Qdrant server runs here, so that run keeps one web worker.

Each client loops until the time or the request budget is spent. Answer requests go to the chat
model, which serves one at a time; past RAG_ANSWER_MAX_WAITING waiting answers the server answers 503
with Retry-After. A client honours Retry-After by waiting before its next answer. Prints, per endpoint,
requests, throughput, p50/p95/p99 latency, and the status codes. Anything else counts as an error: a 5xx
other than a clean 503 with Retry-After, a dropped connection, or a timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "How do I connect an MCP client over stdio?",
    "Which variable points the platform at a Qdrant server?",
    "How are citations verified?",
    "What does the bootstrap endpoint return?",
    "How do I issue a read-only API key?",
    "Which embedder is packaged by default?",
    "How many web workers can run with the embedded store?",
    "What happens to an empty file during ingestion?",
    "How is the first token made faster?",
    "Which chat model is the default and which is the fallback?",
]


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered) + 0.5)) - 1))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(data: Path, port: int, production: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DJANGO_", "SECRET_KEY"))}
    env.update(DJANGO_SETTINGS_MODULE="ragsite.settings", RAG_DATA_DIR=str(data), RAG_DEBUG="true", PORT=str(port),
               RAG_MODELS_DIR=str(ROOT / "var" / "models"), RAG_API_RATE="100000/min")  # fmt: skip
    for name in ("RAG_LLM_MODEL_PATH", "RAG_ANSWER_MAX_WAITING", "RAG_WEB_THREADS"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    if production:
        for name in ("DATABASE_URL", "REDIS_URL"):
            if not os.environ.get(name):
                sys.exit(f"--production needs {name} (scripts/_services.sh starts PostgreSQL and Redis)")
    else:
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
    return env


SETUP = """
from pathlib import Path
from knowledge.ingest import pipeline
from tenants.services import api_key_issue, tenant_create
import secrets
tenant = tenant_create(slug="load-" + secrets.token_hex(3), name="Load")
source = pipeline.folder_source_get_or_create(tenant=tenant, name="docs", path=Path("{docs}"))
pipeline.sync_folder(source=source, root=Path("{docs}"))
print(tenant.slug, api_key_issue(tenant=tenant, scope="read")[1])
"""


def start_server(production: bool) -> tuple[list[subprocess.Popen], str, str, str]:
    data = Path(tempfile.mkdtemp(prefix="ragsite-load-"))
    port = free_port()
    env = environment(data, port, production)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    out = subprocess.run([*manage, "shell", "-c", SETUP.replace("{docs}", str(ROOT / "docs"))], cwd=ROOT, env=env,
                         check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
    slug, key = out[-2], out[-1]
    log = open(data / "server.log", "w")  # noqa: SIM115  (lives as long as the server)
    command = [sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config", "ragsite/gunicorn_conf.py"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    # The chat model in its own process, as up.sh runs it.
    model = subprocess.Popen([*manage, "llm_serve"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/accounts/login/", timeout=2).read()
            break
        except OSError:
            time.sleep(0.2)
    return [server, model], base, slug, key


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.status: dict[str, Counter] = defaultdict(Counter)
        self.errors: dict[str, Counter] = defaultdict(Counter)

    def record(self, endpoint: str, seconds: float, status: str, error: str = "") -> None:
        with self.lock:
            self.latency[endpoint].append(seconds)
            self.status[endpoint][status] += 1
            if error:
                self.errors[endpoint][error] += 1


def call(base: str, slug: str, key: str, endpoint: str, question: str, timeout: float) -> tuple[str, str, float]:
    body = {"query": question, "top_k": 8} if endpoint == "retrieve" else {"question": question}
    request = urllib.request.Request(
        f"{base}/api/v1/tenants/{slug}/{endpoint}/", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Api-Key {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            json.loads(response.read())
            return str(response.status), "", 0.0
    except urllib.error.HTTPError as exc:
        exc.read()
        retry = float(exc.headers.get("Retry-After") or 0)
        clean = exc.code in (429, 503) and retry > 0
        return str(exc.code), "" if clean else f"HTTP {exc.code}", retry
    except TimeoutError:
        return "timeout", "timeout", 0.0
    except (urllib.error.URLError, ConnectionError, OSError) as exc:
        return "dropped", f"connection: {exc}", 0.0


def client(base: str, slug: str, key: str, args: argparse.Namespace, deadline: float, budget: list[int],
           stats: Stats, seed: int) -> None:  # fmt: skip
    rng = random.Random(seed)
    answer_not_before = 0.0
    while time.monotonic() < deadline:
        with stats.lock:
            if budget[0] <= 0:
                return
            budget[0] -= 1
        wants_answer = rng.random() < args.answer_share and time.monotonic() >= answer_not_before
        endpoint = "answer" if wants_answer else "retrieve"
        started = time.monotonic()
        status, error, retry = call(base, slug, key, endpoint, rng.choice(QUESTIONS), args.timeout)
        stats.record(endpoint, time.monotonic() - started, status, error)
        if retry:
            answer_not_before = time.monotonic() + retry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--answer-share", type=float, default=0.25)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--max-requests", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--production", action="store_true")
    args = parser.parse_args()
    processes, base, slug, key = start_server(args.production)
    try:
        for _ in range(600):  # the model before the clock starts (503 while it loads)
            if call(base, slug, key, "answer", QUESTIONS[0], args.timeout)[0] == "200":
                break
            time.sleep(1)
        stats, budget = Stats(), [args.max_requests]
        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(base, slug, key, args, started + args.seconds, budget,
                                                         stats, n)) for n in range(args.clients)]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=60)
    config = "production (PostgreSQL + Redis, embedded vectors)" if args.production else "embedded default"
    print(f"{config}: {args.clients} clients, answer share {args.answer_share:.0%}, {elapsed:.0f} s")
    print("| endpoint | requests | per s | p50 ms | p95 ms | p99 ms | statuses | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for endpoint in sorted(stats.latency):
        values = [v * 1000 for v in stats.latency[endpoint]]
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(stats.status[endpoint].items()))
        errors = sum(stats.errors[endpoint].values())
        print(f"| {endpoint} | {len(values)} | {len(values) / elapsed:.1f} | {percentile(values, 50):.0f} | "
              f"{percentile(values, 95):.0f} | {percentile(values, 99):.0f} | {statuses} | {errors} |")  # fmt: skip
    for endpoint, errors in stats.errors.items():
        for error, count in errors.most_common(5):
            print(f"  {endpoint}: {count} × {error}")


if __name__ == "__main__":
    main()
