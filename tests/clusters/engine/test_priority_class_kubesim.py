"""Priority classes on a (simulated) cluster, over HTTP: in Kueue mode the platform's
classes become WorkloadPriorityClasses that Kueue admits by and the RayCluster names its
class; in KAI mode they become Kubernetes PriorityClasses a fractional cluster names."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, KubeCluster
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from kubesim import KubeSim
from tenants.models import PriorityClass
from tests.clusters.engine.conftest import running_kubesim, wait_for

WPC = ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass")
K8S_PC = ("scheduling.k8s.io/v1", "PriorityClass")


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any, request: Any) -> Iterator[KubeSim]:
    kai = "kai" in request.node.name
    with running_kubesim(tmp_path, settings, kueue=not kai, kai=kai) as sim:
        yield sim


def _classes() -> tuple[PriorityClass, PriorityClass]:
    normal, _ = PriorityClass.objects.get_or_create(
        name="normal", defaults={"value": 0, "is_default": True}
    )
    urgent, _ = PriorityClass.objects.update_or_create(
        name="urgent", defaults={"value": 1000, "may_preempt": True}
    )
    return normal, urgent


def test_kueue_admits_a_request_in_its_class(worker: Any, alice: Any, acme: Any, h100: Any) -> None:
    KubeCluster.objects.get_or_create(from_settings=True, defaults={"name": "default"})
    _normal, urgent = _classes()
    gw = get_gateway()
    made = services.cluster_request_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(
            name="pc-urgent", kind="prod", flavor=h100, workers=1, priority_class=urgent
        ),
    )
    assert made.priority_class == urgent
    wait_for(
        lambda: ClusterRequest.objects.unscoped().get(pk=made.pk).state == "ready",
        what="admitted by Kueue in its class and ready",
    )
    written = {o["metadata"]["name"]: o["value"] for o in gw.list(*WPC)}
    assert written["urgent-prod"] == 1000 * 2000 + 1000
    assert written["urgent-dev"] == 1000 * 2000 + 100
    assert written["normal-prod"] == written["prod"] == 1000
    rc = gw.get("ray.io/v1", "RayCluster", "pc-urgent", "gw-acme")
    assert rc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "urgent-prod"


def test_kai_gets_priority_classes_a_fractional_cluster_names(
    worker: Any, bob: Any, acme: Any, l4: Any
) -> None:
    KubeCluster.objects.get_or_create(from_settings=True, defaults={"name": "default"})
    normal, _urgent = _classes()
    gw = get_gateway()
    made = services.cluster_request_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(name="pc-frac", flavor=l4, workers=1, gpu_fraction=Decimal("0.5")),
    )
    assert made.priority_class == normal  # named none: the default
    rc = wait_for(
        lambda: gw.get("ray.io/v1", "RayCluster", "pc-frac", "gw-acme"), what="its RayCluster"
    )
    assert rc["metadata"]["labels"]["priorityClassName"] == "gangway-normal"
    assert rc["metadata"]["labels"]["kai.scheduler/queue"] == "gw-acme"
    written = {o["metadata"]["name"]: o for o in gw.list(*K8S_PC)}
    assert written["gangway-normal"]["value"] == 0
    assert written["gangway-urgent"]["value"] == 1000
    assert written["gangway-urgent"]["preemptionPolicy"] == "PreemptLowerPriority"
