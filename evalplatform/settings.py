"""Settings, read from the environment with embedded defaults.

Embedded default: a SQLite file in ``EVAL_DATA_DIR`` (WAL, busy timeout), django-q2 on the ORM
broker, an in-process channel layer. ``DATABASE_URL`` switches to PostgreSQL, ``REDIS_URL``
switches the channel layer and the django-q2 broker to Redis. See docs/configuration.md.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evalplatform.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_rate,
    generate_secret_key,
    read_or_create_secret,
    validate_secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("EVAL_DATA_DIR", BASE_DIR / "var")).resolve()

DEBUG = env_bool("DEBUG", False)
DATABASE_URL = os.environ.get("DATABASE_URL", "")
REDIS_URL = os.environ.get("REDIS_URL", "")

# Scale mode runs processes on several hosts: they must share one SECRET_KEY (sessions,
# signed task payloads) and one set of ENCRYPTION_KEYS (stored API keys). Generating them per
# host would fail later and far away, so refuse to start instead.
if DATABASE_URL or REDIS_URL:
    _missing = [name for name in ("SECRET_KEY", "ENCRYPTION_KEYS") if not os.environ.get(name)]
    if _missing:
        raise ImproperlyConfigured(
            f"Scale mode (DATABASE_URL or REDIS_URL set) needs {' and '.join(_missing)} in the "
            "environment, the same on every host; see docs/deploy.md."
        )

_secret = os.environ.get("SECRET_KEY")
if _secret is None:
    _secret = read_or_create_secret(DATA_DIR / "secret_key", generate_secret_key)
SECRET_KEY = validate_secret_key(_secret, debug=DEBUG)

# Fernet keys for secrets at rest (provider API keys). The first encrypts, all decrypt, so
# keys can be rotated by prepending a new one. Kept apart from SECRET_KEY so rotating the
# session key never makes stored API keys unreadable.
ENCRYPTION_KEYS = env_list("ENCRYPTION_KEYS", [])
if not ENCRYPTION_KEYS:
    from cryptography.fernet import Fernet

    ENCRYPTION_KEYS = [
        read_or_create_secret(DATA_DIR / "encryption_key", lambda: Fernet.generate_key().decode())
    ]

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "evalplatform.admin_apps.PlatformAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_q",
    "channels",
    "evalplatform.accounts",
    "evalplatform.providers",
    "evalplatform.prompts",
    "evalplatform.runs",
    "evalplatform.live",
    "evalplatform.web",
    "generation",
    "scenarios",
    "evaluations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "evalplatform.limits.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "evalplatform.web.middleware.StorableTextMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "evalplatform.urls"
WSGI_APPLICATION = "evalplatform.wsgi.application"
ASGI_APPLICATION = "evalplatform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "evalplatform.web.context.navigation",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
SQLITE_BUSY_TIMEOUT_S = env_int("SQLITE_BUSY_TIMEOUT_S", 20)
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(
            # 0 (a connection per request) is what Django advises under ASGI; a pooler such
            # as PgBouncer is the way to reuse connections there.
            DATABASE_URL,
            conn_max_age=env_int("DB_CONN_MAX_AGE", 0),
            conn_health_checks=True,
        )
    }
    if env_bool("DB_POOL", False):
        # A psycopg connection pool per process, shared by its request threads: no connection
        # set-up per request (persistent connections would be one per request thread
        # instead, idle ones included: evalplatform/handler.py). For the web processes.
        if DATABASES["default"]["CONN_MAX_AGE"]:
            raise ImproperlyConfigured("DB_POOL=1 needs DB_CONN_MAX_AGE=0.")
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": env_int("DB_POOL_MIN", 2),
            "max_size": env_int("DB_POOL_MAX", 20),
            "timeout": env_int("DB_POOL_TIMEOUT_S", 10),
        }
    # The queries compiled once (evalplatform/prepared.py) are prepared on their connection,
    # so PostgreSQL need not parse and plan them on every run: worth it where connections
    # outlive a request. On by default with the pool; not with persistent connections alone,
    # which may go through PgBouncer (before 1.21, prepared statements break in its
    # transaction mode).
    DB_PREPARE = env_bool("DB_PREPARE", "pool" in DATABASES["default"].get("OPTIONS", {}))
else:
    DB_PREPARE = False
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "db.sqlite3"),
            "OPTIONS": {
                # WAL lets readers run beside one writer (web + worker processes); IMMEDIATE
                # takes the write lock at BEGIN so a read-then-write never fails half-way
                # with "database is locked"; the timeout makes writers wait instead.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": SQLITE_BUSY_TIMEOUT_S,
            },
            "TEST": {"NAME": str(DATA_DIR / "test.sqlite3")},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Queue and live events ------------------------------------------------------------------
Q_CLUSTER: dict = {
    "name": os.environ.get("Q_CLUSTER_NAME", "evalplatform"),
    "workers": env_int("Q_WORKERS", 2),
    "timeout": env_int("Q_TIMEOUT_S", 3600),
    "retry": env_int("Q_RETRY_S", 3700),
    "max_attempts": 1,
    "catch_up": False,
    "ack_failures": True,
    "save_limit": 1000,
    "label": "Task queue",
}
# Fair shares of the workers (``evalplatform.runs.fairshare``): one team's tasks (job runners,
# judge files, analyses) hold at most this many workers at once, its other tasks waiting in
# the team's own queue. By default every worker but one: however long one team's tasks take
# (a stalled provider), another team always finds a worker. 0: no limit.
TEAM_MAX_RUNNING_TASKS = env_int("TEAM_MAX_RUNNING_TASKS", max(1, Q_CLUSTER["workers"] - 1))
if TEAM_MAX_RUNNING_TASKS < 0:
    raise ImproperlyConfigured("TEAM_MAX_RUNNING_TASKS must be 0 (no limit) or more.")
# A running task renews its share this often (a third of it); a dead worker's share comes
# free after it.
TEAM_TASK_LEASE_S = max(env_int("TEAM_TASK_LEASE_S", 60), 1)
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # A page's socket buffers up to ``capacity`` events while its consumer is busy
            # (channels_redis drops what is over, 100 by default: under load a 2,000-cell
            # job's last event was lost in CI).
            # A socket's consumer waits for its next message with BZPOPMIN, 5 s at a time; the
            # reply to that wait must not meet the client's read timeout (redis-py's default
            # is also 5 s: a quiet socket's consumer died of the race and its socket dropped).
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "prefix": "evalplatform:",
                "capacity": 2000,
            },
        }
    }
else:
    Q_CLUSTER["orm"] = "default"
    Q_CLUSTER["poll"] = 0.5
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Auth, API ------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# The proxies whose X-Forwarded-For ``serve`` believes (addresses, comma-separated); none by
# default, so a client cannot name its own address (sign-in throttling counts by address).
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])

# ``serve``'s bounds on slow and heavy clients (``evalplatform.web.server``): the seconds a
# request's headers may take, the longest pause inside a body, open connections per client
# address, all open connections and requests (0: what the file descriptor limit leaves), and
# the seconds an idle keep-alive connection is kept.
SERVE_HEADER_TIMEOUT_S = env_int("SERVE_HEADER_TIMEOUT_S", 10)
SERVE_BODY_IDLE_TIMEOUT_S = env_int("SERVE_BODY_IDLE_TIMEOUT_S", 30)
SERVE_CONNECTIONS_PER_ADDRESS = env_int("SERVE_CONNECTIONS_PER_ADDRESS", 64)
SERVE_MAX_CONNECTIONS = env_int("SERVE_MAX_CONNECTIONS", 0)
SERVE_KEEP_ALIVE_S = env_int("SERVE_KEEP_ALIVE_S", 5)
# Live (WebSocket and Socket.IO) connections one user may hold open in one server process.
LIVE_SOCKETS_PER_USER = env_int("LIVE_SOCKETS_PER_USER", 20)

# Provider hosts an administrator lets connections call although they resolve to an internal
# address (loopback, private, link-local...): a local model server, the fake provider. Names
# as the connections' base URLs write them, comma-separated. evalplatform/providers/netguard.py.
PROVIDER_HOSTS_ALLOWED = env_list("PROVIDER_HOSTS_ALLOWED", [])

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "evalplatform.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # DRF's, refusing text the databases cannot store and JSON nested too deeply.
    "DEFAULT_PARSER_CLASSES": [
        "evalplatform.api.parsers.JSONParser",
        "evalplatform.api.parsers.FormParser",
        "evalplatform.api.parsers.MultiPartParser",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "evalplatform.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "evalplatform.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "evalplatform.api.exceptions.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_THROTTLE_CLASSES": [
        "evalplatform.throttling.WriteThrottle",
        "evalplatform.throttling.ExpensiveThrottle",
    ],
}
# Per user (their tokens and session together), per window: N/s, N/min, N/hour, N/day, or
# "off". Writes are every POST/PUT/PATCH/DELETE; expensive requests are uploads, exports,
# analytics, previews and estimates, job starts (evalplatform/throttling.py). Far above
# what a person or the load bench sends (50 evaluators, a submit every 0.5 s each: 240
# writes a minute per evaluator at most); a script in a loop meets them. docs/security.md.
API_THROTTLE_RATES = {
    "write": env_rate("API_THROTTLE_WRITE", "1200/min"),
    "expensive": env_rate("API_THROTTLE_EXPENSIVE", "120/min"),
}
# The counts live in the "throttle" cache, which every web process must share: Redis in
# scale mode, else a table of the database (made by migrate; ``createcachetable`` makes it
# if this changes). The default cache stays per process: nothing else relies on it.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": (
        {
            # Django's, with one pool and client per process (evalplatform/redis_pool.py).
            "BACKEND": "evalplatform.redis_pool.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "evalplatform:throttle",
        }
        if REDIS_URL
        else {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "evalplatform_throttle_cache",
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    ),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Evaluation platform API",
    "DESCRIPTION": "Generation, scenarios, evaluations, prompts and models.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- I18N, static ---------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Embedded mode serves static files straight from the apps; scale mode runs collectstatic.
WHITENOISE_USE_FINDERS = True

# --- Email (invitations) ------------------------------------------------------------------
# With EMAIL_HOST set, mail goes out over SMTP; without it (the embedded default) each message
# is written to a file under var/mail, and managers also see the invitation links on the page.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT_S", 20)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "evaluations@localhost")
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.filebased.EmailBackend"
)
EMAIL_FILE_PATH = DATA_DIR / "mail"

# --- Security -------------------------------------------------------------------------------
# HTTPS=1 is the production switch (see docs/deploy.md): secure cookies, redirect to HTTPS,
# HSTS. Each part can also be set on its own. The embedded default serves plain HTTP on
# loopback, so all of it is off there.
HTTPS = env_bool("HTTPS", False)
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", HTTPS)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", False)
if not SECURE_HSTS_PRELOAD:
    # Asking browsers to preload the domain is the domain owner's decision, not a default.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    # Only behind a proxy that sets this header itself (and strips the client's).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Content-Security-Policy (django-csp) on every response: scripts only from this server
# (no inline scripts or handlers anywhere, no eval), nothing may frame the pages, forms post
# only here. Styles allow inline because plotly.js injects its own <style> and the admin
# and Swagger UI use style attributes; script injection is what the policy is for.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        # 'self' covers the WebSockets to this host (CSP Level 3).
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# --- Platform limits ------------------------------------------------------------------------
# An uploaded file (job items, scenario rows, judgment imports). Django keeps a file part over
# FILE_UPLOAD_MAX_MEMORY_SIZE (its default, 2.5 MiB) in a temporary file, and the parsers read
# it as a stream, so a large upload costs disk, not memory.
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 200 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
# A request body without a file (JSON, form fields): these are read into memory whole.
BODY_MAX_BYTES = env_int("BODY_MAX_BYTES", 50 * 1024 * 1024)
# A scenario's design may make at most this many tasks (larger designs are refused before
# anything is built; sample the pairs instead).
SCENARIO_MAX_TASKS = env_int("SCENARIO_MAX_TASKS", 100_000)
# A scenario's upload may hold at most this many rows (variants): refused while it is read,
# so memory never holds more whatever the file's size.
SCENARIO_MAX_VARIANTS = env_int("SCENARIO_MAX_VARIANTS", 200_000)
# Most rows one import of judgments may hold (refused while read, past it): the import is
# written in one transaction (all rows or none), so its size bounds how long that holds.
JUDGMENT_IMPORT_MAX_ROWS = env_int("JUDGMENT_IMPORT_MAX_ROWS", 50_000)
# A job's cells are written in one transaction when it is created (about 10 s for 50,000 on
# SQLite here); the cap keeps that under the SQLite busy timeout.
GENERATION_MAX_CELLS = env_int("GENERATION_MAX_CELLS", 50_000)
# Judge files (the OpenAI Files + Batches API): the upload, its lines, one line.
JUDGE_FILE_MAX_BYTES = env_int("JUDGE_FILE_MAX_BYTES", 200 * 1024 * 1024)
JUDGE_FILE_MAX_LINES = env_int("JUDGE_FILE_MAX_LINES", 50_000)
JUDGE_FILE_MAX_LINE_BYTES = env_int("JUDGE_FILE_MAX_LINE_BYTES", 4 * 1024 * 1024)
# A runner renews its lease on a job every step; a job whose lease ran out is recovered.
GENERATION_LEASE_S = env_int("GENERATION_LEASE_S", 60)
# A live runner looks at its job's state (and renews the lease) this often between steps:
# pause and cancel abort the calls in flight within it.
GENERATION_CONTROL_S = env_float("GENERATION_CONTROL_S", 2.0)
# A job fails when this many cells of one model configuration fail in a row (0: never).
GENERATION_FAIL_AFTER = env_int("GENERATION_FAIL_AFTER", 5)
# Provider replies are capped client-side: a body (or a stream) beyond this many bytes, or
# more characters than this many per requested max token, is cut off as an error.
PROVIDER_MAX_REPLY_BYTES = env_int("PROVIDER_MAX_REPLY_BYTES", 16 * 1024 * 1024)
PROVIDER_MAX_CHARS_PER_TOKEN = env_int("PROVIDER_MAX_CHARS_PER_TOKEN", 32)
# Batch mode: at most this many cells in one provider batch (providers allow 50,000+; smaller
# batches come back sooner and a failure costs less).
GENERATION_BATCH_MAX_CELLS = env_int("GENERATION_BATCH_MAX_CELLS", 10_000)
# Live runs stream replies and publish events (item tokens, progress) to WebSocket clients.
GENERATION_LIVE_EVENTS = env_bool("GENERATION_LIVE_EVENTS", True)

# --- Live events ----------------------------------------------------------------------------
# "channel_layer" (with Redis: workers send to channels-redis) or "database" (the embedded
# default: workers append to an outbox table that each web process relays).
LIVE_TRANSPORT = os.environ.get("LIVE_TRANSPORT") or ("channel_layer" if REDIS_URL else "database")
if LIVE_TRANSPORT not in ("channel_layer", "database"):
    raise ImproperlyConfigured("LIVE_TRANSPORT must be 'channel_layer' or 'database'.")
if LIVE_TRANSPORT == "channel_layer" and not REDIS_URL:
    raise ImproperlyConfigured(
        "LIVE_TRANSPORT=channel_layer needs REDIS_URL: without Redis, web and worker processes "
        "share no channel layer."
    )
# At most this many messages a second per job reach its watchers.
LIVE_MAX_MESSAGES_PER_S = env_int("LIVE_MAX_MESSAGES_PER_S", 10)
# Every open live connection re-checks its token or session and its user's right to what it
# watches this often (and at once when a change is announced), closing when they are gone.
# Not below half a second: every open connection queries the database at each re-check.
LIVE_RECHECK_S = max(env_float("LIVE_RECHECK_S", 5.0), 0.5)

# Request bodies other than file parts (JSON, form fields) are capped at BODY_MAX_BYTES. The
# servers answer 413 before reading further (evalplatform/limits.py) to a body over
# REQUEST_MAX_BYTES, or, for a multipart body (a file upload), over UPLOAD_MAX_BYTES plus 1 MiB
# (the form fields beside the file).
DATA_UPLOAD_MAX_MEMORY_SIZE = BODY_MAX_BYTES
REQUEST_MAX_BYTES = BODY_MAX_BYTES + 1024 * 1024

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}

if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must not be empty when DEBUG=0.")
