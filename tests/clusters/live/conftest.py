"""Fixtures for the tests of working on a running cluster (proxy, logs, idle reclaim).

``live_cluster`` is bob's dev cluster, ready in the database and running in kubesim (its
RayCluster applied by the provisioning code production uses, its head Running and Ready),
without a Celery worker: these tests drive the proxy and the activity pass themselves.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from clusters.engine import provisioning
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import kubesim, wait_for
from tests.frontend.conftest import (
    browser_env,
    browser_type_launch_args,
    make_ready,
    request_cluster,
)

__all__ = ["browser_env", "browser_type_launch_args", "kubesim", "live_cluster", "request_cluster"]


def head_ready(cluster: ClusterRequest) -> bool:
    """Whether kubesim's head pod of the cluster is Running and Ready."""
    pods = get_gateway().list(
        "v1",
        "Pod",
        namespace=cluster.namespace,
        label_selector=f"ray.io/cluster={cluster.name},ray.io/node-type=head",
    )
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for p in pods
        for c in (p.get("status") or {}).get("conditions") or []
    )


@pytest.fixture
def live_cluster(kubesim: Any, bob: Any, request_cluster: Any, monkeypatch: Any) -> ClusterRequest:
    from tests.frontend.browser import quiet_nudges

    quiet_nudges(monkeypatch)
    cluster = make_ready(request_cluster(bob, name="bob-live"))
    ClusterRequest.objects.filter(pk=cluster.pk).update(ready_at=timezone.now())
    cluster = ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)
    provisioning.apply_cluster(cluster, get_gateway())
    wait_for(lambda: head_ready(cluster), timeout=30, what="the head pod to be ready")
    return cluster
