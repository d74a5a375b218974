"""The scheduler objects of the platform's priority classes (docs/preemption.md
"Priority classes"): pure, rows in, dicts out.

Kueue: one WorkloadPriorityClass per class and request kind, named ``<class>-<kind>``,
whose value composes the class's value with the kind's (``value * KIND_SPAN + kind``):
classes order first, and within a class a production gang still outranks a dev cluster
as it did before classes (Kueue reads one number per workload, so the two orders can
only be kept by composing them). The kind's own WorkloadPriorityClasses (``dev``,
``prod``) stay for requests without a class; they are exactly the composition for value
0, so a request in a class of value 0 and one without a class rank alike.

KAI: one ``scheduling.k8s.io/v1`` PriorityClass per class, named ``gangway-<class>``, of
the class's value; a fractional workload names it in its ``priorityClassName`` label,
which KAI reads from the workload's top owner. Only dev clusters run under KAI, so no
kind composes in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from clusters.kube import labels as lbl

Manifest = dict[str, Any]

KUEUE_API = "kueue.x-k8s.io/v1beta2"
# The kinds' own priorities: production outranks dev (a prod gang may preempt dev
# clusters of its tenant under Kueue, never the reverse).
KIND_PRIORITIES = {"dev": 100, "prod": 1000}
# Wider than any kind's priority: a class's value times this, plus the kind's, keeps
# both orders. A class's value is within +-1,000,000 (tenants.models.PriorityClass), so
# the composition stays within Kueue's int32 (+-2,000,001,000 < 2**31).
KIND_SPAN = 2000
# KAI reads a workload's priority from the PriorityClass this label names.
KAI_PRIORITY_CLASS = "priorityClassName"
KAI_PREFIX = "gangway-"


def _labels() -> dict[str, str]:
    return {lbl.MANAGED_BY: lbl.MANAGER}


def kueue_class_name(class_name: str | None, kind: str) -> str:
    """The WorkloadPriorityClass of a request of ``kind`` in the class named
    ``class_name`` (``None``: no class, the kind's own)."""
    return f"{class_name}-{kind}" if class_name else str(kind)


def kueue_value(class_value: int, kind: str) -> int:
    """The composed priority of a request of ``kind`` in a class of ``class_value``."""
    return int(class_value) * KIND_SPAN + KIND_PRIORITIES[str(kind)]


def kueue_priority_classes(classes: Iterable[Any]) -> list[Manifest]:
    """The kinds' own WorkloadPriorityClasses, then one per class and kind, by name."""
    objects = [
        _workload_priority_class(kind, value, f"gangway {kind} Ray clusters")
        for kind, value in sorted(KIND_PRIORITIES.items())
    ]
    for pc in sorted(classes, key=lambda c: str(c.name)):
        for kind in sorted(KIND_PRIORITIES):
            objects.append(
                _workload_priority_class(
                    kueue_class_name(str(pc.name), kind),
                    kueue_value(int(pc.value), kind),
                    f"gangway priority class {pc.name} ({kind}): {pc.description}".strip(": "),
                )
            )
    return objects


def _workload_priority_class(name: str, value: int, description: str) -> Manifest:
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name, "labels": _labels()},
        "value": value,
        "description": description[:1000],
    }


def kai_class_name(class_name: str) -> str:
    """The Kubernetes PriorityClass of a platform class (KAI mode)."""
    return f"{KAI_PREFIX}{class_name}"


def kai_priority_classes(classes: Iterable[Any]) -> list[Manifest]:
    """One PriorityClass per platform class, by name. ``preemptionPolicy`` is ``Never``
    for a class that may not preempt: gangway's own admission decides preemption, and a
    pod of such a class must never evict another by itself."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": kai_class_name(str(pc.name)), "labels": _labels()},
            "value": int(pc.value),
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority" if pc.may_preempt else "Never",
            "description": f"gangway priority class {pc.name}: {pc.description}".strip(": "),
        }
        for pc in sorted(classes, key=lambda c: str(c.name))
    ]


def request_class_name(cluster: Any) -> str | None:
    """The name of a request's class (``None``: it has none). Reads the class row only
    when the request has one."""
    if getattr(cluster, "priority_class_id", None) is None:
        return None
    return str(cluster.priority_class.name)


def kueue_label(cluster: Any) -> str:
    """The ``kueue.x-k8s.io/priority-class`` label of a request's objects."""
    return kueue_class_name(request_class_name(cluster), str(cluster.kind))


def kai_labels(cluster: Any) -> dict[str, str]:
    """The KAI priority label of a fractional request's objects (none without a class)."""
    name = request_class_name(cluster)
    return {KAI_PRIORITY_CLASS: kai_class_name(name)} if name else {}
