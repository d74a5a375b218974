"""Hardening, browser policies, the client address rule, the sign-in lockout, the cache
that counts throttles and lockouts, and who may scrape /metrics."""

from __future__ import annotations

from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_int, env_str
from controlplane.settings.core import DEBUG, PROJECT_NAME

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
# Web request latency per route (gangway_http_request_seconds, docs/metrics.md); off only
# to measure what it costs (docs/benchmarks.md).
REQUEST_METRICS = env_bool("REQUEST_METRICS", True)
# A Celery worker's own /metrics port (its event series: controlplane/worker_metrics.py);
# 0: none, its series are read through a web server sharing PROMETHEUS_MULTIPROC_DIR.
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0, minimum=0)
