"""Backup while the server runs, restore elsewhere: the restored instance answers retrieve identically.

Real processes: a gunicorn owning the embedded store, `manage.py backup` beside it, `manage.py restore`
into another data directory, a second gunicorn on the restored one.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ["How long is the warranty?", "Where do orders ship from?", "invoice number format"]
FILES = {
    "warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n",
    "shipping.md": "# Shipping\n\nOrders ship from the Rotterdam warehouse within two days.\n",
    "billing.md": "# Billing\n\nInvoice numbers look like INV-2024-00017.\n",
}
SETUP = """
from pathlib import Path
from knowledge import pipeline
from tenants.services import api_key_issue, tenant_create
tenant = tenant_create(slug="acme", name="Acme")
source = pipeline.folder_source_get_or_create(tenant=tenant, name="handbook", path=Path("{folder}"))
pipeline.sync_folder(source=source, root=Path("{folder}"))
Path("{folder}/warranty.md").write_text("# Warranty\\n\\nEvery product carries a three year warranty.\\n")
pipeline.sync_folder(source=source, root=Path("{folder}"))  # a second version: history survives too
print(api_key_issue(tenant=tenant, scope="read")[1])
"""

pytestmark = pytest.mark.embedded_store


def _env(data: Path, port: int) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DJANGO_", "SECRET_KEY", "DATABASE"))}
    clean.pop("REDIS_URL", None)
    clean.pop("QDRANT_URL", None)
    return {**clean, "DJANGO_SETTINGS_MODULE": "ragsite.settings", "RAG_DATA_DIR": str(data), "RAG_DEBUG": "true",
            "PORT": str(port), "RAG_LLM_PRELOAD": "false"}  # fmt: skip


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "gunicorn", "ragsite.wsgi", "--config", "ragsite/gunicorn_conf.py"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{env['PORT']}/accounts/login/", timeout=2).read()
            return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise AssertionError("the server did not start")


def _retrieve(env: dict[str, str], key: str, query: str, **extra: object) -> list[tuple[str, float, str]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{env['PORT']}/api/v1/tenants/acme/retrieve/", method="POST",
        data=json.dumps({"query": query, "top_k": 5, **extra}).encode(),
        headers={"Authorization": f"Api-Key {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    hits = json.loads(urllib.request.urlopen(request, timeout=60).read())["hits"]
    return [(h["chunk_id"], round(h["score"], 5), h["text"]) for h in hits]


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(timeout=60)


def test_a_backup_taken_while_serving_restores_to_an_instance_that_retrieves_identically(tmp_path):
    folder = tmp_path / "handbook"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    original = _env(tmp_path / "original", _port())
    assert _manage(original, "migrate", "-v0").returncode == 0
    setup = _manage(original, "shell", "-c", SETUP.replace("{folder}", str(folder)))
    assert setup.returncode == 0, setup.stderr
    key = setup.stdout.strip().splitlines()[-1]

    server = _serve(original)
    try:
        before = {q: _retrieve(original, key, q) for q in QUERIES}
        history = _retrieve(original, key, "warranty years", include_superseded=True)
        made = _manage(original, "backup", str(tmp_path / "backup"))  # beside the running owner of the store
        assert made.returncode == 0, made.stderr
        assert "1 tenant(s), 3 document(s)" in made.stdout
        refused = _manage(original, "restore", str(tmp_path / "backup"), "--replace")
        assert refused.returncode != 0 and "stop the web server" in refused.stderr.lower()
    finally:
        _stop(server)
    assert "three year" in before[QUERIES[0]][0][2]
    assert {"two year", "three year"} <= {w for _, _, t in history for w in ("two year", "three year") if w in t}

    restored = _env(tmp_path / "restored", _port())
    done = _manage(restored, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    assert "0 missing from the vector store, 0 points without a chunk" in done.stdout
    server = _serve(restored)
    try:
        after = {q: _retrieve(restored, key, q) for q in QUERIES}
        history_after = _retrieve(restored, key, "warranty years", include_superseded=True)
    finally:
        _stop(server)
    assert after == before  # same chunks, same order, same scores
    # Two versions of one sentence tie exactly (same score); a tie may come back in either order.
    assert sorted(history_after) == sorted(history)

    again = _manage(restored, "restore", str(tmp_path / "backup"))
    assert again.returncode != 0 and "--replace" in again.stderr  # an instance with tenants is not overwritten
    (tmp_path / "backup" / "ragsite.sqlite3").write_bytes(b"not a database")
    broken = _manage(_env(tmp_path / "third", _port()), "restore", str(tmp_path / "backup"))
    assert broken.returncode != 0 and "sha256" in broken.stderr
