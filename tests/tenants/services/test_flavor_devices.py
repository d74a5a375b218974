"""How a flavor's GPUs are requested (tenants.models.DeviceMode): the extended resource,
a DRA device class with a CEL selector, or MIG partitions of one profile. Every bad
combination is refused naming its field, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from clusters.domain.shapes import flavor_spec
from tenants.models import GpuFlavor
from tenants.services import flavor_create, flavor_update

H100_MIG: dict[str, Any] = {
    "name": "h100-1g",
    "gpu_product": "NVIDIA-H100-80GB-HBM3",
    "gpus_per_node": 56,
    "cpu_per_node": 192,
    "memory_per_node_gib": 1800,
    "device_mode": "mig",
    "mig_profile": "1g.10gb",
}


def test_a_mig_flavor_claims_partitions_of_its_profile_from_mig_nvidia_com(root: Any) -> None:
    flavor = flavor_create(actor=root, **H100_MIG)
    assert flavor.uses_dra and flavor.dra_device_class == "mig.nvidia.com"
    assert flavor.dra_selectors == ['device.attributes["gpu.nvidia.com"].profile == "1g.10gb"']
    assert flavor.devices_in_words == "MIG 1g.10gb partitions (DRA, mig.nvidia.com)"
    spec = flavor_spec(flavor)
    assert spec.uses_dra and spec.device_class == "mig.nvidia.com"
    assert spec.mig_profile == "1g.10gb" and spec.gpus_per_node == 56


def test_a_dra_flavor_adds_its_own_selector_and_an_extended_one_has_none(
    root: Any, h100: Any
) -> None:
    selector = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
    flavor = flavor_create(
        actor=root,
        name="h100-dra",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpus_per_node=8,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        device_mode="dra",
        device_selector=selector,
    )
    assert flavor.dra_device_class == "gpu.nvidia.com"
    assert flavor.dra_selectors == [selector]
    assert flavor.devices_in_words == "whole GPUs (DRA, gpu.nvidia.com)"
    assert not h100.uses_dra and h100.dra_selectors == [] and flavor_spec(h100).device_class == ""


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"mig_profile": ""}, "mig_profile", "names the profile"),
        ({"mig_profile": "9g.10gb"}, "mig_profile", "A MIG profile such as 1g.10gb"),
        ({"device_mode": "dra"}, "mig_profile", "Only a MIG flavor"),
        (
            {"device_mode": "extended", "mig_profile": "", "device_class": "gpu.nvidia.com"},
            "device_class",
            "extended-resource flavor requests nvidia.com/gpu",
        ),
        ({"device_class": "Not A Class"}, "device_class", "A DeviceClass name"),
        ({"sharing": True}, "sharing", "KAI's fractional GPUs"),
        ({"device_selector": "device.attributes[ ==="}, "device_selector", "does not compile"),
        ({"device_selector": "node.name == 'x'"}, "device_selector", "names 'node'"),
        ({"device_mode": "tpu"}, "device_mode", "not a valid choice"),
    ],
)
def test_bad_device_facts_are_refused_naming_the_field_and_nothing_is_written(
    root: Any, changes: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        flavor_create(actor=root, **{**H100_MIG, **changes})
    assert field in refused.value.message_dict, refused.value.message_dict
    assert words in " ".join(refused.value.message_dict[field])
    assert not GpuFlavor.objects.filter(name="h100-1g").exists()


def test_a_flavor_turns_to_dra_and_back_and_a_bad_change_leaves_it_as_it_was(
    root: Any, h100: Any
) -> None:
    flavor_update(actor=root, flavor=h100, changes={"device_mode": "dra"})
    assert GpuFlavor.objects.get(pk=h100.pk).uses_dra
    with pytest.raises(ValidationError):
        flavor_update(actor=root, flavor=h100, changes={"device_selector": "1 +"})
    assert GpuFlavor.objects.get(pk=h100.pk).device_selector == ""
    again = GpuFlavor.objects.get(pk=h100.pk)
    flavor_update(actor=root, flavor=again, changes={"device_mode": "extended"})
    assert not GpuFlavor.objects.get(pk=h100.pk).uses_dra
