"""Metrics end to end: ``PROMETHEUS=1 make run`` with two web server processes, a Celery
worker and beat (all sharing PROMETHEUS_MULTIPROC_DIR), and Debian's Prometheus scraping
/metrics with the bearer token.

The events that drive each series are made through the API (a sign-in, a cluster created
until ready, then deleted), and every documented series is checked to have changed with
them in /metrics (whichever web process answers the scrape: each adds up all processes'
files); then Prometheus's HTTP API answers the queries of docs/metrics.md.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.make_run import MakeRun, free_port, http, until

pytestmark = pytest.mark.slow

TOKEN = "metrics-e2e-token-0123456789"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


def _scrape(stack: MakeRun) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one /metrics scrape, by name and labels."""
    request = urllib.request.Request(
        f"{stack.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _total(samples: dict[Any, float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        value
        for (sample, sample_labels), value in samples.items()
        if sample == name and set(labels.items()) <= set(sample_labels)
    )


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=30) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def _documented_queries() -> list[str]:
    """The PromQL of docs/metrics.md's "Queries" table (the code spans of its rows)."""
    section = DOCS.read_text().split("## Queries", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", section, re.MULTILINE)]


def test_metrics_change_with_their_events_across_processes_and_prometheus_scrapes_them(
    tmp_path: Path,
) -> None:
    assert shutil.which("prometheus"), (
        "Debian's prometheus is missing: apt-get install -y prometheus "
        "(scripts/test_services.py installs it for make test)"
    )
    prometheus_port = free_port()
    stack = MakeRun(
        tmp_path,
        PROMETHEUS="1",
        PROMETHEUS_PORT=str(prometheus_port),
        WEB_WORKERS="2",
        METRICS_TOKEN=TOKEN,
    )
    try:
        # Set-up (migrate, seed, collectstatic) takes minutes on a loaded machine.
        try:
            stack.wait_serving(timeout=900)
        except AssertionError:
            raise AssertionError(f"make run did not serve:\n{stack.output}") from None
        assert f"prometheus: http://127.0.0.1:{prometheus_port}/" in stack.output
        # Refused without the token, as before.
        assert http("GET", f"{stack.url}/metrics")[0] == 401
        before = _scrape(stack)

        # speech holds all four of its L4s (the seed's spill-over scene): eve's waits.
        eve = stack.login("eve")
        status, waiting = http(
            "POST",
            f"{stack.api}/tenants/speech/clusters/",
            {"name": "waits", "kind": "dev", "flavor": "l4", "workers": 1},
            eve,
        )
        assert status == 201, waiting

        token = stack.login("eli")
        status, created = http(
            "POST",
            f"{stack.api}/tenants/vision/clusters/",
            {"name": "metered", "kind": "dev", "flavor": "l4", "workers": 1},
            token,
        )
        assert status == 201, created
        until(
            lambda: (c := stack.cluster("vision", "metered", token)) and c["state"] == "ready",
            120,
            "the cluster to be ready",
        )
        assert http("DELETE", f"{stack.api}/tenants/vision/clusters/metered/", token=token)[0] in (
            202,
            204,
        )

        # Every counter below is incremented in the Celery worker or a web process, and
        # read through whichever web process answers: the files add them up.
        def moved() -> dict[Any, float] | None:
            after = _scrape(stack)
            grew = [
                _total(after, name, **labels) > _total(before, name, **labels)
                for name, labels in (
                    ("gangway_admitted_total", {"tenant": "vision", "flavor": "l4"}),
                    ("gangway_wait_seconds_count", {"flavor": "l4"}),
                    ("gangway_time_to_ready_seconds_count", {"flavor": "l4"}),
                    ("gangway_reconcile_pass_seconds_count", {}),
                    ("gangway_gateway_requests_total", {"verb": "POST"}),
                    ("gangway_celery_task_seconds_count", {"state": "SUCCESS"}),
                    ("gangway_notification_deliveries_total", {"outcome": "sent"}),
                )
            ]
            return after if all(grew) else None

        after = until(moved, 90, "every event series to move")
        route = {"route": "cluster-list", "method": "POST", "status": "2xx"}
        assert _total(after, "gangway_http_request_seconds_count", **route) >= 1
        assert _total(after, "gangway_reconcile_last_pass_timestamp_seconds") > 0
        # The database's gauges: the seed's quota and held GPUs, per tenant and flavor.
        assert _total(after, "gangway_gpus_guaranteed", tenant="vision") > 0
        assert _total(after, "gangway_gpus_held", tenant="speech") > 0
        assert _total(after, "gangway_queue_depth", tenant="speech", flavor="l4") == 1
        assert _total(after, "gangway_tenants") >= 2

        # Prometheus scraped it (up == 1) and answers every documented query.
        until(
            lambda: [
                r for r in _query(prometheus_port, 'up{job="gangway"}') if r["value"][1] == "1"
            ],
            90,
            "Prometheus to scrape gangway",
        )
        until(
            lambda: _query(prometheus_port, 'gangway_admitted_total{tenant="vision"}'),
            90,
            "Prometheus to have the admission",
        )
        queries = _documented_queries()
        assert len(queries) >= 10, queries
        empty: list[str] = []

        def answered() -> bool:
            # A rate needs two scrapes of a series: the newest ones may need another.
            empty[:] = [q for q in queries if not _query(prometheus_port, q)]
            return not empty

        try:
            until(answered, 90, "every documented query to return series")
        except AssertionError:
            raise AssertionError(f"documented queries with no series: {empty}") from None
    finally:
        code = stack.stop()
    assert code == 0, stack.output
