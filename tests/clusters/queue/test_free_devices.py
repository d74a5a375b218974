"""Free capacity of DRA flavors, read by a reconcile pass from kubesim over HTTP: devices
of the flavor's class and profile that no claim holds and whose shared counters are not
consumed; extended-resource flavors never count DRA-managed nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.domain.workload_kinds import kinds
from clusters.engine.reconciler import reconcile_once
from clusters.kube.gateway import Gateway, get_gateway
from clusters.models import FlavorStock
from clusters.queue import free_devices
from kubesim import KubeSim
from tenants.models import GpuFlavor
from tests.clusters.engine.conftest import wait_for
from tests.clusters.queue.dra_fleet import (
    MIG_PROFILE,
    claim_devices,
    dra_flavors,
    dra_kubesim,
    extended_pod,
)
from tests.factories import UserFactory


@pytest.fixture
def sim(tmp_path: Path, settings: Any, db: Any) -> Iterator[KubeSim]:
    with dra_kubesim(tmp_path, settings) as s:
        yield s


def _observed() -> dict[str, tuple[int | None, int | None, int | None]]:
    return {
        f.name: (f.observed_free_gpus, f.observed_free_nodes, f.observed_nodes)
        for f in GpuFlavor.objects.order_by("name")
    }


def _running(sim: KubeSim, *names: str) -> None:
    wait_for(
        lambda: all(
            (sim.get("pods", "default", n) or {}).get("status", {}).get("phase") == "Running"
            for n in names
        ),
        what=f"pods {names} running",
    )


def test_free_devices_per_flavor_count_claims_and_shared_counters(
    sim: KubeSim, as_user: Any
) -> None:
    dra_flavors()
    reconcile_once()
    # Nothing claimed: every flavor sees its own two nodes, never the other pool's.
    assert _observed() == {
        "h100": (16, 2, 2),
        "h100-1g": (112, 2, 2),
        "h100-dra": (16, 2, 2),
    }

    # Four 1g.10gb slices on dra-mig-0 (all of one GPU's counters left for three more),
    # one whole GPU on dra-mig-1 (its seven partitions can no longer be allocated), and
    # six device-plugin GPUs on dra-h100-0.
    claim_devices(
        "slices", "dra-mig-0", device_class="mig.nvidia.com", count=4, selector=MIG_PROFILE
    )
    claim_devices("whole", "dra-mig-1", device_class="gpu.nvidia.com", count=1)
    extended_pod("plugin", "dra-h100-0", 6)
    _running(sim, "slices", "whole", "plugin")
    reconcile_once()
    assert _observed() == {
        "h100": (10, 1, 2),
        # 112 slices less the 4 claimed and the 7 of the GPU claimed whole.
        "h100-1g": (101, 0, 2),
        # 16 GPUs less the one claimed and the one whose partitions are in use.
        "h100-dra": (14, 0, 2),
    }

    # Written per member of the fleet (the home member, here), the flavors' figures
    # being their sums.
    assert {
        (s.kube_cluster.name, s.flavor.name): (s.observed_free_gpus, s.observed_free_nodes)
        for s in FlavorStock.objects.select_related("kube_cluster", "flavor")
    } == {
        ("default", "h100"): (10, 1),
        ("default", "h100-1g"): (101, 0),
        ("default", "h100-dra"): (14, 0),
    }

    # The flavors' API says the same, in devices of each flavor's class and profile.
    listed = as_user(UserFactory(username="reader")).get("/api/v1/flavors/?page_size=50")
    assert {
        f["name"]: (f["observed_free_gpus"], f["observed_free_nodes"])
        for f in listed.data["results"]
    } == {"h100": (10, 1), "h100-1g": (101, 0), "h100-dra": (14, 0)}

    gw = get_gateway()
    use = free_devices.gpu_use(
        gw.list("resource.k8s.io/v1", "ResourceSlice"),
        gw.list("resource.k8s.io/v1", "ResourceClaim"),
    )
    summaries = Counter((g.node, g.summary) for g in use)
    assert summaries == {
        ("dra-mig-0", "4 of 7 1g.10gb in use"): 1,
        ("dra-mig-0", "0 of 7 1g.10gb in use"): 7,
        ("dra-mig-1", "in use whole"): 1,
        ("dra-mig-1", "0 of 7 1g.10gb in use"): 7,
    }

    # The pods and claims go: everything is free again.
    for name in ("slices", "whole", "plugin"):
        gw.delete("v1", "Pod", name, namespace="default")
    for name in ("slices", "whole"):
        gw.delete("resource.k8s.io/v1", "ResourceClaim", name, namespace="default")
    wait_for(lambda: not gw.list("resource.k8s.io/v1", "ResourceClaim"), what="claims gone")
    reconcile_once()
    assert _observed()["h100-1g"] == (112, 2, 2)


def test_a_pass_lists_dra_kinds_once_and_only_with_a_dra_flavor(sim: KubeSim) -> None:
    calls: Counter[str] = Counter()
    original = Gateway._call

    def counting(self: Gateway, method: str, path: str, **kwargs: Any) -> Any:
        calls[path.rsplit("/", 1)[-1]] += 1
        return original(self, method, path, **kwargs)

    base = len(kinds()) + 4  # workload kinds, pods, nodes, namespaces, events
    Gateway._call = counting  # type: ignore[method-assign]
    try:
        reconcile_once()
        assert sum(calls.values()) == base and "resourceslices" not in calls
        dra_flavors()
        calls.clear()
        reconcile_once()
    finally:
        Gateway._call = original  # type: ignore[method-assign]
    assert sum(calls.values()) == base + 3
    assert {k: calls[k] for k in ("resourceslices", "resourceclaims", "deviceclasses")} == {
        "resourceslices": 1,
        "resourceclaims": 1,
        "deviceclasses": 1,
    }


def test_a_kind_the_api_server_does_not_serve_lists_as_nothing(sim: KubeSim) -> None:
    """A member without DRA answers resource.k8s.io/v1 with a 404, as this kubesim (no
    Kueue) answers Kueue's kinds: a pass reads no device there instead of failing."""
    gw = get_gateway()
    assert gw.list_if_served("resource.k8s.io/v1", "ResourceSlice")
    assert gw.list_if_served("kueue.x-k8s.io/v1beta2", "ClusterQueue") == []
