"""A flavor's topology in Kueue mode and for KAI: the objects and annotations it becomes.

Kueue (Topology Aware Scheduling): a ``Topology`` per flavor with levels (named as the
flavor, its levels the flavor's, coarse to fine), the flavor's ResourceFlavor naming it
(``topologyName``), and on a production gang's worker pod templates the annotation of its
wish (``podset-required-topology`` or ``-preferred-topology`` with the level). Kueue lets a
pod set that asks nothing take no TAS flavor in a queue that also has other flavors (gangway's
head flavor is one), so the other worker groups on TAS flavors say ``-unconstrained-topology``.
Kueue then admits a gang only where its pods fit, writes the domains into the Workload's
``topologyAssignment`` (:func:`assigned_domain` reads the asked level's value back) and puts
each pod there by node selector.

KAI: a ``kai.scheduler`` ``Topology`` per flavor with levels, and on a production gang's
top owner the annotations KAI's pod grouper turns into its PodGroup's topology constraint.
Pure: rows in, dicts out (the one read, a node's labels, is the caller's function).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from clusters.kube import labels as lbl

Manifest = dict[str, Any]

KUEUE_API = "kueue.x-k8s.io/v1beta2"
KAI_TOPOLOGY_API = "kai.scheduler/v1alpha1"
KUEUE_ASK = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
}
KUEUE_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_ASK = {
    "required": "kai.scheduler/topology-required-placement",
    "preferred": "kai.scheduler/topology-preferred-placement",
}
HOSTNAME = "kubernetes.io/hostname"


def levels_of(flavor: Any) -> list[str]:
    """A flavor's topology levels, coarse to fine (none: it has no topology)."""
    return [str(level) for level in (getattr(flavor, "topology", None) or [])]


def topology_name(flavor: Any) -> str:
    """The Topology (Kueue's and KAI's) of a flavor is named as the flavor."""
    return str(flavor.name)


def _topology(api_version: str, flavor: Any) -> Manifest:
    return {
        "apiVersion": api_version,
        "kind": "Topology",
        "metadata": {"name": topology_name(flavor), "labels": {lbl.MANAGED_BY: lbl.MANAGER}},
        "spec": {"levels": [{"nodeLabel": key} for key in levels_of(flavor)]},
    }


def kueue_topologies(flavors: Iterable[Any]) -> list[Manifest]:
    """Kueue's ``Topology`` of every flavor with levels, by flavor name."""
    return [
        _topology(KUEUE_API, f) for f in sorted(flavors, key=lambda f: str(f.name)) if levels_of(f)
    ]


def kai_topologies(flavors: Iterable[Any]) -> list[Manifest]:
    """KAI's ``Topology`` of every flavor with levels, by flavor name."""
    return [
        _topology(KAI_TOPOLOGY_API, f)
        for f in sorted(flavors, key=lambda f: str(f.name))
        if levels_of(f)
    ]


def with_topology(resource_flavor: Manifest, flavor: Any) -> Manifest:
    """``resource_flavor`` naming the flavor's Topology when it has levels. (Kueue wants
    ``nodeLabels`` on a TAS flavor: gangway's carry the GPU product.)"""
    if levels_of(flavor):
        resource_flavor["spec"]["topologyName"] = topology_name(flavor)
    return resource_flavor


def mark_worker_groups(cluster: Any, groups: list[Manifest], accepted: list[Any]) -> None:
    """Kueue mode: the topology annotation on every worker group template whose pods may
    take a TAS flavor: the request's wish, or (it asks none) unconstrained when every flavor
    it accepts is a TAS flavor. A request accepting TAS and other flavors alike that asks
    nothing gets none: Kueue then admits it on the others only."""
    level = str(getattr(cluster, "topology_level", "") or "")
    mode = str(getattr(cluster, "topology_mode", "") or "required")
    if level:
        notes = {KUEUE_ASK.get(mode, KUEUE_ASK["required"]): level}
    elif accepted and all(levels_of(f) for f in accepted):
        notes = {KUEUE_UNCONSTRAINED: "true"}
    else:
        return
    for group in groups:
        meta = group["template"].setdefault("metadata", {})
        meta["annotations"] = {**meta.get("annotations", {}), **notes}


def kai_annotations(cluster: Any, flavor: Any) -> dict[str, str]:
    """KAI: the annotations of a gang's top owner that ask its wish of ``flavor``'s
    Topology (none when it asks no level, or the flavor has no topology)."""
    level = str(getattr(cluster, "topology_level", "") or "")
    if not level or level not in levels_of(flavor):
        return {}
    mode = str(getattr(cluster, "topology_mode", "") or "required")
    return {
        KAI_TOPOLOGY: topology_name(flavor),
        KAI_ASK.get(mode, KAI_ASK["required"]): level,
    }


def _domains(assignment: Manifest) -> list[tuple[list[str], int]]:
    """(values per level, pods) of each domain of a v1beta2 ``topologyAssignment``:
    ``slices`` whose values may be ``universal`` or ``individual`` roots with a common
    ``prefix``/``suffix``."""
    out: list[tuple[list[str], int]] = []
    for part in assignment.get("slices") or []:
        n = int(part.get("domainCount") or 0)
        columns: list[list[str]] = []
        for level in part.get("valuesPerLevel") or []:
            if "universal" in level:
                columns.append([str(level["universal"])] * n)
                continue
            each = level.get("individual") or {}
            pre, suf = str(each.get("prefix") or ""), str(each.get("suffix") or "")
            columns.append([f"{pre}{root}{suf}" for root in each.get("roots") or []])
        counts = part.get("podCounts") or {}
        per = counts.get("individual") or [counts.get("universal", 1)] * n
        for i in range(n):
            out.append(([col[i] for col in columns if i < len(col)], int(per[i])))
    return out


def assigned_domain(
    workload: Manifest, level: str, node_labels: Callable[[str], dict[str, str]]
) -> str:
    """The one domain of ``level`` Kueue placed the Workload's pods in: the level's value
    in its ``topologyAssignment`` (read from the nodes, ``node_labels``, when Kueue names
    only hosts); "" when it placed none by topology or spread them over several
    (``preferred``), which pins the gang to no one domain."""
    if not level:
        return ""
    admission = (workload.get("status") or {}).get("admission") or {}
    found: set[str] = set()
    for psa in admission.get("podSetAssignments") or []:
        assignment = psa.get("topologyAssignment")
        if not assignment:
            continue
        levels = [str(k) for k in assignment.get("levels") or []]
        for values, _ in _domains(assignment):
            if level in levels:
                found.add(values[levels.index(level)])
            elif levels == [HOSTNAME] and values:
                found.add(str(node_labels(values[0]).get(level, "")))
            else:
                found.add("")
    return found.pop() if len(found) == 1 else ""
