"""A Celery worker's own ``/metrics``, for a worker that shares no directory with a web
server (a Kubernetes worker pod): its event series (admissions, reconcile passes, task
time, deliveries, its Kubernetes API requests), never the database gauges, which the web
servers serve. Started by ``WORKER_METRICS_PORT``; it answers only the holder of
``METRICS_TOKEN`` (no token, no server), as the web's ``/metrics`` does.
"""

from __future__ import annotations

import hmac
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST

from controlplane import metrics

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._answer(404, b"not found\n", "text/plain")
            return
        scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
        token = settings.METRICS_TOKEN
        if not (
            scheme.lower() == "bearer"
            and hmac.compare_digest(given.strip().encode(), token.encode())
        ):
            self._answer(
                401, b"/metrics needs 'Authorization: Bearer <METRICS_TOKEN>'\n", "text/plain"
            )
            return
        self._answer(200, metrics.event_exposition(), CONTENT_TYPE_LATEST)

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # a scrape every few seconds is not worth a log line


def serve(port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer | None:
    """Serve the worker's event series on ``port`` in a daemon thread; None (and a
    warning) when no METRICS_TOKEN is set."""
    if not settings.METRICS_TOKEN:
        log.warning("WORKER_METRICS_PORT is set but METRICS_TOKEN is not: no worker /metrics")
        return None
    server = ThreadingHTTPServer((host, port), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="worker-metrics", daemon=True).start()
    return server
