"""tenants.services.flavors: the GPU catalogue, changed by platform admins only, its
names fixed, a flavor in use never removed."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent, GpuFlavor
from tenants.services import flavor_create, flavor_delete, flavor_update

A100: dict[str, Any] = {
    "name": "a100",
    "gpu_product": "NVIDIA-A100",
    "gpus_per_node": 8,
    "cpu_per_node": 96,
    "memory_per_node_gib": 1024,
}


def test_a_platform_admin_adds_a_flavor_and_a_second_of_the_same_name_is_refused(
    root: Any,
) -> None:
    flavor_create(actor=root, **A100)
    assert GpuFlavor.objects.get(name="a100").gpus_per_node == 8
    assert AuditEvent.objects.get(action="flavor.create").data["gpu_product"] == "NVIDIA-A100"
    with pytest.raises(ValidationError) as refused:
        flavor_create(actor=root, **A100)
    assert "name" in refused.value.message_dict
    assert GpuFlavor.objects.filter(name="a100").count() == 1


def test_a_change_is_audited_before_and_after_and_the_name_never_changes(
    root: Any, h100: Any
) -> None:
    flavor_update(actor=root, flavor=h100, changes={"node_count": 9})
    assert GpuFlavor.objects.get(pk=h100.pk).node_count == 9
    event = AuditEvent.objects.get(action="flavor.update")
    assert event.data["after"] == {"node_count": 9}
    assert event.data["before"]["node_count"] != 9
    with pytest.raises(ValidationError) as renamed:
        flavor_update(actor=root, flavor=h100, changes={"name": "h200"})
    assert "name" in renamed.value.message_dict


def test_a_flavor_named_by_a_quota_stays_and_an_unused_one_goes(
    root: Any, acme: Any, h100: Any
) -> None:
    with pytest.raises(ServiceConflict, match="quota"):
        flavor_delete(actor=root, flavor=h100)
    spare = flavor_create(actor=root, **A100)
    flavor_delete(actor=root, flavor=spare)
    assert not GpuFlavor.objects.filter(name="a100").exists()
    assert GpuFlavor.objects.filter(pk=h100.pk).exists()


def test_a_tenant_admin_changes_no_flavor(alice: Any, h100: Any) -> None:
    with pytest.raises(PermissionDenied):
        flavor_update(actor=alice, flavor=h100, changes={"node_count": 1})


H100_MIG: dict[str, Any] = {
    "gpu_product": "NVIDIA-H100-80GB-HBM3",
    "gpus_per_node": 56,  # 8 GPUs x 7 slices
    "cpu_per_node": 192,
    "memory_per_node_gib": 1800,
    "device_mode": "mig",
}


def test_under_kueue_a_second_mig_profile_on_the_same_class_and_nodes_is_refused(
    root: Any, settings: Any
) -> None:
    settings.QUEUE_MODE = "kueue"
    flavor_create(actor=root, name="h100-1g", mig_profile="1g.10gb", **H100_MIG)
    with pytest.raises(ValidationError) as refused:
        flavor_create(actor=root, name="h100-3g", mig_profile="3g.40gb", **H100_MIG)
    (message,) = refused.value.message_dict["mig_profile"]
    assert "h100-1g already claims mig.nvidia.com devices" in message
    assert "kubernetes-sigs/kueue#10108" in message
    assert not GpuFlavor.objects.filter(name="h100-3g").exists()
    # Nor may an extended flavor on those nodes become one (and it stays as it was).
    plain = flavor_create(actor=root, name="h100-x", **{**H100_MIG, "device_mode": "extended"})
    with pytest.raises(ValidationError, match="kueue#10108"):
        flavor_update(
            actor=root, flavor=plain, changes={"device_mode": "mig", "mig_profile": "2g.20gb"}
        )
    assert GpuFlavor.objects.get(pk=plain.pk).device_mode == "extended"
    # Kueue tells flavors apart by their nodes: another product, or another class, is fine.
    flavor_create(
        actor=root, name="a100-1g", mig_profile="1g.10gb", **{**H100_MIG, "gpu_product": "A100"}
    )
    flavor_create(actor=root, name="h100-dra", **{**H100_MIG, "device_mode": "dra"})
    # The flavor itself may change (its own row is no clash).
    flavor_update(
        actor=root, flavor=GpuFlavor.objects.get(name="h100-1g"), changes={"node_count": 2}
    )


def test_the_built_in_queue_keeps_mig_profiles_apart_itself(root: Any, settings: Any) -> None:
    settings.QUEUE_MODE = "builtin"
    flavor_create(actor=root, name="h100-1g", mig_profile="1g.10gb", **H100_MIG)
    flavor_create(actor=root, name="h100-3g", mig_profile="3g.40gb", **H100_MIG)
    assert GpuFlavor.objects.filter(device_mode="mig").count() == 2
