"""Settings come from the environment; production mode refuses insecure or malformed configuration."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from core.env import env_bool, env_int, env_str

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DJANGO_", "SECRET_KEY", "DATABASE"))}
    clean.update({"RAG_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "ragsite.settings", **env})
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )


def test_production_mode_refuses_to_start_without_a_secret_key(tmp_path):
    result = _manage("check", env={}, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) must be set" in result.stderr


def test_check_deploy_passes_in_production_mode(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("a-long-random-production-secret-" + "k" * 40)
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={"SECRET_KEY_FILE": str(secret)},
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def test_database_url_switches_the_database(tmp_path):
    db = tmp_path / "other.sqlite3"
    env = {"RAG_DEBUG": "true", "DATABASE_URL": f"sqlite:///{db}"}
    result = _manage("migrate", "-v0", env=env, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert db.exists() and not (tmp_path / "ragsite.sqlite3").exists()


def test_the_embedded_sqlite_database_runs_in_wal_mode(db):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("the suite runs against another database (DATABASE_URL)")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        mode = cursor.fetchone()[0]
    # The test database is in memory (journal "memory"); the on-disk one must be WAL.
    from django.conf import settings

    assert "journal_mode=WAL" in settings.DATABASES["default"]["OPTIONS"]["init_command"]
    assert settings.DATABASES["default"]["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert mode in ("memory", "wal")


def test_migrations_match_the_models(db):
    call_command("makemigrations", "--check", "--dry-run", stdout=io.StringIO())


@pytest.mark.parametrize("value", ["yes", "2", "maybe"])
def test_booleans_reject_ambiguous_values(monkeypatch, value):
    monkeypatch.setenv("RAG_X", value)
    with pytest.raises(ImproperlyConfigured, match="RAG_X"):
        env_bool("RAG_X", default=False)


def test_integers_reject_garbage_and_out_of_range(monkeypatch):
    monkeypatch.setenv("RAG_N", "ten")
    with pytest.raises(ImproperlyConfigured):
        env_int("RAG_N", default=1)
    monkeypatch.setenv("RAG_N", "0")
    with pytest.raises(ImproperlyConfigured):
        env_int("RAG_N", default=1, minimum=1)


def test_secrets_can_come_from_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "s"
    secret.write_text("from-file\n")
    monkeypatch.delenv("RAG_S", raising=False)
    monkeypatch.setenv("RAG_S_FILE", str(secret))
    assert env_str("RAG_S") == "from-file"
    monkeypatch.setenv("RAG_S_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_str("RAG_S")


def test_a_local_install_finds_the_secret_key_up_sh_wrote(tmp_path):
    (tmp_path / "secret_key").write_text("generated-by-up-sh-" + "s" * 40)
    result = _manage("check", env={}, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr


def test_gunicorn_runs_one_web_worker_a_core_unless_told(monkeypatch):
    """Issue 50: RAG_WEB_WORKERS defaulted to 1 while the throttle counters were per process; they are shared now,
    so the default is one worker a core (what bench/retrieve.py measures best)."""
    import importlib.util

    def workers() -> int:
        spec = importlib.util.spec_from_file_location("gunicorn_conf", ROOT / "ragsite" / "gunicorn_conf.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module.workers

    monkeypatch.delenv("RAG_WEB_WORKERS", raising=False)
    assert workers() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("RAG_WEB_WORKERS", "3")
    assert workers() == 3
