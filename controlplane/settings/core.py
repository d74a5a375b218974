"""The Django project itself: paths, debug and secret key, apps, middleware, templates,
the database, passwords, static files and logging."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
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
    # Outermost: the latency it measures is the whole of Django's.
    "controlplane.request_metrics.RequestMetricsMiddleware",
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
