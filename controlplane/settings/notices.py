"""Notifications (the dispatcher, deliveries, webhooks) and email."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from controlplane.env import env_bool, env_float, env_int, env_str
from controlplane.settings.core import DEBUG
from controlplane.settings.workers import CELERY_TASK_TIME_LIMIT

# Links in notices point here (the dashboard's address as users reach it).
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://localhost:8000").rstrip("/")
# The control plane's address as Ray pods reach it: their GANGWAY_PREEMPTION_URL (the
# preemption notice endpoint, docs/preemption.md) starts with it. Pods often reach the
# control plane by an in-cluster service name rather than the public address.
PREEMPTION_BASE_URL = env_str("PREEMPTION_BASE_URL", PUBLIC_BASE_URL).rstrip("/")
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
