"""Kueue mode with a MIG flavor, over HTTP: gangway writes its queues into kubesim (whose
Kueue carries the deviceClassMappings gangway asks for), and a dev cluster's RayCluster
whose worker claims one 1g.10gb slice is admitted by Kueue counting the slice against the
tenant's MIG quota; a second one waits in Kueue with Kueue's reason. The objects are
gangway's own (its claim templates, then its RayCluster), applied through its gateway.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from clusters.kinds.raycluster.manifests import manifests
from clusters.kube.gateway import Gateway, get_gateway
from clusters.kube.queues import device_class_mappings
from clusters.models import ClusterRequest
from clusters.queue import kueue
from kubesim import KubeSim
from tenants.models import GpuFlavor, Quota
from tests.clusters.engine.conftest import wait_for
from tests.factories import GpuFlavorFactory
from tests.kubesim.kubesim_helpers import H100, MIG_FLEET

WL_API = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def h100_1g(db: Any, acme: Any) -> Any:
    """The MIG flavor on the fleet's H100 node (14 slices) with an acme quota of one."""
    flavor = GpuFlavorFactory(
        name="h100-1g",
        gpu_product=H100,
        gpus_per_node=14,
        cpu_per_node=64,
        memory_per_node_gib=512,
        node_count=1,
        device_mode="mig",
        mig_profile="1g.10gb",
    )
    Quota.objects.create(tenant=acme, flavor=flavor, gpus=1, borrow_limit=0)
    return flavor


@pytest.fixture
def sim(tmp_path: Path, settings: Any, h100_1g: Any) -> Iterator[KubeSim]:
    """kubesim with Kueue configured with gangway's deviceClassMappings, gangway's
    settings pointed at it (``QUEUE_MODE=kueue``)."""
    settings.QUEUE_MODE = "kueue"
    config = device_class_mappings(GpuFlavor.objects.all())
    sim = KubeSim(fleet=MIG_FLEET, port=0, startup_delay=0.0, kueue=True, kueue_config=config)
    sim.start()
    kubeconfig = tmp_path / "kubeconfig"
    sim.write_kubeconfig(str(kubeconfig))
    settings.KUBECONFIG = str(kubeconfig)
    kueue.forget_queues()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def resource_api(sim: KubeSim) -> Iterator[client.ResourceV1Api]:
    """The official client's resource.k8s.io/v1 API on kubesim (to read the claims)."""
    cfg = client.Configuration()
    cfg.host = sim.url
    api = client.ApiClient(cfg)
    yield client.ResourceV1Api(api)
    api.close()


def _create(gw: Gateway, cluster: ClusterRequest) -> None:
    """Apply gangway's objects of ``cluster`` in Kueue mode: its claim templates first."""
    objects = manifests(cluster, queue_mode="kueue")
    assert [o["kind"] for o in objects] == ["ResourceClaimTemplate", "RayCluster"]
    for obj in objects:
        gw.apply(obj)


def _workload(gw: Gateway, name: str) -> dict[str, Any]:
    return kueue.workloads_by_cluster(gw).get(("gw-acme", name)) or {}


def test_kueue_counts_mig_slices_against_the_flavor_quota(
    sim: KubeSim, resource_api: client.ResourceV1Api, acme: Any, bob: Any, h100_1g: Any
) -> None:
    gw = get_gateway()
    assert kueue.ensure_queues(gw)
    cq = gw.get(WL_API, "ClusterQueue", "gw-acme")
    covered = cq["spec"]["resourceGroups"][0]["coveredResources"]
    assert "mig.nvidia.com" in covered

    first = ClusterRequest(tenant=acme, owner=bob, flavor=h100_1g, name="bob-slice-a", kind="dev")
    _create(gw, first)
    admitted = wait_for(
        lambda: (w := _workload(gw, "bob-slice-a")) and kueue.is_admitted(w) and w,
        what="Kueue admitting the one-slice cluster",
    )
    (workers,) = [
        a for a in admitted["status"]["admission"]["podSetAssignments"] if a["name"] != "head"
    ]
    assert workers["flavors"]["mig.nvidia.com"] == "h100-1g"
    assert workers["resourceUsage"]["mig.nvidia.com"] == "1"
    assert "nvidia.com/gpu" not in workers["resourceUsage"]
    # The admitted worker runs on the slice the DRA driver allocated to its claim.
    claim = wait_for(
        lambda: next(
            (
                c
                for c in resource_api.list_namespaced_resource_claim("gw-acme").items
                if c.status and c.status.allocation
            ),
            None,
        ),
        what="the worker's claim allocated",
    )
    (result,) = claim.status.allocation.devices.results
    assert "mig-1g10gb" in result.device

    # acme's quota is one slice: the second cluster waits, with Kueue's own words.
    second = ClusterRequest(tenant=acme, owner=bob, flavor=h100_1g, name="bob-slice-b", kind="dev")
    _create(gw, second)
    waiting = wait_for(
        lambda: (
            (w := _workload(gw, "bob-slice-b")) and (w.get("status") or {}).get("conditions") and w
        ),
        what="Kueue's verdict on the second cluster",
    )
    assert not kueue.is_admitted(waiting)
    reserved = next(c for c in waiting["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["reason"] == "Pending"
    assert reserved["message"].startswith(
        "couldn't assign flavors to pod set h100-1g-workers: insufficient unused quota "
        "for mig.nvidia.com"
    )
