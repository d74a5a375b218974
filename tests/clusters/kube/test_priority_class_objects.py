"""The scheduler objects of the platform's priority classes: Kueue WorkloadPriorityClasses
(class and kind composed) and KAI's Kubernetes PriorityClasses validate, keep both
orders, and requests' objects name them by label."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from clusters.kinds.raycluster.manifests import raycluster
from clusters.kube import labels as lbl
from clusters.kube.priority_classes import (
    KAI_PRIORITY_CLASS,
    kai_priority_classes,
    kueue_priority_classes,
)
from clusters.kube.queues import kueue_objects
from tenants.models import GpuFlavor, PriorityClass, Quota, Tenant
from tests.clusters.kube.schemas import validate_object

pytestmark = pytest.mark.django_db


@pytest.fixture
def classes() -> list[PriorityClass]:
    PriorityClass.objects.all().delete()
    return [
        PriorityClass.objects.create(name="low", value=-100),
        PriorityClass.objects.create(name="normal", value=0, is_default=True),
        PriorityClass.objects.create(name="urgent", value=1_000_000, may_preempt=True),
        PriorityClass.objects.create(name="floor", value=-1_000_000, description="x" * 200),
    ]


def test_kueue_gets_a_class_per_platform_class_and_kind(classes: Any, acme: Any) -> None:
    objects = kueue_objects(
        Tenant.objects.all(), GpuFlavor.objects.all(), Quota.objects.all(), platform_classes=classes
    )
    wpcs = {
        o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "WorkloadPriorityClass"
    }
    for obj in objects:
        validate_object(obj)
    assert wpcs["dev"] == 100 and wpcs["prod"] == 1000  # requests without a class
    assert wpcs["normal-dev"] == wpcs["dev"] and wpcs["normal-prod"] == wpcs["prod"]
    assert wpcs["urgent-prod"] == 2_000_001_000 < 2**31
    assert wpcs["floor-dev"] == -1_999_999_900 > -(2**31)
    # Classes order first; within a class production outranks dev.
    ranked = sorted(classes, key=lambda c: c.value)
    for lower, higher in pairwise(ranked):
        assert wpcs[f"{lower.name}-prod"] < wpcs[f"{higher.name}-dev"]
    for pc in classes:
        assert wpcs[f"{pc.name}-dev"] < wpcs[f"{pc.name}-prod"]
    assert len(kueue_priority_classes([])) == 2


def test_kai_gets_a_kubernetes_priority_class_per_platform_class(classes: Any) -> None:
    objects = kai_priority_classes(classes)
    for obj in objects:
        validate_object(obj)
    by_name = {o["metadata"]["name"]: o for o in objects}
    assert set(by_name) == {"gangway-low", "gangway-normal", "gangway-urgent", "gangway-floor"}
    assert by_name["gangway-urgent"]["value"] == 1_000_000
    assert by_name["gangway-urgent"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert by_name["gangway-low"]["preemptionPolicy"] == "Never"
    assert not any(o["globalDefault"] for o in objects)


def test_requests_objects_name_their_class(shapes_by_name: Any, classes: Any) -> None:
    urgent = classes[2]
    for shape, kind in (("dev-kueue", "dev"), ("prod-kueue", "prod")):
        cluster, kwargs = shapes_by_name[shape]
        assert raycluster(cluster, **kwargs)["metadata"]["labels"][lbl.KUEUE_PRIORITY_CLASS] == kind
        cluster.priority_class = urgent
        labels = raycluster(cluster, **kwargs)["metadata"]["labels"]
        assert labels[lbl.KUEUE_PRIORITY_CLASS] == f"urgent-{kind}"
    fractional, kwargs = shapes_by_name["fractional"]
    assert KAI_PRIORITY_CLASS not in raycluster(fractional, **kwargs)["metadata"]["labels"]
    fractional.priority_class = urgent
    obj = raycluster(fractional, **kwargs)
    assert obj["metadata"]["labels"][KAI_PRIORITY_CLASS] == "gangway-urgent"
    validate_object(obj)
