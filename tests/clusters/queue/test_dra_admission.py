"""Admission for DRA flavors, against kubesim over HTTP: a MIG profile's quota is its own
(never whole GPUs, never more than its slices), and a request whose devices the cluster
cannot allocate waits with the capacity reason until a reconcile pass sees them free."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from clusters import tasks
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from kubesim import KubeSim
from tenants.models import GpuFlavor, Role
from tests.clusters.engine.conftest import wait_for
from tests.clusters.queue.dra_fleet import MIG_PROFILE, claim_devices, dra_flavors, dra_kubesim
from tests.factories import MembershipFactory, QuotaFactory, TenantFactory, UserFactory


@pytest.fixture
def sim(tmp_path: Path, settings: Any, broker: Any) -> Iterator[KubeSim]:
    with dra_kubesim(tmp_path, settings) as s:
        yield s


@pytest.fixture
def slices_tenant(sim: KubeSim) -> tuple[Any, Any, GpuFlavor, GpuFlavor]:
    """Initech: 7 GPUs of quota on h100-1g (its slices), none on h100; its admin ivy."""
    h100, _, mig = dra_flavors()
    tenant = TenantFactory(
        slug="initech",
        name="Initech",
        cpu_quota=10_000,
        memory_quota_gib=100_000,
        max_dev_clusters_per_user=50,
        max_dev_gpus_per_user=50,
    )
    QuotaFactory(tenant=tenant, flavor=mig, gpus=7, borrow_limit=0)
    QuotaFactory(tenant=tenant, flavor=h100, gpus=0, borrow_limit=0)
    ivy = UserFactory(username="ivy")
    MembershipFactory(tenant=tenant, user=ivy, role=Role.ADMIN)
    return tenant, ivy, h100, mig


def _dev(actor: Any, tenant: Any, name: str, flavor: GpuFlavor, workers: int = 1) -> Any:
    return services.cluster_request_create(
        actor=actor,
        tenant=tenant,
        spec=ClusterSpec(name=name, kind="dev", flavor=flavor, workers=workers),
    )


def test_a_mig_quota_is_counted_in_slices_never_as_whole_gpus(
    slices_tenant: tuple[Any, Any, GpuFlavor, GpuFlavor],
) -> None:
    tenant, ivy, h100, mig = slices_tenant
    tasks.reconcile()
    # Seven slices of quota buy no whole GPU.
    with pytest.raises(ValidationError) as refused:
        _dev(ivy, tenant, "whole", h100)
    assert "quota" in str(refused.value).lower()
    # Seven one-slice clusters fit the quota ...
    first = [_dev(ivy, tenant, f"slice-{i}", mig) for i in range(6)]
    two = _dev(ivy, tenant, "two", mig, workers=2)
    one = _dev(ivy, tenant, "seventh", mig)
    admitted = tasks.admission_pass()
    assert sorted(admitted) == sorted([c.pk for c in first] + [one.pk])
    # ... and the eighth slice waits for the tenant's quota, not for the fleet (112 free).
    row = ClusterRequest.objects.get(pk=two.pk)
    assert row.state == "queued" and row.queue_reason == "tenant_quota", row.queue_message
    assert "7" in row.queue_message
    held = ClusterRequest.objects.filter(holds_gpus=True)
    assert {(r.flavor.name, r.gpus) for r in held} == {("h100-1g", 1)}
    assert GpuFlavor.objects.get(name="h100-1g").observed_free_gpus == 112

    # When the first slice's cluster expires, the waiting one knows when it starts.
    soon = timezone.now() + timedelta(hours=2)
    ClusterRequest.objects.filter(pk__in=admitted).update(state="ready", expires_at=soon)
    ClusterRequest.objects.filter(pk=first[0].pk).update(expires_at=soon - timedelta(hours=1))
    tasks.admission_pass()
    row = ClusterRequest.objects.get(pk=two.pk)
    assert row.queue_eta is not None
    assert abs((row.queue_eta - soon).total_seconds()) < 120, row.queue_eta


def test_a_request_whose_slices_cannot_be_allocated_waits_for_capacity(
    sim: KubeSim, slices_tenant: tuple[Any, Any, GpuFlavor, GpuFlavor]
) -> None:
    tenant, ivy, _, mig = slices_tenant
    # Someone else's pods claim every 1g.10gb slice of both MIG nodes.
    for node in ("dra-mig-0", "dra-mig-1"):
        claim_devices(
            f"all-{node}", node, device_class="mig.nvidia.com", count=56, selector=MIG_PROFILE
        )
    wait_for(
        lambda: all(
            (sim.get("pods", "default", f"all-{n}") or {}).get("status", {}).get("phase")
            == "Running"
            for n in ("dra-mig-0", "dra-mig-1")
        ),
        what="the claiming pods running",
    )
    tasks.reconcile()
    assert GpuFlavor.objects.get(name="h100-1g").observed_free_gpus == 0
    # Whole GPUs of the device-plugin pool are untouched: a different flavor, still free.
    assert GpuFlavor.objects.get(name="h100").observed_free_gpus == 16

    waiting = _dev(ivy, tenant, "waits", mig)
    assert tasks.admission_pass() == []
    row = ClusterRequest.objects.get(pk=waiting.pk)
    assert row.state == "queued" and row.queue_reason == "capacity"
    assert row.queue_message == (
        "No room on the fleet: no h100-1g GPUs are free and this cluster needs 1."
    ), row.queue_message

    # One node's slices are given back: the next pass sees them and admits the request.
    gw = get_gateway()
    gw.delete("v1", "Pod", "all-dra-mig-0", namespace="default")
    gw.delete("resource.k8s.io/v1", "ResourceClaim", "all-dra-mig-0", namespace="default")
    wait_for(lambda: len(gw.list("resource.k8s.io/v1", "ResourceClaim")) == 1, what="a claim gone")
    tasks.reconcile()
    assert GpuFlavor.objects.get(name="h100-1g").observed_free_gpus == 56
    assert tasks.admission_pass() == [waiting.pk]
