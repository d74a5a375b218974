"""clusters.kube.queues for DRA flavors: each device class is a resource of its own in
the ClusterQueues (quota on the flavor's own, none elsewhere), the objects validate
against Kueue's CRDs, and the deviceClassMappings stanza gangway needs is one Kueue
accepts."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from clusters.kube.queues import device_class_mappings, kueue_objects
from kubesim.operators.kueue.devices import parse_mappings
from tenants.models import GpuFlavor, Quota, Tenant
from tests.clusters.kube.schemas import validate_object
from tests.factories import GpuFlavorFactory, QuotaFactory


@pytest.fixture
def h100_1g(db: Any, acme: Any) -> Any:
    """A MIG flavor (1g.10gb slices, 56 per node) with an acme quota of 14 slices."""
    flavor = GpuFlavorFactory(
        name="h100-1g",
        gpus_per_node=56,
        device_mode="mig",
        mig_profile="1g.10gb",
    )
    QuotaFactory(tenant=acme, flavor=flavor, gpus=14, borrow_limit=7, lend_limit=3)
    return flavor


@pytest.fixture
def l4_dra(db: Any) -> Any:
    """A whole-GPU DRA flavor on gpu.nvidia.com (no quota)."""
    return GpuFlavorFactory(
        name="l4-dra",
        gpu_product="NVIDIA-L4",
        gpus_per_node=1,
        cpu_per_node=16,
        memory_per_node_gib=64,
        device_mode="dra",
    )


def _resources(queue: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    (group,) = queue["spec"]["resourceGroups"]
    return {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}


def test_each_device_class_is_a_resource_with_quota_on_its_own_flavor(
    acme: Any, h100: Any, l4: Any, h100_1g: Any, l4_dra: Any
) -> None:
    objects = kueue_objects([acme], GpuFlavor.objects.all(), Quota.objects.all())
    for obj in objects:
        validate_object(obj)  # Kueue's CRD: every flavor lists every covered resource
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    (group,) = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "gpu.nvidia.com",
        "mig.nvidia.com",
    ]
    flavors = _resources(queue)
    assert list(flavors) == ["h100", "h100-1g", "l4", "l4-dra", "ray-heads"]
    mig = flavors["h100-1g"]
    assert (mig["mig.nvidia.com"]["nominalQuota"], mig["mig.nvidia.com"]["borrowingLimit"]) == (
        "14",
        "7",
    )
    assert mig["mig.nvidia.com"]["lendingLimit"] == "3"
    assert mig["nvidia.com/gpu"]["nominalQuota"] == "0"  # its slices are not whole GPUs
    assert mig["nvidia.com/gpu"]["lendingLimit"] == "0"
    assert mig["gpu.nvidia.com"]["nominalQuota"] == "0"
    # 14 slices of a node's 56 bring a quarter of its 192 CPUs.
    assert mig["cpu"]["nominalQuota"] == "48"
    # An extended flavor's quota stays on nvidia.com/gpu; none on the device classes.
    assert flavors["h100"]["nvidia.com/gpu"]["nominalQuota"] == "16"
    assert flavors["h100"]["mig.nvidia.com"]["nominalQuota"] == "0"
    assert flavors["l4-dra"]["gpu.nvidia.com"]["nominalQuota"] == "0"  # no quota row
    assert {r["nominalQuota"] for n, r in flavors["ray-heads"].items() if "." in n} == {"0"}
    # The MIG flavor's ResourceFlavor keeps heads off its GPU nodes like any GPU flavor.
    (rf,) = [
        o for o in objects if o["kind"] == "ResourceFlavor" and o["metadata"]["name"] == "h100-1g"
    ]
    assert rf["spec"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]


def test_without_dra_flavors_the_queue_covers_what_it_did(acme: Any, h100: Any, l4: Any) -> None:
    (queue,) = [
        o
        for o in kueue_objects(Tenant.objects.all(), [h100, l4], Quota.objects.all())
        if o["kind"] == "ClusterQueue"
    ]
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == [
        "cpu",
        "memory",
        "nvidia.com/gpu",
    ]
    assert device_class_mappings([h100, l4]) == {"resources": {"deviceClassMappings": []}}


def test_the_mappings_gangway_needs_are_ones_kueue_accepts(
    h100: Any, h100_1g: Any, l4_dra: Any, capsys: Any
) -> None:
    stanza = device_class_mappings(GpuFlavor.objects.all())
    assert stanza["resources"]["deviceClassMappings"] == [
        {"name": "gpu.nvidia.com", "deviceClassNames": ["gpu.nvidia.com"]},
        {"name": "mig.nvidia.com", "deviceClassNames": ["mig.nvidia.com"]},
    ]
    # kubesim's Kueue checks a Configuration as Kueue does at start.
    assert parse_mappings(stanza) == {
        "gpu.nvidia.com": "gpu.nvidia.com",
        "mig.nvidia.com": "mig.nvidia.com",
    }
    call_command("kubecluster", "kueue-config")
    printed = capsys.readouterr().out
    assert "deviceClassMappings:" in printed and "- name: mig.nvidia.com" in printed
