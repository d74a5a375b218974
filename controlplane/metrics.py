"""Prometheus metrics of the control plane.

Gauges that describe the database (clusters per state, GPUs held) are computed when
``/metrics`` is scraped, with one grouped query each, so they are always true and cost
nothing between scrapes; the app owning the tables registers the function that computes
them (:func:`on_scrape`). Counters are incremented where the event happens.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

REGISTRY = CollectorRegistry(auto_describe=True)

CLUSTERS = Gauge(
    "gangway_clusters",
    "Cluster requests by tenant and state",
    ["tenant", "state"],
    registry=REGISTRY,
)
GPUS_HELD = Gauge(
    "gangway_gpus_held", "GPUs held by admitted clusters", ["tenant", "flavor"], registry=REGISTRY
)
TENANTS = Gauge("gangway_tenants", "Number of tenants", registry=REGISTRY)
API_ERRORS = Counter(
    "gangway_kube_errors_total", "Kubernetes API errors by class", ["kind"], registry=REGISTRY
)
ADMISSION_PASSES = Counter(
    "gangway_admission_passes_total", "Admission passes run", registry=REGISTRY
)
ADMITTED = Counter(
    "gangway_admitted_total", "Cluster requests admitted", ["tenant"], registry=REGISTRY
)


_ON_SCRAPE: list[Callable[[], None]] = []


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
