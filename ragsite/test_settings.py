"""Settings for the test suite: everything real, but under a throw-away data directory."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("RAG_DEBUG", "false")
os.environ.setdefault("SECRET_KEY", "test-only-secret-key-" + "x" * 40)
os.environ.setdefault("RAG_HTTPS", "false")
os.environ["RAG_DATA_DIR"] = os.environ.get("RAG_TEST_DATA_DIR") or tempfile.mkdtemp(prefix="ragsite-test-")

from ragsite.settings import *  # noqa: E402,F403
from ragsite.settings import Q_CLUSTER, STORAGES  # noqa: E402

Q_CLUSTER["sync"] = True  # django-q2 runs tasks inline, in the test process
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405  (whitenoise warns about a missing root)
