"""Django settings for the gangway control plane, read from the environment only.

Development needs no configuration at all: with nothing set, the app runs with
``DEBUG`` on, an SQLite database under ``var/`` and an embedded SQLite broker, so
``make run`` works on a fresh machine. Production sets ``DEBUG=0``, a
``SECRET_KEY`` (or ``SECRET_KEY_FILE``), ``ALLOWED_HOSTS`` and real URLs; every
hardening setting then defaults to on, so ``manage.py check --deploy`` is clean.
See ``.env.example`` for every variable.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_float, env_int, env_list, env_str
from controlplane.rayorigin import ORIGIN as RAY_ORIGIN_FORM

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("GANGWAY_VAR_DIR", str(BASE_DIR / "var")))
# The SQLite files (database and embedded broker) and collected static files live here.
(VAR_DIR / "static").mkdir(parents=True, exist_ok=True)

PROJECT_NAME = "gangway"

DEBUG = env_bool("DEBUG", True)

_DEV_SECRET = "dev-insecure-secret-key-do-not-use-in-production-0123456789abcdef"
SECRET_KEY = env_str("SECRET_KEY", _DEV_SECRET if DEBUG else None)
if not DEBUG and SECRET_KEY == _DEV_SECRET:
    raise ImproperlyConfigured("SECRET_KEY must be set to a secret value when DEBUG is off")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # django.contrib.admin with a read-only default site: writes go through the services.
    "controlplane.admin_site.GangwayAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "controlplane",
    "tenants",
    "clusters",
    "notifications",
    "frontend",
]

MIDDLEWARE = [
    "controlplane.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # The Ray dashboards' own origin (RAY_PROXY_ORIGIN) is answered here, before any of
    # the product's sessions, cookies or pages (clusters/live/ray_origin.py).
    "clusters.live.ray_origin.RayOriginMiddleware",
    # Before WhiteNoise, so that static files carry the policies too.
    "csp.middleware.CSPMiddleware",
    "django_permissions_policy.PermissionsPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Around CSRF and authentication: it reads what they answered a signed-out htmx request.
    "frontend.middleware.HtmxSignInMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Asks the identity provider again, now and then, about a single sign-on session
    # (after the messages middleware: an ended session says so on the sign-in page).
    "tenants.sso.middleware.SsoSessionMiddleware",
    # A session signed in with an admin's temporary password goes to the change page.
    "frontend.views.account.PasswordChangeRequiredMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"
ASGI_APPLICATION = "controlplane.asgi.application"

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
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gangway.sqlite3'}")
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite serves the zero-configuration `make run`; WAL and a busy timeout let the
    # web server, the worker and beat share one file without "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": env_str(
            "STATICFILES_STORAGE",
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage",
        )
    },
}

# Bodies larger than this are refused before parsing (a 400 with a clear message).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 256 * 1024, minimum=1024)

# --- Security -------------------------------------------------------------------------
# Every hardening switch defaults to on in production and off in development.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Content-Security-Policy on every response: scripts, styles, fonts and requests only
# from this origin, never inline (the dashboard's JavaScript and CSS are static files,
# htmx is vendored, the Swagger UI comes from the sidecar package), no plugins, no
# framing, forms post only here. Swagger UI's stylesheet draws its icons as data: images.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Browser features no page of the control plane uses are denied to it and to anything it
# could embed; the copy buttons keep the clipboard (write only).
PERMISSIONS_POLICY: dict[str, list[str]] = {
    "accelerometer": [],
    "autoplay": [],
    "camera": [],
    "clipboard-read": [],
    "clipboard-write": ["self"],
    "display-capture": [],
    "encrypted-media": [],
    "geolocation": [],
    "gyroscope": [],
    "hid": [],
    "idle-detection": [],
    "magnetometer": [],
    "microphone": [],
    "midi": [],
    "payment": [],
    "picture-in-picture": [],
    "publickey-credentials-get": [],
    "screen-wake-lock": [],
    "serial": [],
    "usb": [],
    "xr-spatial-tracking": [],
}
# Database sessions that ignore a malformed session cookie (controlplane/sessions.py).
SESSION_ENGINE = "controlplane.sessions"
if env_bool("USE_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# /healthz, /readyz and /metrics are probed over plain HTTP inside the cluster.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]

# --- Clients, sign-in lockout and the cache ---------------------------------------------
# The reverse proxies we run in front of the app, each appending the address it saw to
# X-Forwarded-For (controlplane/addresses.py). 0: the header is ignored, REMOTE_ADDR is
# the client. Set it only if every request reaches the app through exactly that many.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)

# Every password check (API token, /login/, /admin/login/, any authenticate() call) goes
# through this backend, which refuses it while the username or the client's address is
# locked out (tenants/lockout.py).
AUTHENTICATION_BACKENDS = [
    "tenants.backends.LockoutModelBackend",
    # Only restores sessions that single sign-on began; it checks no passwords.
    "tenants.sso.backends.SsoBackend",
]
LOGIN_MAX_FAILURES_PER_USER = env_int("LOGIN_MAX_FAILURES_PER_USER", 10, minimum=1)
LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("LOGIN_MAX_FAILURES_PER_ADDRESS", 30, minimum=1)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", 900, minimum=1)

# --- Single sign-on (OpenID Connect; tenants/sso/, docs/sso.md) ---------------------------
# Off unless OIDC_ISSUER is set. Local accounts and API tokens keep working beside it.
OIDC_ISSUER = env_str("OIDC_ISSUER", "", allow_empty=True).rstrip("/")
SSO_ENABLED = bool(OIDC_ISSUER)
# The dashboard's client: confidential, authorization code with PKCE (S256).
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "", allow_empty=True)
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "", allow_empty=True)
# The command line's client: public, device authorization grant. Empty: no device flow.
OIDC_CLI_CLIENT_ID = env_str("OIDC_CLI_CLIENT_ID", "", allow_empty=True)
# What the API accepts in a bearer token's `aud` (comma-separated); the dashboard's
# client id when unset.
OIDC_AUDIENCE = [
    part.strip()
    for part in env_str("OIDC_AUDIENCE", OIDC_CLIENT_ID, allow_empty=True).split(",")
    if part.strip()
]
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid profile email groups")
OIDC_CLI_SCOPES = env_str("OIDC_CLI_SCOPES", "openid profile email groups offline_access")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# Group-to-role rules, e.g. "gpu-{tenant}-admins=admin gpu-{tenant}-users=engineer
# research=vision:viewer" (tenants/sso/rules.py), and the groups of platform admins.
OIDC_ROLE_RULES = env_str("OIDC_ROLE_RULES", "", allow_empty=True)
OIDC_PLATFORM_ADMIN_GROUPS = [
    group
    for group in env_str("OIDC_PLATFORM_ADMIN_GROUPS", "", allow_empty=True)
    .replace(",", " ")
    .split()
]
# Only asymmetric algorithms: a token signed with a shared secret, or with none, is refused.
OIDC_ALGORITHMS = [
    alg.strip() for alg in env_str("OIDC_ALGORITHMS", "RS256,ES256,PS256").split(",") if alg
]
if SSO_ENABLED:
    if not (OIDC_CLIENT_ID and OIDC_CLIENT_SECRET):
        raise ImproperlyConfigured("OIDC_ISSUER is set: set OIDC_CLIENT_ID and OIDC_CLIENT_SECRET")
    if not OIDC_ISSUER.startswith(("https://", "http://")):
        raise ImproperlyConfigured("OIDC_ISSUER must be an https:// URL (http:// for tests)")
    _weak = [alg for alg in OIDC_ALGORITHMS if not alg.startswith(("RS", "ES", "PS", "EdDSA"))]
    if _weak:
        raise ImproperlyConfigured(
            f"OIDC_ALGORITHMS may name only asymmetric algorithms, not {', '.join(_weak)}"
        )
OIDC_CLOCK_SKEW_SECONDS = env_int("OIDC_CLOCK_SKEW_SECONDS", 60, minimum=0)
OIDC_JWKS_CACHE_SECONDS = env_int("OIDC_JWKS_CACHE_SECONDS", 300, minimum=1)
# A token naming a key not in the cached set fetches the set again, at most this often.
OIDC_JWKS_MIN_REFRESH_SECONDS = env_int("OIDC_JWKS_MIN_REFRESH_SECONDS", 5, minimum=0)
# A bearer token's groups are applied at most this often per user (the cache is short so
# that a change at the provider takes effect at once, and writes stay rare).
OIDC_SYNC_CACHE_SECONDS = env_int("OIDC_SYNC_CACHE_SECONDS", 30, minimum=0)
# A dashboard session asks the provider again (refresh, userinfo) at most this often;
# off-boarding at the provider ends the session at the next request after that.
OIDC_SESSION_CHECK_SECONDS = env_int("OIDC_SESSION_CHECK_SECONDS", 120, minimum=0)
OIDC_TIMEOUT_SECONDS = env_int("OIDC_TIMEOUT_SECONDS", 5, minimum=1)
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
# The password form stays on /login/ beside the single sign-on button unless this is off.
OIDC_LOCAL_LOGIN = env_bool("OIDC_LOCAL_LOGIN", True)
# A provider username that a local account already has: off, the SSO user gets a
# suffixed username; on, the local account is taken over (trust the provider first).
OIDC_LINK_EXISTING_USERS = env_bool("OIDC_LINK_EXISTING_USERS", False)
# Where the provider sends the browser back; derived from the request when unset.
OIDC_REDIRECT_URI = env_str("OIDC_REDIRECT_URI", "", allow_empty=True)
if SSO_ENABLED:
    # Signing out posts to /logout/, which redirects to the provider's end-session
    # endpoint: the browser checks that redirect against form-action.
    _issuer_origin = "/".join(OIDC_ISSUER.split("/")[:3])
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"] = [SELF, _issuer_origin]

# Throttle and lockout counters live in the cache. Without CACHE_URL it is the memory of
# one process, enough for `make run`; several gunicorn workers or pods must share a Redis,
# or each would keep its own count (`check --deploy` warns).
CACHE_URL = env_str("CACHE_URL", "", allow_empty=True)
if CACHE_URL:
    if not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
        # The URL may hold a password: name only its scheme.
        raise ImproperlyConfigured(
            f"CACHE_URL must be a redis://, rediss:// or unix:// URL, "
            f"not {CACHE_URL.split(':', 1)[0]!r}"
        )
    CACHES = {
        "default": {
            "BACKEND": "controlplane.cache.RedisCache",
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": PROJECT_NAME,
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": PROJECT_NAME,
        }
    }

# /metrics names every tenant and the GPUs it holds. With a token, a scrape must send
# "Authorization: Bearer <token>"; without one, /metrics is open in development only and
# refused (403, saying what to set) when DEBUG is off.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters long")

# --- REST framework -------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.api.authentication.TokenAuthentication",
        # "Authorization: Bearer <JWT>" from the identity provider, when SSO is on.
        "tenants.sso.authentication.BearerAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON only, with bounded nesting and numbers (controlplane/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": ["controlplane.api.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "controlplane.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "controlplane.api.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "controlplane.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    # An unknown ?format= is a 406 naming the formats offered (not DRF's bare 404).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "controlplane.api.negotiation.ContentNegotiation",
    # OPTIONS names the methods the caller may use, and refuses whom every method refuses.
    "DEFAULT_METADATA_CLASS": "controlplane.api.metadata.Metadata",
    "DEFAULT_THROTTLE_RATES": {
        "auth": env_str("THROTTLE_AUTH", "20/min"),
        "write": env_str("THROTTLE_WRITE", "600/min"),
    },
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Our throttles read the address through controlplane.addresses; this keeps any
    # stock DRF throttle from trusting the raw header (its default is None).
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
}

REST_KNOX = {
    "TOKEN_TTL": timedelta(hours=env_int("API_TOKEN_TTL_HOURS", 24 * 30, minimum=1)),
    "AUTH_HEADER_PREFIX": "Token",
    "AUTO_REFRESH": False,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "gangway API",
    "DESCRIPTION": "Multi-tenant control plane for GPU Ray clusters on Kubernetes.",
    "VERSION": "1.0.0",
    # 3.1: a nullable reference is ``oneOf: [$ref, {type: null}]``; 3.0's
    # ``allOf: [$ref], nullable: true`` reads as never null to strict validators.
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "controlplane.api.schema.null_as_a_type",
    ],
    # The notification kinds are one choice set wherever they appear.
    "ENUM_NAME_OVERRIDES": {
        "NotificationKindEnum": "notifications.kinds.EventKind",
        "ClusterKindEnum": "clusters.models.ClusterKind",
    },
}

# --- Celery ---------------------------------------------------------------------------
# The database row is the desired state; a message is only a nudge. These settings make
# sure a nudge is not lost when a worker dies mid-task (acks_late + reject on loss), that
# a worker holds one message at a time, and that Redis does not hand a message to a second
# worker while the first is still within its time limit (visibility timeout > time limit).
# The default is the embedded broker of `make run` (controlplane/embedded_broker.py): an
# SQLite file under var/, written and read in transactions. Production sets redis://.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqlite:///{VAR_DIR / 'broker.sqlite3'}")
if CELERY_BROKER_URL.startswith("filesystem:"):
    raise ImproperlyConfigured(
        "CELERY_BROKER_URL=filesystem:// is not supported: Kombu's filesystem transport can "
        "hand a worker a half-written message. Leave CELERY_BROKER_URL unset for the embedded "
        "SQLite broker, or use redis://."
    )
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = max(CELERY_TASK_TIME_LIMIT - 30, 5)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "gangway")
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fix-up closes the database connection before and after every task
# unless this is set; it then closes it only every this many tasks. A worker process
# runs hundreds of short tasks a second in a burst, and a new connection each time
# (PostgreSQL starts a backend for each) cost more than many of the tasks.
# controlplane/celery.py gives each task what Django gives each request instead: a
# connection past CONN_MAX_AGE or one that failed is closed, and a kept one is
# health-checked before its first query.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": CELERY_TASK_TIME_LIMIT * 4,
}
if CELERY_BROKER_URL.startswith("sqlite:"):
    CELERY_BROKER_TRANSPORT = "controlplane.embedded_broker:Transport"
    # An idle worker polls the file (a plain read) this often: the delay a nudge may wait.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"polling_interval": 0.1}
    # Broadcasts (remote control) need a transport with fanout across processes, which
    # this one lacks; nothing in gangway uses them.
    CELERY_WORKER_ENABLE_REMOTE_CONTROL = False
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A page of a tenant's cluster list is served again from the cache while nothing it shows
# has changed (clusters/api/listcache.py), for at most this long; 0 renders every list.
CLUSTER_LIST_CACHE_SECONDS = env_int("CLUSTER_LIST_CACHE_SECONDS", 60, minimum=0)
# On a queue large enough that reading it for a dry-run takes a while (15,000 waiting
# requests: a second), a verdict answers from the last reading, at most this old, while
# the next is read in the background (clusters/queue/dry_run_cache.py); 0 always waits.
DRY_RUN_STALE_SECONDS = env_float("DRY_RUN_STALE_SECONDS", 10.0)
RECONCILE_INTERVAL_SECONDS = env_float("RECONCILE_INTERVAL_SECONDS", 5.0)
SWEEP_INTERVAL_SECONDS = env_float("SWEEP_INTERVAL_SECONDS", 30.0)
# A provisioned cluster asks for a reconcile pass this much later, so that the clusters
# provisioned meanwhile share that pass (passes are coalesced: one pending at a time);
# the last batch of a burst, with nothing more on its way, asks at once (clusters.tasks).
RECONCILE_NUDGE_DELAY_SECONDS = env_float("RECONCILE_NUDGE_DELAY_SECONDS", 0.5)
# A coalesced pass asked for sooner than this after the last one started waits until
# then (clusters.rows.enqueue): under a stream of nudges each pass takes a larger batch, and
# a pass's fixed cost (its snapshot of the whole fleet) is paid a bounded number of times
# per second. A nudge on a quiet system starts a pass at once. Measured in
# docs/benchmarks.md (end to end): back-to-back admission passes spent more CPU than
# the requests they admitted.
ADMISSION_PASS_INTERVAL_SECONDS = env_float("ADMISSION_PASS_INTERVAL_SECONDS", 0.5)
RECONCILE_PASS_INTERVAL_SECONDS = env_float("RECONCILE_PASS_INTERVAL_SECONDS", 0.0)
# The same for the provision pass over rows marked for a step (deletions, suspensions,
# jobs' RayJobs): a burst of 1,000 deletes ran 423 passes of 2.4 rows each without it.
PROVISION_PASS_INTERVAL_SECONDS = env_float("PROVISION_PASS_INTERVAL_SECONDS", 0.2)
# A reconcile pass folds only the rows whose row or objects changed since a fold that
# changed nothing (clusters.engine.foldmemo); this often it folds every row again, as an
# informer resyncs.
RECONCILE_FULL_PASS_SECONDS = env_float("RECONCILE_FULL_PASS_SECONDS", 300.0)
# Reconcile passes read informers' caches (a LIST, then a WATCH, per kind; kept by the
# worker process: clusters.engine.informers) instead of listing every kind each time.
# A pass waits at most RECONCILE_WATCH_WAIT_SECONDS for the caches to reach the API
# server's version as of its start; a watch open this long is taken to have delivered
# every write older than RECONCILE_WATCH_GRACE_SECONDS; changes ask for a pass at most
# RECONCILE_WATCH_NUDGE_SECONDS apart (0: only beat's and the engine's nudges).
RECONCILE_WATCH = env_bool("RECONCILE_WATCH", True)
RECONCILE_WATCH_WAIT_SECONDS = env_float("RECONCILE_WATCH_WAIT_SECONDS", 0.1)
RECONCILE_WATCH_GRACE_SECONDS = env_float("RECONCILE_WATCH_GRACE_SECONDS", 2.0)
RECONCILE_WATCH_NUDGE_SECONDS = env_float("RECONCILE_WATCH_NUDGE_SECONDS", 0.5)
# A request passed over by smaller ones for this long starts holding its pool (bounded
# wait); a borrower's cluster chosen for reclaim is warned this long before suspension.
ADMISSION_AGING_SECONDS = env_float("ADMISSION_AGING_SECONDS", 3600.0)
RECLAIM_GRACE_SECONDS = env_float("RECLAIM_GRACE_SECONDS", 900.0)
# A running cluster this close to its expiry gets a warning event (once per extension).
EXPIRY_WARNING_MINUTES = env_int("EXPIRY_WARNING_MINUTES", 30, minimum=0)
# A row waiting on a provisioning step with no progress for this long is re-nudged.
SWEEP_STALE_SECONDS = env_float("SWEEP_STALE_SECONDS", 30.0)
# Idle reclaim (docs/idle.md): how often each ready cluster's activity is read from Ray,
# and how long after the idle warning an idle cluster is suspended. The idle threshold
# itself is the tenant's policy (``Tenant.idle_suspend_minutes``).
ACTIVITY_CHECK_SECONDS = env_float("ACTIVITY_CHECK_SECONDS", 60.0)
IDLE_GRACE_MINUTES = env_float("IDLE_GRACE_MINUTES", 15.0)
# Monthly GPU-hour budgets (Tenant.monthly_gpu_hour_budget): at 100% of its budget a
# tenant's pages say so, and with "deprioritise" its new dev requests also queue at the
# lowest priority (CLUSTER_PRIORITY_MIN) until the month turns; "warn" only warns.
BUDGET_POLICY = env_str("BUDGET_POLICY", "warn")
if BUDGET_POLICY not in ("warn", "deprioritise"):
    raise ImproperlyConfigured(
        f"BUDGET_POLICY must be 'warn' or 'deprioritise', not {BUDGET_POLICY!r}."
    )
# The range of a request's priority, which tenant admins set (higher goes first).
CLUSTER_PRIORITY_MIN = -100
CLUSTER_PRIORITY_MAX = 100

# --- Kubernetes -----------------------------------------------------------------------
# KUBECONFIG set but empty means in-cluster credentials (the service account of the pod);
# unset means the file kubesim writes for development.
KUBECONFIG = env_str("KUBECONFIG", str(VAR_DIR / "kubeconfig"), allow_empty=True)
KUBE_REQUEST_TIMEOUT_SECONDS = env_float("KUBE_REQUEST_TIMEOUT_SECONDS", 10.0)
# The namespace the control plane itself runs in; tenants' NetworkPolicies let it reach
# the Ray dashboard and client ports.
CONTROL_PLANE_NAMESPACE = env_str("CONTROL_PLANE_NAMESPACE", "gangway-system")
TENANT_NAMESPACE_PREFIX = env_str("TENANT_NAMESPACE_PREFIX", "gw-")
# A tenant's namespace is this prefix plus its slug (at most 40 characters): the prefix
# keeps tenants' namespaces apart from everybody else's and within 63 characters.
if not re.fullmatch(r"[a-z][-a-z0-9]{0,22}", TENANT_NAMESPACE_PREFIX) or (
    TENANT_NAMESPACE_PREFIX.startswith("kube-")
):
    raise ImproperlyConfigured(
        f"TENANT_NAMESPACE_PREFIX={TENANT_NAMESPACE_PREFIX!r} must be 1-23 lowercase letters, "
        "digits and hyphens starting with a letter, and not start with 'kube-'"
    )
# The Ray dashboard proxy (docs/access.md): the largest body it forwards (a working
# directory uploaded by Ray's Jobs SDK, say) and how long it waits for the dashboard.
RAY_PROXY_MAX_BODY_MB = env_int("RAY_PROXY_MAX_BODY_MB", 100, minimum=1)
RAY_PROXY_READ_TIMEOUT_SECONDS = env_float("RAY_PROXY_READ_TIMEOUT_SECONDS", 120.0)
# The Ray dashboards' own origin, never the product's (docs/access.md, "An origin of its
# own"): scheme://host[:port], or scheme://{cluster}.suffix[:port] for one per cluster.
# Unset, the dashboard is relayed on the product's origin in a CSP sandbox.
RAY_PROXY_ORIGIN = env_str("RAY_PROXY_ORIGIN", "", allow_empty=True).strip().rstrip("/")
_ray_origin = RAY_ORIGIN_FORM.fullmatch(RAY_PROXY_ORIGIN.lower())
if RAY_PROXY_ORIGIN and _ray_origin is None:
    raise ImproperlyConfigured(
        f"RAY_PROXY_ORIGIN={RAY_PROXY_ORIGIN!r} must be scheme://host[:port] or "
        "scheme://{cluster}.domain[:port] (http or https, no path)"
    )
if _ray_origin is not None and "*" not in ALLOWED_HOSTS:
    ALLOWED_HOSTS = [*ALLOWED_HOSTS, ("." if _ray_origin["wild"] else "") + _ray_origin["host"]]
# How long a link from the product to a dashboard works (once), and how long the
# dashboard's own cookie then lasts.
RAY_PROXY_GRANT_SECONDS = env_int("RAY_PROXY_GRANT_SECONDS", 120, minimum=5)
RAY_PROXY_SESSION_MINUTES = env_int("RAY_PROXY_SESSION_MINUTES", 60, minimum=1)
# Where the API server's service-proxy traffic comes from, for clusters that enforce
# NetworkPolicy: the tenants' policies admit these CIDRs to the Ray dashboard port.
APISERVER_SOURCE_CIDRS = env_list("APISERVER_SOURCE_CIDRS", [])
RAY_IMAGE_DEFAULT = env_str("RAY_IMAGE_DEFAULT", "rayproject/ray:2.49.2-py311-gpu")
RAY_IMAGE_ALLOWLIST = env_list("RAY_IMAGE_ALLOWLIST", [RAY_IMAGE_DEFAULT])
# The Localhost seccomp profile (relative to the kubelet's seccomp directory) that lets
# rootless podman run in a GPU worker: empty turns the container_gpus opt-in off
# (docs/containers.md says what the profile must allow).
CONTAINER_GPUS_SECCOMP_PROFILE = env_str("CONTAINER_GPUS_SECCOMP_PROFILE", "", allow_empty=True)
QUEUE_MODE = env_str("QUEUE_MODE", "builtin")  # "builtin" or "kueue"
if QUEUE_MODE not in {"builtin", "kueue"}:
    raise ImproperlyConfigured(f"QUEUE_MODE={QUEUE_MODE!r} must be 'builtin' or 'kueue'")
KAI_ENABLED = env_bool("KAI_ENABLED", False)

# --- Notifications and email --------------------------------------------------------
# Links in notices point here (the dashboard's address as users reach it).
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://localhost:8000").rstrip("/")
# The dispatcher turns new ClusterEvents into deliveries this often (and when a notable
# event commits); the sweeper re-sends deliveries whose message was lost this often.
NOTIFY_DISPATCH_INTERVAL_SECONDS = env_float("NOTIFY_DISPATCH_INTERVAL_SECONDS", 5.0)
NOTIFY_SWEEP_INTERVAL_SECONDS = env_float("NOTIFY_SWEEP_INTERVAL_SECONDS", 30.0)
# A delivery due this long ago and not claimed by a worker is sent again by the sweeper.
NOTIFY_STALE_SECONDS = env_float("NOTIFY_STALE_SECONDS", 60.0)
# Attempts per delivery, and the exponential backoff between them (full jitter).
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 8, minimum=1)
NOTIFY_BACKOFF_BASE_SECONDS = env_float("NOTIFY_BACKOFF_BASE_SECONDS", 10.0)
NOTIFY_BACKOFF_CAP_SECONDS = env_float("NOTIFY_BACKOFF_CAP_SECONDS", 3600.0)
NOTIFY_WEBHOOK_TIMEOUT_SECONDS = env_float("NOTIFY_WEBHOOK_TIMEOUT_SECONDS", 10.0)
# The cursor over ClusterEvents moves only past events this old: a transaction still
# open after it could otherwise commit an event behind the cursor. Longer than any task.
NOTIFY_OUTBOX_HORIZON_SECONDS = env_float(
    "NOTIFY_OUTBOX_HORIZON_SECONDS", max(900.0, CELERY_TASK_TIME_LIMIT * 2.0)
)
# Events older than this when first read are not told (a dispatcher down for a day, or
# the first pass over an existing database, does not send yesterday's news).
NOTIFY_MAX_EVENT_AGE_SECONDS = env_float("NOTIFY_MAX_EVENT_AGE_SECONDS", 86400.0)
# Webhooks to loopback, private, link-local or other non-public addresses (IPv4 inside
# IPv6 forms included) are refused unless this is on (on by default with DEBUG, where
# receivers run on loopback), or the URL's host is named in the next setting.
NOTIFY_ALLOW_PRIVATE_WEBHOOKS = env_bool("NOTIFY_ALLOW_PRIVATE_WEBHOOKS", DEBUG)
# Hosts (comma-separated `host` or `host:port`, e.g. "127.0.0.1:8125,receiver.internal")
# webhooks may reach although they resolve to non-public addresses. Empty by default;
# make run names its own demo receiver here.
NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS = env_str(
    "NOTIFY_WEBHOOK_ALLOWED_PRIVATE_HOSTS", "", allow_empty=True
)
# A directory a local mail sink writes each mail it receives to, as one .eml file
# (make run starts one, under var/mail/). When set, the dashboard lists those mails on
# its Mail page; empty (the default, and production) hides the page.
MAIL_SINK_DIR = env_str("MAIL_SINK_DIR", "", allow_empty=True)

# Email goes through Django's backend: the console with DEBUG, SMTP otherwise (make run
# points it at its own mail sink). EMAIL_HOST_PASSWORD may come from EMAIL_HOST_PASSWORD_FILE.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "", allow_empty=True)
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "", allow_empty=True)
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive; set one")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gangway <gangway@localhost>")

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # urllib3 logs each request's path at DEBUG; a webhook URL's path may hold its
        # token (Slack-style URLs), so it never logs below INFO, whatever LOG_LEVEL says.
        "urllib3": {"level": "INFO"},
    },
}

# Periodic work: the reconciler, the outbox sweeper and a safety-net admission pass
# (every write also nudges these, so the beat is only the backstop).
CELERY_BEAT_SCHEDULE = {
    "reconcile": {"task": "clusters.tasks.reconcile", "schedule": RECONCILE_INTERVAL_SECONDS},
    "sweep": {"task": "clusters.tasks.sweep", "schedule": SWEEP_INTERVAL_SECONDS},
    "admission": {"task": "clusters.tasks.admission_pass", "schedule": 15.0},
    "activity": {"task": "clusters.tasks.check_activity", "schedule": ACTIVITY_CHECK_SECONDS},
    "notify-dispatch": {
        "task": "notifications.tasks.dispatch",
        "schedule": NOTIFY_DISPATCH_INTERVAL_SECONDS,
    },
    "notify-sweep": {
        "task": "notifications.tasks.sweep",
        "schedule": NOTIFY_SWEEP_INTERVAL_SECONDS,
    },
    "purge-expired-tokens": {"task": "tenants.tasks.purge_expired_tokens", "schedule": 3600.0},
}
