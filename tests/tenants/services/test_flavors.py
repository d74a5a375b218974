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
