"""Several acceptable GPU flavors through the real loop (worker, kubesim over HTTP): a
request that accepts ``[h100, l4]`` runs on l4 while h100 is full and on h100 once it is
free — one flavor each time, never both — with the chosen flavor's nodes under its
workers and in its usage span."""

from __future__ import annotations

from typing import Any

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, UsageSpan
from tenants.models import Quota
from tests.clusters.engine.conftest import wait_for

CLUSTERS = "/api/v1/tenants/acme/clusters/"
JOBS = "/api/v1/tenants/acme/jobs/"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("flavor").get(name=name)


def _worker_products(pk: int) -> set[str]:
    pods = get_gateway().list(
        "v1", "Pod", label_selector=f"gangway.dev/cluster-id={pk},ray.io/node-type=worker"
    )
    nodes = {n["metadata"]["name"]: n for n in get_gateway().list("v1", "Node")}
    return {
        nodes[p["spec"]["nodeName"]]["metadata"]["labels"]["nvidia.com/gpu.product"]
        for p in pods
        if p["spec"].get("nodeName")
    }


def test_either_flavor_first_that_fits_never_both(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    # acme may hold 8 H100s: alice's production cluster takes them.
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=8, borrow_limit=0)
    full = {"name": "full", "kind": "prod", "flavor": "h100", "workers": 1}
    assert as_user(alice).post(CLUSTERS, full, format="json").status_code == 201
    wait_for(lambda: _row("full").state == "ready", what="h100 taken", timeout=60)

    either = {"name": "either", "entrypoint": "python eval.py", "flavors": ["h100", "l4"]}
    assert as_user(bob).post(JOBS, either, format="json").status_code == 201
    row = wait_for(lambda: (r := _row("either")).state == "running" and r, what="running")
    assert row.flavor.name == "l4" and list(row.accepted_flavors) == ["h100", "l4"]
    assert _worker_products(row.pk) == {"NVIDIA-L4"}
    (span,) = UsageSpan.objects.filter(cluster=row)
    assert span.flavor_name == "l4"

    assert as_user(alice).delete(CLUSTERS + "full/").status_code == 202
    wait_for(lambda: _row("full").state == "deleted", what="h100 free again")
    again = {"name": "again", "entrypoint": "python eval.py", "flavors": ["h100", "l4"]}
    assert as_user(bob).post(JOBS, again, format="json").status_code == 201
    row = wait_for(lambda: (r := _row("again")).state == "running" and r, what="running")
    assert row.flavor.name == "h100"
    assert _worker_products(row.pk) == {"NVIDIA-H100-80GB-HBM3"}
    # Each charged once, on one flavor.
    assert [s.flavor_name for s in UsageSpan.objects.filter(cluster=row)] == ["h100"]
