"""Kueue mode end to end: Kueue (emulated by kubesim) decides, the rows follow.

The control plane writes the ResourceFlavors, ClusterQueues, LocalQueues and priority
classes, labels each RayCluster with its queue, and takes admission, queue position and
reason from Kueue's Workloads and visibility API.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters import services
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from tests.clusters.engine.conftest import wait_for


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    settings.QUEUE_MODE = "kueue"
    sim = KubeSim(fleet=None, port=0, startup_delay=0.0, kueue=True).start()
    sim.write_kubeconfig(str(tmp_path / "kubeconfig"))
    settings.KUBECONFIG = str(tmp_path / "kubeconfig")
    try:
        yield sim
    finally:
        sim.stop()


def _row(pk: int) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(pk=pk)


def test_kueue_admits_queues_and_releases(
    worker: Any, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    gw = get_gateway()
    small = services.cluster_request_create(
        actor=bob, tenant=acme, name="kq-small", kind="dev", flavor=h100, workers=1
    )
    wait_for(lambda: _row(small.pk).state == "ready", what="admitted by Kueue and ready")
    assert gw.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "gangway", "gw-acme") is not None
    rc = gw.get("ray.io/v1", "RayCluster", "kq-small", "gw-acme")
    assert rc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gangway"
    assert _row(small.pk).holds_gpus

    # acme has 16 H100 and nobody in its cohort to borrow from: a 2-node prod cluster
    # (16 GPUs) must wait while the small one holds one.
    big = services.cluster_request_create(
        actor=alice, tenant=acme, name="kq-big", kind="prod", flavor=h100, workers=2
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

    services.cluster_delete(actor=bob, cluster=_row(small.pk))
    wait_for(lambda: _row(big.pk).state == "ready", timeout=90, what="big admitted once freed")

    services.cluster_suspend(actor=alice, cluster=_row(big.pk))
    wait_for(
        lambda: gw.get("ray.io/v1", "RayCluster", "kq-big", "gw-acme") is None,
        what="suspension deletes the RayCluster (it holds Kueue quota until deleted)",
    )
    services.cluster_resume(actor=alice, cluster=_row(big.pk))
    wait_for(lambda: _row(big.pk).state == "ready", timeout=90, what="ready after resume")
