"""A Celery worker's own /metrics (WORKER_METRICS_PORT): its event series, to the token
holder only, without the database gauges the web servers serve."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from controlplane import metrics
from controlplane.worker_metrics import serve
from tests.make_run import free_port

TOKEN = "a-worker-metrics-token-0123456789"


def _get(port: int, path: str, token: str = "") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_worker_serves_its_event_series_to_the_token_holder(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN
    metrics.DELIVERIES.labels("cluster_ready", "webhook", "sent").inc()
    port = free_port()
    server = serve(port, host="127.0.0.1")
    assert server is not None
    try:
        assert _get(port, "/metrics")[0] == 401
        assert _get(port, "/metrics", "not-the-token-0123456789")[0] == 401
        assert _get(port, "/elsewhere", TOKEN)[0] == 404
        status, text = _get(port, "/metrics", TOKEN)
        assert status == 200
        assert 'gangway_notification_deliveries_total{channel="webhook"' in text
        assert "gangway_tenants" not in text and "gangway_queue_depth" not in text
    finally:
        server.shutdown()
        server.server_close()


def test_without_a_token_the_worker_serves_nothing(settings: Any) -> None:
    settings.METRICS_TOKEN = ""
    assert serve(free_port(), host="127.0.0.1") is None
