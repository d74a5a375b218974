"""End to end through the real loop: API -> row -> worker -> kubesim -> row.

create -> ready -> suspend -> resume -> delete -> deleted, with nothing of the cluster
left in kubesim, and the quota ledger back to zero.
"""

from __future__ import annotations

from typing import Any

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import wait_for


def _state(pk: int) -> str:
    return ClusterRequest.objects.unscoped().get(pk=pk).state


def test_dev_cluster_full_lifecycle(worker: Any, as_user: Any, bob: Any) -> None:
    api = as_user(bob)
    response = api.post(
        "/api/v1/tenants/acme/clusters/",
        {"name": "bob-dev", "kind": "dev", "flavor": "l4", "workers": 1},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["state"] == "queued"
    pk = ClusterRequest.objects.unscoped().get(name="bob-dev").pk

    wait_for(lambda: _state(pk) == "ready", what="ready")
    body = api.get("/api/v1/tenants/acme/clusters/bob-dev/").json()
    assert body["endpoints"]["client_address"] == "ray://bob-dev-head-svc.gw-acme.svc:10001"
    assert [e["to_state"] for e in body["events"]][-4:] == [
        "queued",
        "admitted",
        "provisioning",
        "ready",
    ]
    gw = get_gateway()
    rc = gw.get("ray.io/v1", "RayCluster", "bob-dev", "gw-acme")
    assert rc is not None and rc["status"]["state"] == "ready"

    assert api.post("/api/v1/tenants/acme/clusters/bob-dev/suspend/").status_code == 200
    wait_for(
        lambda: not gw.list("v1", "Pod", label_selector="ray.io/cluster=bob-dev"),
        what="pods gone after suspend",
    )
    assert _state(pk) == "suspended"

    assert api.post("/api/v1/tenants/acme/clusters/bob-dev/resume/").status_code == 200
    wait_for(lambda: _state(pk) == "ready", what="ready again after resume")

    assert api.delete("/api/v1/tenants/acme/clusters/bob-dev/").status_code == 202
    wait_for(lambda: _state(pk) == "deleted", what="deleted")
    assert gw.get("ray.io/v1", "RayCluster", "bob-dev", "gw-acme") is None
    leftover = gw.list("v1", "Pod", label_selector=f"gangway.dev/cluster-id={pk}")
    leftover += gw.list("v1", "Service", label_selector=f"gangway.dev/cluster-id={pk}")
    leftover += gw.list("ray.io/v1", "RayCluster", label_selector=f"gangway.dev/cluster-id={pk}")
    assert leftover == []
    assert not ClusterRequest.objects.unscoped().filter(holds_gpus=True).exists()
