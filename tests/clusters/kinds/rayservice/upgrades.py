"""What the real-loop upgrade tests share: the service ``sd`` of tenant ``acme`` on one
L4 GPU, a second allowed image, and readings of its rows and of kubesim's RayClusters."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, Surge, UsageSpan
from tests.clusters.engine.conftest import wait_for
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

SERVICES = "/api/v1/tenants/acme/services/"
OTHER = "rayproject/ray:2.40.0-py310-gpu"
BODY = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
# An incremental upgrade of half the capacity, then half the traffic, at a time; each
# traffic step held 3 s.
HALF_AT_A_TIME = {
    "type": "NewClusterWithIncrementalUpgrade",
    "cluster_upgrade_options": {"maxSurgePercent": 50, "stepSizePercent": 50, "intervalSeconds": 3},
}
# KubeRay deletes the old cluster rayClusterDeletionDelaySeconds (60) after the switch.
SWITCH_AND_CLEANUP = 240


@pytest.fixture
def other_image(settings: Any) -> None:
    """Allow :data:`OTHER` too; before the worker starts, so that it allows it as well
    (a test module makes it autouse by wrapping it)."""
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


def row(name: str = "sd") -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=name)


def surge() -> Surge | None:
    return Surge.objects.filter(request__name="sd").first()


def open_spans(request: ClusterRequest) -> list[UsageSpan]:
    return list(UsageSpan.objects.unscoped().filter(cluster_id=request.pk, ended_at__isnull=True))


def rayclusters() -> list[dict[str, Any]]:
    return get_gateway().list(
        "ray.io/v1",
        "RayCluster",
        namespace="gw-acme",
        label_selector="ray.io/originated-from-cr-name=sd",
    )


def images() -> set[str]:
    """The images of the RayService's cluster spec as kubesim holds it."""
    rs = get_gateway().get("ray.io/v1", "RayService", "sd", "gw-acme")
    spec = rs["spec"]["rayClusterConfig"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return {c["image"] for g in groups for c in g["template"]["spec"]["containers"]}


def ready_service(api: Any) -> ClusterRequest:
    """Create ``sd`` through the API and wait until it is ready on an active cluster."""
    assert api.post(SERVICES, BODY, format="json").status_code == 201
    wait_for(
        lambda: row().state == "ready" and row().service.active_cluster,
        timeout=120,
        what="the service ready",
    )
    return row()


def switched_and_released(first: str, *, watch_ready: bool) -> None:
    """Wait until KubeRay serves from a new cluster, the old one is gone and the surge is
    released; with ``watch_ready``, the service must stay ready at every look."""

    def done() -> bool:
        now = row()
        if watch_ready:
            assert now.state == "ready", now.state_reason
        names = [rc["metadata"]["name"] for rc in rayclusters()]
        return now.service.active_cluster not in ("", first) and names == [
            now.service.active_cluster
        ]

    wait_for(done, timeout=SWITCH_AND_CLEANUP, what="the switch and the old cluster gone")
    wait_for(lambda: surge() is None, timeout=60, what="the surge released")
