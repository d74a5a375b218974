"""The reconciler through the real loop: why a cluster waits, quota drift, orphans, expiry."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterEvent, ClusterRequest
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tenants.models import GpuFlavor, Quota
from tests.clusters.engine.conftest import wait_for


def _roomy(tenant: Any) -> None:
    tenant.max_dev_clusters_per_user = 50
    tenant.max_dev_gpus_per_user = 50
    tenant.save()


def _l4_nodes() -> list[str]:
    nodes = get_gateway().list("v1", "Node", label_selector="nvidia.com/gpu.product=NVIDIA-L4")
    return sorted(n["metadata"]["name"] for n in nodes)


def test_a_cluster_waiting_for_nodes_says_why(worker: Any, alice: Any, acme: Any, l4: Any) -> None:
    # Three of the four L4 nodes are tainted for maintenance (free, but not for our pods).
    _roomy(acme)
    gw = get_gateway()
    for name in _l4_nodes()[1:]:
        node = gw.get("v1", "Node", name)
        taints = [*node["spec"].get("taints", []), {"key": "maintenance", "effect": "NoSchedule"}]
        gw.merge_patch("v1", "Node", name, {"spec": {"taints": taints}}, namespace="")
    cluster = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="blocked", kind="dev", flavor=l4, workers=2)
    )
    row = wait_for(
        lambda: ClusterRequest.objects.filter(
            pk=cluster.pk, state="provisioning", state_reason__contains="nodes are available"
        ).first(),
        what="a scheduling reason",
    )
    assert row.state_reason.startswith(
        "waiting for a node with a free l4: 0/11 nodes are available"
    )
    assert "untolerated taint" in row.state_reason


def test_admission_does_not_admit_what_the_cluster_cannot_place(
    worker: Any, alice: Any, acme: Any, l4: Any
) -> None:
    # The catalogue believes in 8 L4 nodes; the cluster (kubesim's demo fleet) has 4.
    _roomy(acme)
    l4.node_count = 8
    l4.save()
    Quota.objects.filter(tenant=acme, flavor=l4).update(gpus=8)
    wait_for(
        lambda: GpuFlavor.objects.filter(name="l4", observed_free_gpus=4).exists(),
        what="the reconciler to observe 4 free L4 GPUs",
    )
    cluster = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="too-big", kind="dev", flavor=l4, workers=6)
    )
    row = wait_for(
        lambda: ClusterRequest.objects.filter(pk=cluster.pk, queue_reason="capacity").first(),
        what="the capacity reason",
    )
    assert row.state == "queued" and not row.holds_gpus
    small = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="fits", kind="dev", flavor=l4, workers=4)
    )
    wait_for(lambda: ClusterRequest.objects.get(pk=small.pk).state == "ready", what="4 fit")
    assert ClusterRequest.objects.get(pk=cluster.pk).state == "queued"


def test_tenant_bundle_follows_quota_changes(worker: Any, alice: Any, acme: Any, h100: Any) -> None:
    _roomy(acme)
    services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="q", kind="dev", flavor=h100, workers=1)
    )
    gw = get_gateway()

    def gpu_hard() -> str | None:
        quotas = gw.list("v1", "ResourceQuota", namespace="gw-acme")
        return quotas[0]["spec"]["hard"].get("requests.nvidia.com/gpu") if quotas else None

    wait_for(lambda: gpu_hard() == "26", what="initial quota (16+8 H100, 2 L4)")
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=40, borrow_limit=0)
    wait_for(lambda: gpu_hard() == "42", what="quota mirrored after the change")


def test_orphans_are_deleted_and_expired_clusters_go(
    worker: Any, alice: Any, acme: Any, h100: Any
) -> None:
    _roomy(acme)
    cluster = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="short", kind="dev", flavor=h100, workers=1)
    )
    wait_for(lambda: ClusterRequest.objects.get(pk=cluster.pk).state == "ready", what="ready")
    gw = get_gateway()
    orphan = gw.get("ray.io/v1", "RayCluster", "short", "gw-acme")
    assert orphan is not None
    orphan["metadata"] = {
        "name": "stray",
        "namespace": "gw-acme",
        "labels": {**orphan["metadata"]["labels"], "gangway.dev/cluster-id": "999999"},
    }
    orphan.pop("status", None)
    gw.apply(orphan)
    wait_for(
        lambda: gw.get("ray.io/v1", "RayCluster", "stray", "gw-acme") is None, what="orphan gone"
    )

    soon = timezone.now() + timedelta(minutes=10)
    ClusterRequest.objects.filter(pk=cluster.pk).update(expires_at=soon)
    warning = wait_for(
        lambda: ClusterEvent.objects.filter(cluster=cluster, reason="expiry_warning").first(),
        what="the expiry warning",
    )
    assert "extend it" in warning.message and "in 9 min" in warning.message
    time.sleep(1.5)  # later passes do not warn again
    assert ClusterEvent.objects.filter(cluster=cluster, reason="expiry_warning").count() == 1
    services.cluster_extend(actor=alice, cluster=ClusterRequest.objects.get(pk=cluster.pk), hours=1)
    assert ClusterRequest.objects.get(pk=cluster.pk).expiry_warned_at is None

    ClusterRequest.objects.filter(pk=cluster.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    row = wait_for(
        lambda: ClusterRequest.objects.filter(pk=cluster.pk, state="deleted").first(),
        what="expired",
    )
    assert row.deletion_reason == "expired"
    assert ClusterEvent.objects.filter(cluster=row, to_state="deleting", reason="expired").exists()
    assert gw.get("ray.io/v1", "RayCluster", "short", "gw-acme") is None


def test_a_request_refused_for_capacity_is_admitted_once_the_clusters_ahead_are_ready(
    broker: Any, kubesim: Any, alice: Any, acme: Any, l4: Any
) -> None:
    """Admission counts an admitted or provisioning cluster's GPUs against the cluster's
    free ones (its pods may not be bound yet). The reconcile pass that moves it to ready
    stops that count, so it asks for an admission pass when a request waits for capacity:
    nothing else would (no create, and beat's backstop comes every 15 s)."""
    from clusters import tasks
    from clusters.rows import enqueue

    _roomy(acme)
    Quota.objects.filter(tenant=acme, flavor=l4).update(gpus=4)
    kubesim.cluster.startup_delay = 2.0  # bound pods start 2 s later: clusters provision
    tasks.reconcile()
    assert GpuFlavor.objects.get(name="l4").observed_free_gpus == 4
    first = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="first", kind="dev", flavor=l4, workers=3)
    )
    assert tasks.admission_pass() == [first.pk]
    tasks.provision_clusters([first.pk])
    tasks.reconcile()  # its 3 pods are bound, not yet running: 1 L4 free, 3 not yet placed
    assert ClusterRequest.objects.get(pk=first.pk).state == "provisioning"
    second = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="second", kind="dev", flavor=l4, workers=1)
    )
    assert tasks.admission_pass() == []
    assert ClusterRequest.objects.get(pk=second.pk).queue_reason == "capacity"

    broker.drain()
    wait_for(
        lambda: all(
            p["status"].get("phase") == "Running"
            for p in kubesim.list("pods", "gw-acme")
            if p["metadata"]["labels"].get("ray.io/cluster") == "first"
        ),
        what="the first cluster's pods running",
    )
    tasks.reconcile()
    assert ClusterRequest.objects.get(pk=first.pk).state == "ready"
    assert len(broker.tasks(enqueue.ADMISSION_PASS)) == 1
    assert tasks.admission_pass() == [second.pk]
