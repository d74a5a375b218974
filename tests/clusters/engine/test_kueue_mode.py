"""Kueue mode end to end: Kueue (emulated by kubesim) decides, the rows follow.

The control plane writes the ResourceFlavors, ClusterQueues, LocalQueues and priority
classes, labels each RayCluster with its queue, and takes admission, queue position and
reason from Kueue's Workloads and visibility API.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db.models import F

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterEvent, ClusterRequest, KubeCluster, UsageSpan
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from kubesim import KubeSim
from tenants.models import AuditEvent, Quota
from tests.clusters.engine.conftest import running_kubesim, wait_for


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with running_kubesim(tmp_path, settings, kueue=True) as sim:
        yield sim


def _row(pk: int) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(pk=pk)


def test_kueue_admits_queues_and_releases(
    worker: Any, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    # The member the upgrade makes of settings' cluster (a flush between transactional
    # tests removes the one the data migration wrote).
    home, _ = KubeCluster.objects.get_or_create(from_settings=True, defaults={"name": "default"})
    gw = get_gateway()
    small = services.cluster_request_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="kq-small", kind="prod", flavor=h100, workers=1),
    )
    wait_for(lambda: _row(small.pk).state == "ready", what="admitted by Kueue and ready")
    assert gw.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "gangway", "gw-acme") is not None
    rc = gw.get("ray.io/v1", "RayCluster", "kq-small", "gw-acme")
    assert rc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gangway"
    assert _row(small.pk).holds_gpus
    # Without MultiKueue, Kueue admits on the settings' member, where its Workload is.
    assert _row(small.pk).kube_cluster_id == home.pk
    # With one member no MultiKueue object is written and no queue runs its check.
    assert gw.list("kueue.x-k8s.io/v1beta2", "MultiKueueConfig") == []
    assert gw.list("kueue.x-k8s.io/v1beta2", "MultiKueueCluster") == []
    cq = gw.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "gw-acme")
    assert "admissionChecksStrategy" not in cq["spec"]

    # acme has 16 H100 and nobody in its cohort to borrow from: a 2-node prod cluster
    # (16 GPUs) must wait while the small one holds 8 (same priority: no preemption).
    big = services.cluster_request_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="kq-big", kind="prod", flavor=h100, workers=2),
    )
    waiting = wait_for(
        lambda: (
            ClusterRequest.objects.filter(pk=big.pk, queue_message__startswith="Kueue:")
            .exclude(queue_position=None)
            .first()
        ),
        what="Kueue's reason and position on the row",
    )
    assert waiting.state == "queued" and not waiting.holds_gpus
    assert waiting.queue_position == 1
    assert waiting.queue_reason in {"tenant_quota", "cohort_quota", "capacity"}

    services.cluster_delete(actor=alice, cluster=_row(small.pk))
    wait_for(lambda: _row(big.pk).state == "ready", timeout=90, what="big admitted once freed")

    services.cluster_suspend(actor=alice, cluster=_row(big.pk))
    wait_for(
        lambda: gw.get("ray.io/v1", "RayCluster", "kq-big", "gw-acme") is None,
        what="suspension deletes the RayCluster (it holds Kueue quota until deleted)",
    )
    services.cluster_resume(actor=alice, cluster=_row(big.pk))
    wait_for(lambda: _row(big.pk).state == "ready", timeout=90, what="ready after resume")


def _spans(pk: int) -> list[tuple[Decimal, bool]]:
    return [(s.gpus, s.ended_at is None) for s in UsageSpan.objects.filter(cluster_id=pk)]


def test_an_eviction_by_kueue_puts_the_cluster_back_in_the_queue(
    worker: Any, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    """Issue 10, item 15: Kueue preempts a running dev cluster for a prod one (prod
    outranks dev in the tenant's ClusterQueue). The dev row goes back to ``queued`` with
    Kueue's reason, its GPUs released and its usage span closed; once the prod cluster is
    gone Kueue admits it again and it is ready with a new span."""
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=16, borrow_limit=0)
    acme.max_dev_gpus_per_user = 16
    acme.save()
    dev = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(name="kq-dev", kind="dev", flavor=h100, workers=12)
    )
    wait_for(lambda: _row(dev.pk).state == "ready", timeout=90, what="dev ready")
    assert _spans(dev.pk) == [(Decimal(12), True)]

    prod = services.cluster_request_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="kq-prod", kind="prod", flavor=h100, workers=2),
    )
    wait_for(lambda: _row(dev.pk).state == "queued", timeout=90, what="dev evicted")
    evicted = _row(dev.pk)
    assert not evicted.holds_gpus and evicted.ready_at is None
    assert evicted.state_reason.startswith("Kueue evicted it (Preempted): Preempted to accommodate")
    assert _spans(dev.pk) == [(Decimal(12), False)]
    event = ClusterEvent.objects.filter(cluster_id=dev.pk, to_state="queued").last()
    assert event is not None and (event.from_state, event.reason) == ("ready", "Preempted")
    assert AuditEvent.objects.filter(action="cluster.evict", object_id=str(dev.pk)).exists()
    wait_for(lambda: _row(prod.pk).state == "ready", timeout=90, what="prod ready")
    # Only prod holds acme's GPUs now, and the dev row waits with Kueue's verdict.
    assert [c.name for c in ClusterRequest.objects.filter(holds_gpus=True)] == ["kq-prod"]
    waiting = wait_for(
        lambda: (
            ClusterRequest.objects.filter(pk=dev.pk, queue_message__contains="couldn't")
            .exclude(queue_position=None)
            .first()
        ),
        what="Kueue's pending reason on the evicted row",
    )
    assert waiting.queue_reason == "tenant_quota"

    services.cluster_delete(actor=alice, cluster=_row(prod.pk))
    wait_for(lambda: _row(dev.pk).state == "ready", timeout=90, what="dev admitted again")
    assert _spans(dev.pk) == [(Decimal(12), False), (Decimal(12), True)]
    moves = list(
        ClusterEvent.objects.filter(cluster_id=dev.pk)
        .exclude(from_state=F("to_state"))
        .values_list("to_state", flat=True)
    )
    assert moves[-4:] == ["queued", "admitted", "provisioning", "ready"]


def test_a_pods_ready_timeout_requeues_after_kueues_backoff(
    worker: Any, bob: Any, acme: Any, h100: Any, kubesim: KubeSim, monkeypatch: Any
) -> None:
    """The same for an eviction Kueue makes on its own (here through kubesim's admin
    knob): reason ``PodsReadyTimeout``, and Kueue queues it again after its backoff."""
    from kubesim.operators import kueue

    monkeypatch.setattr(kueue, "REQUEUE_BACKOFF_SECONDS", 3)
    dev = services.cluster_request_create(
        actor=bob, tenant=acme, spec=ClusterSpec(name="kq-slow", kind="dev", flavor=h100, workers=1)
    )
    wait_for(lambda: _row(dev.pk).state == "ready", timeout=90, what="ready")
    body = json.dumps({"namespace": "gw-acme", "name": "kq-slow", "reason": "PodsReadyTimeout"})
    request = urllib.request.Request(
        kubesim.url + "/_kubesim/kueue/evict", data=body.encode(), method="POST"
    )
    with urllib.request.urlopen(request) as answer:
        assert json.load(answer)["status"] == "evicted"
    wait_for(lambda: _row(dev.pk).state == "queued", what="requeued")
    event = ClusterEvent.objects.filter(cluster_id=dev.pk, to_state="queued").last()
    assert event is not None and event.reason == "PodsReadyTimeout"
    assert "Exceeded the PodsReady timeout" in event.message
    wait_for(lambda: _row(dev.pk).state == "ready", timeout=90, what="ready after the backoff")
    assert [open_ for _, open_ in _spans(dev.pk)] == [False, True]


def test_the_cohort_tree_is_written_as_kueue_cohorts_and_pruned(
    kubesim: KubeSim, root: Any, acme: Any, h100: Any
) -> None:
    """A cohort with a parent becomes a Cohort with ``spec.parentName`` beside the
    ClusterQueues that name it; once it has no parent again its Cohort is deleted, so
    that Kueue treats it as a root (applying it without the parent would not say so)."""
    from clusters.queue.kueue import ensure_queues, forget_queues
    from tenants import services as tenant_services
    from tenants.models import Cohort

    gw = get_gateway()
    tenant_services.cohort_set(actor=root, name=acme.cohort, parent="org")
    tenant_services.cohort_set(actor=root, name="serving", parent="org")
    forget_queues()
    assert ensure_queues(gw)
    found = {
        c["metadata"]["name"]: c["spec"].get("parentName")
        for c in gw.list("kueue.x-k8s.io/v1beta2", "Cohort")
    }
    assert found == {acme.cohort: "org", "serving": "org"}
    (cq,) = [
        q
        for q in gw.list("kueue.x-k8s.io/v1beta2", "ClusterQueue")
        if q["metadata"]["name"] == acme.namespace
    ]
    assert cq["spec"]["cohortName"] == acme.cohort

    tenant_services.cohort_delete(actor=root, cohort=Cohort.objects.get(name="serving"))
    tenant_services.cohort_set(actor=root, name=acme.cohort, parent="")
    assert ensure_queues(gw)  # the tables changed: written again, and pruned
    assert gw.list("kueue.x-k8s.io/v1beta2", "Cohort") == []
