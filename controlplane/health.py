"""Liveness, readiness and Prometheus metrics endpoints.

``/healthz`` answers as long as the process serves requests. ``/readyz`` checks what the
control plane needs to do useful work — the database, the Celery broker and the
Kubernetes API — and says which one failed. ``/metrics`` exposes Prometheus metrics to
a scraper that presents ``METRICS_TOKEN`` as a bearer token (README, "Metrics").
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from controlplane import metrics
from controlplane.api.errors import error_body
from controlplane.celery import app as celery_app

CHECKS: dict[str, Callable[[], None]] = {}


def register_check(name: str, check: Callable[[], None]) -> None:
    """Add (or replace) the readiness check ``name``: ``check`` raises when it fails."""
    # Apps register theirs in AppConfig.ready(), so this module imports none of them.
    CHECKS[name] = check


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_broker() -> None:
    # The URL is read from settings at each check (not cached by the app), so that the
    # check reflects the configuration the process runs with.
    with celery_app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


register_check("database", _check_database)
register_check("broker", _check_broker)


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness: the process is up."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    """Readiness: 200 when every dependency answers, 503 naming the ones that do not."""
    results: dict[str, dict[str, object]] = {}
    healthy = True
    for name, check in CHECKS.items():
        started = time.monotonic()
        try:
            check()
            results[name] = {"ok": True}
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
            healthy = False
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        results[name]["ms"] = round((time.monotonic() - started) * 1000, 1)
    return JsonResponse(
        {"status": "ok" if healthy else "unavailable", "checks": results},
        status=200 if healthy else 503,
    )


def _metrics_refusal(request: HttpRequest) -> HttpResponse | None:
    """Why this request may not read /metrics, as a response; None when it may.

    The metrics name every tenant and what it holds, so they are never open to whoever
    reaches the port: with ``METRICS_TOKEN`` set the scraper must present it, and without
    one only a development server (``DEBUG=1``) answers.
    """
    token = settings.METRICS_TOKEN
    if not token:
        if settings.DEBUG:
            return None
        return JsonResponse(
            error_body(
                "permission_denied",
                "/metrics is closed: set METRICS_TOKEN (or METRICS_TOKEN_FILE) and scrape "
                "with 'Authorization: Bearer <token>'.",
            ),
            status=403,
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # compare_digest: the time taken does not tell how much of a guess was right.
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    response = JsonResponse(
        error_body("not_authenticated", "/metrics needs 'Authorization: Bearer <METRICS_TOKEN>'."),
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition of the control plane's metrics, for the holder of the token."""
    refusal = _metrics_refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


__all__ = ["healthz", "metrics_view", "readyz", "register_check"]
