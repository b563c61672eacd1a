"""Backup while the server runs, restore elsewhere: the restored instance answers retrieve identically.

Real processes: a gunicorn owning the embedded store, `manage.py backup` beside it, `manage.py restore`
into another data directory, a second gunicorn on the restored one.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from tests.servers import environment, manage, start_gunicorn, stop

QUERIES = ["How long is the warranty?", "Where do orders ship from?", "invoice number format"]
FILES = {
    "warranty.md": "# Warranty\n\nEvery product carries a two year warranty.\n",
    "shipping.md": "# Shipping\n\nOrders ship from the Rotterdam warehouse within two days.\n",
    "billing.md": "# Billing\n\nInvoice numbers look like INV-2024-00017.\n",
}
SETUP = """
from pathlib import Path
from knowledge.ingest import pipeline
from tenants.services import api_key_issue, tenant_create
tenant = tenant_create(slug="acme", name="Acme")
source = pipeline.folder_source_get_or_create(tenant=tenant, name="handbook", path=Path("{folder}"))
pipeline.sync_folder(source=source, root=Path("{folder}"))
Path("{folder}/warranty.md").write_text("# Warranty\\n\\nEvery product carries a three year warranty.\\n")
pipeline.sync_folder(source=source, root=Path("{folder}"))  # a second version: history survives too
print(api_key_issue(tenant=tenant, scope="read")[1])
"""


def _retrieve(env: dict[str, str], key: str, query: str, **extra: object) -> list[tuple[str, float, str]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{env['PORT']}/api/v1/tenants/acme/retrieve/", method="POST",
        data=json.dumps({"query": query, "top_k": 5, **extra}).encode(),
        headers={"Authorization": f"Api-Key {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    hits = json.loads(urllib.request.urlopen(request, timeout=60).read())["hits"]
    return [(h["chunk_id"], round(h["score"], 5), h["text"]) for h in hits]


def _original(tmp_path, **extra: str) -> tuple[dict[str, str], str]:  # type: ignore[no-untyped-def]
    """A migrated instance with the handbook indexed in two versions; its environment and a read key."""
    folder = tmp_path / "handbook"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text)
    original = environment(tmp_path / "original", **extra)
    assert manage(original, "migrate", "-v0").returncode == 0
    setup = manage(original, "shell", "-c", SETUP.replace("{folder}", str(folder)))
    assert setup.returncode == 0, setup.stderr
    return original, setup.stdout.strip().splitlines()[-1]


@pytest.mark.embedded_store
def test_a_backup_taken_while_serving_restores_to_an_instance_that_retrieves_identically(tmp_path):
    original, key = _original(tmp_path)

    server = start_gunicorn(original)
    try:
        before = {q: _retrieve(original, key, q) for q in QUERIES}
        history = _retrieve(original, key, "warranty years", include_superseded=True)
        made = manage(original, "backup", str(tmp_path / "backup"))  # beside the running owner of the store
        assert made.returncode == 0, made.stderr
        assert "1 tenant(s), 3 document(s)" in made.stdout
        refused = manage(original, "restore", str(tmp_path / "backup"), "--replace")
        assert refused.returncode != 0 and "stop the web server" in refused.stderr.lower()
    finally:
        stop(server)
    assert "three year" in before[QUERIES[0]][0][2]
    assert {"two year", "three year"} <= {w for _, _, t in history for w in ("two year", "three year") if w in t}

    restored = environment(tmp_path / "restored")
    done = manage(restored, "restore", str(tmp_path / "backup"))
    assert done.returncode == 0, done.stderr
    assert "0 missing from the vector store, 0 points without a chunk" in done.stdout
    server = start_gunicorn(restored)
    try:
        after = {q: _retrieve(restored, key, q) for q in QUERIES}
        history_after = _retrieve(restored, key, "warranty years", include_superseded=True)
    finally:
        stop(server)
    assert after == before  # same chunks, same order, same scores
    # Two versions of one sentence tie exactly (same score); a tie may come back in either order.
    assert sorted(history_after) == sorted(history)

    again = manage(restored, "restore", str(tmp_path / "backup"))
    assert again.returncode != 0 and "--replace" in again.stderr  # an instance with tenants is not overwritten
    (tmp_path / "backup" / "ragsite.sqlite3").write_bytes(b"not a database")
    broken = manage(environment(tmp_path / "third"), "restore", str(tmp_path / "backup"))
    assert broken.returncode != 0 and "sha256" in broken.stderr


def _postgres_database(url: str, name: str) -> str:
    """A new, empty database on the PostgreSQL server of `url`; its URL."""
    import dj_database_url
    import psycopg

    db = dj_database_url.parse(url)
    params = {"host": db["HOST"], "port": db["PORT"] or 5432, "user": db["USER"], "password": db["PASSWORD"]}
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 5432}/{name}"


ON_POSTGRESQL = os.environ.get("DATABASE_URL", "").startswith("postgres")


@pytest.mark.skipif(not ON_POSTGRESQL, reason="needs PostgreSQL: the production-configuration pass of scripts/test.sh")
def test_on_postgresql_a_pg_dump_backup_while_serving_restores_to_an_instance_that_retrieves_identically(tmp_path):
    source_url = _postgres_database(os.environ["DATABASE_URL"], "ragsite_backup_source")
    original, key = _original(tmp_path, DATABASE_URL=source_url)
    server = start_gunicorn(original)
    try:
        before = {q: _retrieve(original, key, q) for q in QUERIES}
        made = manage(original, "backup", str(tmp_path / "backup"))  # pg_dump beside the running server
        assert made.returncode == 0, made.stderr
        assert "1 tenant(s), 3 document(s)" in made.stdout
    finally:
        stop(server)
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["database"]["engine"] == "postgresql" and manifest["database"]["file"] == "ragsite.pgdump"

    restored = environment(tmp_path / "restored", DATABASE_URL=_postgres_database(source_url, "ragsite_backup_copy"))
    done = manage(restored, "restore", str(tmp_path / "backup"))  # pg_restore, migrate, vectors rebuilt from SQL
    assert done.returncode == 0, done.stderr
    assert "0 missing from the vector store, 0 points without a chunk" in done.stdout
    server = start_gunicorn(restored)
    try:
        after = {q: _retrieve(restored, key, q) for q in QUERIES}
    finally:
        stop(server)
    assert after == before  # same chunks, same order, same scores; the API key came back too
    again = manage(restored, "restore", str(tmp_path / "backup"))
    assert again.returncode != 0 and "--replace" in again.stderr
    replaced = manage(restored, "restore", str(tmp_path / "backup"), "--replace")
    assert replaced.returncode == 0, replaced.stderr
    into_sqlite = manage(environment(tmp_path / "sqlite"), "restore", str(tmp_path / "backup"))
    assert into_sqlite.returncode != 0 and "backup of a postgresql database" in into_sqlite.stderr
