"""Which upgrades bring a second Ray cluster, through the real loop: a new Serve config
is applied in place on the active cluster (KubeRay hashes only ``rayClusterConfig``); a
new image brings a pending cluster up beside the active one, shown on the service, until
KubeRay switches to it. The second cluster is the surge an upgrade needs room for."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import kubesim, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures

SERVICES = "/api/v1/tenants/acme/services/"
OTHER = "rayproject/ray:2.40.0-py310-gpu"


@pytest.fixture(autouse=True)
def _other_image(settings: Any) -> None:
    """Before the worker starts, so that it allows the second image too."""
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=name)


def _rayservice(name: str) -> Any:
    return get_gateway().get("ray.io/v1", "RayService", name, "gw-acme")


def _rayclusters(name: str) -> list[str]:
    found = get_gateway().list(
        "ray.io/v1",
        "RayCluster",
        namespace="gw-acme",
        label_selector=f"ray.io/originated-from-cr-name={name}",
    )
    return sorted(rc["metadata"]["name"] for rc in found)


def test_a_new_image_brings_a_second_cluster_beside_the_first_and_switches(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    body = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
    assert api.post(SERVICES, body, format="json").status_code == 201
    wait_for(lambda: _row("sd").state == "ready", timeout=120, what="the service ready")
    first = _row("sd").service.active_cluster
    assert _rayclusters("sd") == [first]

    # A new Serve config: applied on the same cluster, which KubeRay keeps.
    config = STABLE_DIFFUSION.replace(
        "num_replicas: 1\n      - name: Stable", "num_replicas: 2\n      - name: Stable"
    )
    assert api.patch(SERVICES + "sd/", {"serve_config": config}, format="json").status_code == 200
    wait_for(
        lambda: (
            (_rayservice("sd")["status"].get("observedGeneration") or 0)
            >= _rayservice("sd")["metadata"]["generation"]
        ),
        what="KubeRay saw the new Serve config",
    )
    # The pass that saw it names no pending cluster (it would, in the same pass).
    assert not (_rayservice("sd")["status"].get("pendingServiceStatus") or {}).get("rayClusterName")
    assert _rayclusters("sd") == [first]

    # A new image: a second cluster comes up while the first still serves.
    patched = api.patch(SERVICES + "sd/", {"image": OTHER}, format="json")
    assert patched.status_code == 200, patched.content
    both = wait_for(
        lambda: len(_rayclusters("sd")) == 2 and _rayclusters("sd"),
        what="a second RayCluster beside the first",
    )
    assert first in both
    second = next(name for name in both if name != first)
    wait_for(
        lambda: _row("sd").service.active_cluster == second and not _row("sd").service.upgrading,
        timeout=120,
        what="KubeRay switched to the new cluster",
    )
    row = _row("sd")
    assert row.state == "ready" and row.service.pending_cluster == ""
    assert any(e.reason == "upgrade" and OTHER in e.message for e in row.events.all())
