"""Start Django on a throw-away data directory (SQLite + Qdrant Edge), migrated, for a benchmark."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path


def setup() -> Path:
    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    # BENCH_DATA_DIR: a data directory kept between runs (a bench that finds its tenant there skips ingesting).
    data = Path(os.environ.get("BENCH_DATA_DIR") or tempfile.mkdtemp(prefix="ragsite-bench-"))
    data.mkdir(parents=True, exist_ok=True)
    os.environ["RAG_DATA_DIR"] = str(data)
    os.environ.setdefault("RAG_MODELS_DIR", str(root / "var" / "models"))  # assembled once, kept between runs
    os.environ.setdefault("RAG_DEBUG", "true")
    os.environ["DJANGO_SETTINGS_MODULE"] = "ragsite.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return data
