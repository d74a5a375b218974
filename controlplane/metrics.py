"""Prometheus metrics of the control plane (docs/metrics.md lists every series).

Two kinds of series:

* Gauges that describe the database (clusters per state, queue depth, GPUs held) are
  computed when ``/metrics`` is scraped, with one grouped query each, so they are always
  true and cost nothing between scrapes; the app owning the tables registers the function
  that computes them (:func:`on_scrape`). They are :class:`ScrapeGauge`, kept in the
  scraping process only: they are never written to the multi-process files, where a
  value set by one web worker would outlive the next scrape served by another.
* Counters and histograms are incremented where the event happens, in whichever process
  that is (a web worker, a Celery worker). With ``PROMETHEUS_MULTIPROC_DIR`` set (before
  this module is imported) prometheus-client keeps them in files in that directory,
  which every process of one host shares, and :func:`exposition` adds them all up; without
  it (tests, ``manage.py runserver``) they live in this process's memory.

Label values are bounded: tenants, flavors, fleet members, states, reasons, task names,
URL route names and verbs, never a request's name or a user.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry(auto_describe=True)


def multiprocess_dir() -> str:
    """The shared directory of the multi-process mode, "" when it is off."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")


class ScrapeGauge:
    """A gauge whose values are set at each scrape from the database (see the module
    docstring): ``labels(...).set(v)``, ``set(v)`` and ``clear()`` as prometheus-client's."""

    def __init__(self, name: str, documentation: str, labelnames: list[str] | None = None):
        self.name = name
        self.documentation = documentation
        self.labelnames = list(labelnames or [])
        self._values: dict[tuple[str, ...], float] = {}
        _SCRAPE_GAUGES.append(self)

    class _Child:
        def __init__(self, gauge: ScrapeGauge, key: tuple[str, ...]) -> None:
            self._gauge, self._key = gauge, key

        def set(self, value: float) -> None:
            self._gauge._values[self._key] = float(value)

    def labels(self, *values: str) -> ScrapeGauge._Child:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}")
        return ScrapeGauge._Child(self, tuple(str(v) for v in values))

    def set(self, value: float) -> None:
        self._values[()] = float(value)

    def clear(self) -> None:
        self._values.clear()

    def family(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, value in sorted(self._values.items()):
            family.add_metric(list(key), value)
        return family


_SCRAPE_GAUGES: list[ScrapeGauge] = []


class _ScrapeCollector(Collector):
    """Yields the scrape gauges as they were last refreshed."""

    def collect(self) -> Iterator[Metric]:
        for gauge in _SCRAPE_GAUGES:
            yield gauge.family()


# --- Database-derived gauges (computed at scrape) -------------------------------------
CLUSTERS = ScrapeGauge(
    "gangway_clusters", "Cluster requests by tenant and state", ["tenant", "state"]
)
GPUS_HELD = ScrapeGauge("gangway_gpus_held", "GPUs held by admitted requests", ["tenant", "flavor"])
TENANTS = ScrapeGauge("gangway_tenants", "Number of tenants")
QUEUE_DEPTH = ScrapeGauge(
    "gangway_queue_depth",
    "Queued requests by tenant, flavor and why they wait (queue_reason)",
    ["tenant", "flavor", "reason"],
)
GPUS_GUARANTEED = ScrapeGauge(
    "gangway_gpus_guaranteed", "GPUs of each tenant's nominal quota", ["tenant", "flavor"]
)
GPUS_BORROWED = ScrapeGauge(
    "gangway_gpus_borrowed",
    "GPUs held beyond the tenant's nominal quota (borrowed from its cohort)",
    ["tenant", "flavor"],
)
GPUS_IDLE = ScrapeGauge(
    "gangway_gpus_idle", "GPUs held by requests that Ray shows unused", ["tenant", "flavor"]
)
MONTH_GPU_HOURS = ScrapeGauge(
    "gangway_month_gpu_hours",
    "GPU-hours each tenant used this UTC calendar month (recomputed at most once a minute)",
    ["tenant"],
)
MONTH_COST = ScrapeGauge(
    "gangway_month_cost",
    "What each tenant's GPU-hours this UTC month cost at the flavors' prices, in the "
    "platform's currency (recomputed at most once a minute)",
    ["tenant"],
)
BUDGET = ScrapeGauge(
    "gangway_budget",
    "Each tenant's monthly budgets: gpu_hours (its GPU-hour budget), cost_soft and "
    "cost_hard (its own money caps; an engineer's are not exported)",
    ["tenant", "budget"],
)
PASS_PENDING = ScrapeGauge(
    "gangway_pass_pending_seconds",
    "How long the pass asked for has waited to start (0: none asked for)",
    ["pass_name"],
)

# --- Event series (incremented where the event happens) ------------------------------
API_ERRORS = Counter(
    "gangway_kube_errors_total", "Kubernetes API errors by class", ["kind"], registry=REGISTRY
)
ADMISSION_PASSES = Counter(
    "gangway_admission_passes_total", "Admission passes run", registry=REGISTRY
)
ADMITTED = Counter(
    "gangway_admitted_total",
    "Requests admitted (moved from queued to admitted)",
    ["tenant", "flavor"],
    registry=REGISTRY,
)
PREEMPTED = Counter(
    "gangway_preempted_total",
    "Running requests taken off their GPUs for another's sake, by why",
    ["tenant", "flavor", "reason"],
    registry=REGISTRY,
)
# Seconds, from a request's seconds-long starts to a queue of hours.
_WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
WAIT_SECONDS = Histogram(
    "gangway_wait_seconds",
    "Time from entering the queue to admission",
    ["flavor"],
    buckets=_WAIT_BUCKETS,
    registry=REGISTRY,
)
TIME_TO_READY = Histogram(
    "gangway_time_to_ready_seconds",
    "Time from a request's creation to ready (a job's: to running), the first time",
    ["workload", "flavor"],
    buckets=_WAIT_BUCKETS,
    registry=REGISTRY,
)
RECONCILE_SECONDS = Histogram(
    "gangway_reconcile_pass_seconds",
    "Duration of one member's reconcile pass",
    ["member"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)
RECONCILE_LAST = Gauge(
    "gangway_reconcile_last_pass_timestamp_seconds",
    "When the last reconcile pass of a member ended (Unix time)",
    ["member"],
    multiprocess_mode="max",
    registry=REGISTRY,
)
GATEWAY_REQUESTS = Counter(
    "gangway_gateway_requests_total",
    "Requests sent to a member cluster's Kubernetes API",
    ["verb", "cluster"],
    registry=REGISTRY,
)
GATEWAY_ERRORS = Counter(
    "gangway_gateway_errors_total",
    "Requests to a member's Kubernetes API that failed, by class",
    ["verb", "cluster", "kind"],
    registry=REGISTRY,
)
API_SECONDS = Histogram(
    "gangway_http_request_seconds",
    "Web request latency by URL route, method and status class",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)
TASK_SECONDS = Histogram(
    "gangway_celery_task_seconds",
    "Celery task run time by task name and final state",
    ["task", "state"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
DELIVERIES = Counter(
    "gangway_notification_deliveries_total",
    "Notification delivery attempts by event kind, channel and outcome",
    ["kind", "channel", "outcome"],
    registry=REGISTRY,
)

# The database gauges apart from the event series: a Celery worker's own endpoint
# (controlplane/worker_metrics.py) serves the events alone, so that the gauges, which the
# web pods serve, are not counted twice.
_SCRAPE_REGISTRY = CollectorRegistry()
_SCRAPE_REGISTRY.register(_ScrapeCollector())

_ON_SCRAPE: list[Callable[[], None]] = []
_SCRAPE_LOCK = threading.Lock()


def on_scrape(refresh: Callable[[], None]) -> Callable[[], None]:
    """Recompute some database-derived gauges with ``refresh`` at each scrape (once,
    however often it is registered); usable as a decorator."""
    # Apps register theirs in AppConfig.ready(), so this module imports none of them.
    if refresh not in _ON_SCRAPE:
        _ON_SCRAPE.append(refresh)
    return refresh


def refresh_gauges() -> None:
    """Recompute the database-derived gauges (called on scrape), in registration order."""
    for refresh in _ON_SCRAPE:
        refresh()


def exposition() -> bytes:
    """The text a scrape reads: the database gauges, freshly computed, and the event
    series, of this process alone or, in multi-process mode, of every process."""
    # One scrape at a time per process: the gauges are cleared and refilled in place.
    with _SCRAPE_LOCK:
        refresh_gauges()
        return event_exposition() + generate_latest(_SCRAPE_REGISTRY)


def event_exposition() -> bytes:
    """The event series alone (counters, histograms), of this process or, in
    multi-process mode, of every process sharing the directory."""
    if not multiprocess_dir():
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)


def process_exited(pid: int) -> None:
    """Drop a dead process's live gauge files (a gunicorn or Celery worker's exit); its
    counters and histograms stay, so totals never go down."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid)
