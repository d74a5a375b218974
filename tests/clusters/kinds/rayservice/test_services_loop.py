"""A service through the real loop: API -> row -> queue -> worker -> kubesim (KubeRay's
RayService controller and simulated Ray Serve) -> row, then an upgrade and deletion."""

from __future__ import annotations

from typing import Any

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import kubesim, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures

SERVICES = "/api/v1/tenants/acme/services/"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=name)


def _rayservice(name: str) -> Any:
    return get_gateway().get("ray.io/v1", "RayService", name, "gw-acme")


def test_a_service_becomes_ready_shows_its_applications_and_goes(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    body = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
    created = api.post(SERVICES, body, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["state"] == "queued"
    assert created.json()["service"]["upgrade_strategy"]["type"] == "NewCluster"

    wait_for(lambda: _row("sd").state == "ready", timeout=120, what="the service ready")
    row = _row("sd")
    assert row.holds_gpus and row.gpus == 1
    detail = api.get(SERVICES + "sd/").json()
    app = detail["service"]["applications"]["stable_diffusion"]
    assert app["status"] == "RUNNING"
    assert set(app["deployments"]) == {"APIIngress", "StableDiffusionV2"}
    assert detail["service"]["active_cluster"].startswith("sd-raycluster-")
    assert detail["service"]["serve_endpoints"] >= 1
    assert {"queued", "admitted", "starting", "ready"} <= {e["to_state"] for e in detail["events"]}
    listed = api.get(SERVICES).json()["results"]
    assert [s["name"] for s in listed] == ["sd"]

    # A new Serve config is an upgrade: the RayService carries it, the history says so.
    new_config = STABLE_DIFFUSION.replace(
        "num_replicas: 1\n      - name: Stable", "num_replicas: 2\n      - name: Stable"
    )
    assert new_config != STABLE_DIFFUSION
    patched = api.patch(SERVICES + "sd/", {"serve_config": new_config}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["service"]["serve_config"] == new_config
    assert any(e["reason"] == "upgrade" for e in patched.json()["events"])
    wait_for(
        lambda: _rayservice("sd")["spec"]["serveConfigV2"] == new_config,
        what="the RayService upgraded",
    )

    assert api.delete(SERVICES + "sd/").status_code == 202
    wait_for(lambda: _row("sd").state == "deleted", timeout=120, what="the service deleted")
    assert not _row("sd").holds_gpus
    assert _rayservice("sd") is None
    assert api.get(SERVICES + "sd/").status_code == 404
