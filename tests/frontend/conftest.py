"""Fixtures for the dashboard tests: clusters moved through their states by the same
services and admission pass the system uses (no Kubernetes: ``provisioning`` and
``ready`` are set with the one transition helper, as the reconciler would)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition


def make_ready(cluster: ClusterRequest) -> ClusterRequest:
    """Admit (if still queued) and walk the cluster to ``ready``."""
    cluster.refresh_from_db()
    if cluster.state == State.QUEUED:
        run_admission_pass()
        cluster.refresh_from_db()
    assert cluster.state == State.ADMITTED, cluster.state_reason
    transition(cluster, State.PROVISIONING, reason="applied", message="RayCluster applied")
    transition(cluster, State.READY, reason="ready", message="head and workers are ready")
    return cluster


@pytest.fixture
def request_cluster(acme: Any, h100: Any) -> Any:
    """``request_cluster(actor, **shape)``: a dev cluster created through the service."""

    def create(actor: Any, **shape: Any) -> ClusterRequest:
        values: dict[str, Any] = {"kind": "dev", "flavor": h100, "workers": 1}
        values.update(shape)
        return services.cluster_request_create(actor=actor, tenant=acme, spec=ClusterSpec(**values))

    return create


@pytest.fixture
def ready_cluster(bob: Any, request_cluster: Any) -> ClusterRequest:
    """bob's one-GPU dev cluster, ready."""
    return make_ready(request_cluster(bob, name="bob-ready"))


@pytest.fixture(scope="session")
def browser_type_launch_args() -> dict[str, Any]:
    """pytest-playwright's launch options: the system chromium (see tests/frontend/browser.py)."""
    from tests.frontend.browser import launch_args

    return launch_args()


@pytest.fixture
def browser_env(monkeypatch: Any, settings: Any) -> None:
    """A live-server test with plain static files and no Celery nudges."""
    from tests.frontend.browser import plain_static, quiet_nudges

    plain_static(settings)
    quiet_nudges(monkeypatch)
