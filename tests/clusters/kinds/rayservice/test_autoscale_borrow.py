"""A service that autoscales, through the real loop (kubesim over HTTP, a Celery worker):
admitted and charged at its guaranteed size (``min_workers``), it grows into quota
borrowed from its cohort when Ray Serve wants more replicas than its workers hold, and a
reclaim for the lender takes that growth back (the RayCluster's ``maxReplicas`` lowered)
without evicting the service: it keeps its guaranteed workers throughout."""

from __future__ import annotations

import json
from typing import Any

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, Growth, UsageSpan
from tenants.models import Quota
from tests.clusters.engine.conftest import kubesim, wait_for, worker
from tests.frontend.test_pages import client_for

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures

SERVICES = "/api/v1/tenants/acme/services/"
# One GPU per replica; Serve scales between 1 and 2 replicas at once (no delays).
MODEL = """\
applications:
  - name: model
    import_path: model:app
    route_prefix: /
    deployments:
      - name: Model
        ray_actor_options:
          num_gpus: 1
          num_cpus: 0
        autoscaling_config:
          min_replicas: 1
          max_replicas: 2
          upscale_delay_s: 0
          downscale_delay_s: 0
"""
BODY = {
    "name": "model",
    "kind": "prod",
    "flavor": "l4",
    "workers": 1,
    "min_workers": 1,
    "max_workers": 2,
    "serve_config": MODEL,
}


def _row(name: str = "model") -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=name)


def _growth() -> Growth | None:
    return Growth.objects.filter(request__name="model").first()


def _open_gpus(row: ClusterRequest) -> list[Any]:
    spans = UsageSpan.objects.unscoped().filter(cluster_id=row.pk, ended_at__isnull=True)
    return [s.gpus for s in spans]


def _raycluster(name: str) -> dict[str, Any]:
    rc = get_gateway().get("ray.io/v1", "RayCluster", name, "gw-acme")
    assert rc is not None
    return rc


def _max_replicas(name: str) -> int:
    (group,) = _raycluster(name)["spec"]["workerGroupSpecs"]
    return int(group["maxReplicas"])


def _workers(name: str) -> int:
    pods = get_gateway().list(
        "v1", "Pod", namespace="gw-acme", label_selector=f"ray.io/cluster={name}"
    )
    return sum(
        1
        for p in pods
        if p["metadata"]["labels"].get("ray.io/node-type") == "worker"
        and not p["metadata"].get("deletionTimestamp")
    )


def _load(name: str, ongoing: int) -> None:
    """Serve's load on the model deployment (kubesim's knob on the RayCluster)."""
    annotations = {"kubesim.io/serve-load": json.dumps({"Model": ongoing})}
    get_gateway().merge_patch(
        "ray.io/v1", "RayCluster", name, {"metadata": {"annotations": annotations}}, "gw-acme"
    )


def _quotas(acme: Any, globex: Any, l4: Any) -> None:
    """One l4 GPU each; acme may borrow one more from the cohort, globex lends its own."""
    for tenant in (acme, globex):
        tenant.max_dev_clusters_per_user = tenant.max_dev_gpus_per_user = 100
        tenant.save()
    Quota.objects.filter(tenant=acme, flavor=l4).update(gpus=1, borrow_limit=1)
    Quota.objects.filter(tenant=globex, flavor=l4).update(gpus=1, borrow_limit=0)
    l4.node_count = 100
    l4.save()


def test_autoscaling_beyond_the_guaranteed_size_borrows_and_is_reclaimed_back_to_min(
    worker: Any,
    kubesim: Any,
    as_user: Any,
    alice: Any,
    charlie: Any,
    acme: Any,
    globex: Any,
    l4: Any,
) -> None:
    _quotas(acme, globex, l4)
    api = as_user(alice)
    created = api.post(SERVICES, BODY, format="json")
    assert created.status_code == 201, created.content

    # Admitted and charged at its guaranteed size, its RayService's workers held there.
    row = wait_for(
        lambda: (r := _row()).state == "ready" and r.service.active_cluster and r,
        timeout=120,
        what="the service ready",
    )
    assert row.gpus == 1 and _open_gpus(row) == [1]
    rs = get_gateway().get("ray.io/v1", "RayService", "model", "gw-acme")
    (group,) = rs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert (group["minReplicas"], group["maxReplicas"]) == (1, 1)
    active = row.service.active_cluster
    assert _max_replicas(active) == 1 and _workers(active) == 1

    # Serve wants a second replica, which no worker has room for: the service asks for
    # one worker more, borrowed from globex's unused GPU, and the autoscaler adds it.
    _load(active, 4)
    grown = wait_for(
        lambda: (g := _growth()) is not None and g.admitted_at is not None and g,
        timeout=90,
        what=lambda: f"the growth admitted ({_growth() and _growth().queue_message})",
    )
    assert grown.workers == 1 and grown.gpus == 1
    wait_for(lambda: _max_replicas(active) == 2, timeout=60, what="maxReplicas raised")
    wait_for(lambda: _workers(active) == 2, timeout=90, what="the second worker")
    assert sorted(_open_gpus(row)) == [2]  # the usage span counts the borrowed GPU
    detail = api.get(SERVICES + "model/").json()
    assert detail["autoscale"]["growth"]["state"] == "admitted"
    assert detail["autoscale"]["may_run_workers"] == 2

    # globex claims its own GPU back: the growth is taken back, not the service.
    claim = {"name": "mine", "flavor": "l4", "workers": 1}
    made = as_user(charlie).post("/api/v1/tenants/globex/clusters/", claim, format="json")
    assert made.status_code == 201, made.content

    def claimed() -> bool:
        assert _workers(active) >= 1  # never below its guaranteed size
        return _row("mine").holds_gpus

    wait_for(claimed, timeout=120, what="globex's cluster admitted")
    assert _max_replicas(active) == 1
    wait_for(lambda: _workers(active) == 1, timeout=90, what="the borrowed worker gone")
    row = _row()
    assert row.holds_gpus and row.state in ("ready", "starting")
    assert _open_gpus(row) == [1]
    reasons = [e.reason for e in row.events.all()]
    assert "growth_admitted" in reasons and "growth_reclaimed" in reasons
    # Serve still wants two replicas: it asks again, and waits for the cohort.
    waiting = wait_for(
        lambda: (g := _growth()) is not None and g.queue_reason and g,
        timeout=60,
        what="the growth waiting again",
    )
    assert waiting.admitted_at is None and waiting.queue_reason == "cohort_quota"
    said = api.get(SERVICES + "model/").json()["autoscale"]
    assert said["growth"]["state"] == "waiting" and said["may_run_workers"] == 1
    assert "taken back" in said["last_reclaim"]["message"]
    page = client_for(alice).get("/t/acme/services/model/").content.decode()
    assert 'data-autoscale="1"' in page and 'data-growth="waiting"' in page
    assert "data-growth-reclaimed" in page and "growth by 1 worker (1 l4 GPU) waits" in page
