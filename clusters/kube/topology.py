"""What a production gang's topology wish becomes in its worker pods (docs/topology.md).

``required``: every worker needs a node in the domain (the ``topology_level`` label's value)
where the gang's other workers run — the first worker goes where it fits and the others
follow it, as kube-scheduler's inter-pod affinity has it. ``preferred``: the same term,
weighted, so that the scheduler packs the workers into as few domains as it can. Once
the built-in admission has pinned the gang to a domain (``topology_domain``), a node
affinity names it: required for ``required``, preferred for ``preferred``. A production
gang that asks no level but was *packed* into a domain (a ``topology_domain`` without a
``topology_level``) prefers that domain of its flavor's packing level, so that the scheduler
fills partly used domains first. Pure: the request's fields in, a pod ``affinity`` block
out.
"""

from __future__ import annotations

from typing import Any

from clusters.admission.topology_room import packing_level
from clusters.kube import labels as lbl

Manifest = dict[str, Any]
# The node type KubeRay labels a worker pod with (the head is "head").
NODE_TYPE = "ray.io/node-type"
PREFERRED_WEIGHT = 100  # the most a preferred term may weigh


def gang_affinity(cluster: Any) -> Manifest:
    """The ``podAffinity`` keeping ``cluster``'s workers in one domain of its
    ``topology_level``; empty when it asks for none."""
    level = str(getattr(cluster, "topology_level", "") or "")
    if not level:
        return {}
    term = {
        "labelSelector": {
            "matchLabels": {lbl.CLUSTER_ID: str(cluster.pk or 0), NODE_TYPE: "worker"}
        },
        "topologyKey": level,
    }
    if str(getattr(cluster, "topology_mode", "") or "required") == "preferred":
        rule: Manifest = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": PREFERRED_WEIGHT, "podAffinityTerm": term}
            ]
        }
    else:
        rule = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {"podAffinity": rule}


def _required(cluster: Any) -> bool:
    return str(getattr(cluster, "topology_mode", "") or "required") != "preferred"


def domain_expression(cluster: Any) -> Manifest:
    """The node selector requirement "in the domain admission pinned the gang to"; empty
    when it asks for no level or was pinned to none."""
    level = str(getattr(cluster, "topology_level", "") or "")
    domain = str(getattr(cluster, "topology_domain", "") or "")
    if not (level and domain):
        return {}
    return {"key": level, "operator": "In", "values": [domain]}


def pinned_affinity(cluster: Any, node_affinity: Manifest | None) -> Manifest:
    """``node_affinity`` (the pod's own, e.g. its GPU products) with the gang's domain
    added: to every required term (terms are alternatives, so each must name the
    domain), or as a preferred term of the greatest weight."""
    expression = domain_expression(cluster)
    out = dict(node_affinity or {})
    if not expression:
        return out
    if _required(cluster):
        key = "requiredDuringSchedulingIgnoredDuringExecution"
        terms = (out.get(key) or {}).get("nodeSelectorTerms") or [{}]
        out[key] = {
            "nodeSelectorTerms": [
                {**t, "matchExpressions": [*t.get("matchExpressions", []), expression]}
                for t in terms
            ]
        }
    else:
        key = "preferredDuringSchedulingIgnoredDuringExecution"
        out[key] = [
            *out.get(key, []),
            {"weight": PREFERRED_WEIGHT, "preference": {"matchExpressions": [expression]}},
        ]
    return out


def packed_affinity(node_affinity: Manifest | None, level: str, domain: str) -> Manifest:
    """``node_affinity`` with a preferred term (the greatest weight) for ``domain`` of
    ``level``: never required, since a gang that asked no level may run anywhere."""
    out = dict(node_affinity or {})
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    expression = {"key": level, "operator": "In", "values": [domain]}
    out[key] = [
        *out.get(key, []),
        {"weight": PREFERRED_WEIGHT, "preference": {"matchExpressions": [expression]}},
    ]
    return out


def keep_together(
    cluster: Any,
    worker_groups: list[Manifest],
    *,
    pin: bool = True,
    levels: tuple[str, ...] = (),
) -> None:
    """Give every worker group's pods the gang's :func:`gang_affinity` (if it asks one)
    and, once pinned and ``pin``, its domain (:func:`pinned_affinity`); a gang packed
    into a domain of its flavor's ``levels`` prefers it (:func:`packed_affinity`). Kueue
    pins its own way (its node selectors on the ungated pods): its ``topology_domain`` is
    only mirrored, and the template it admitted must not change under it."""
    together = gang_affinity(cluster)
    if not together:
        domain = str(getattr(cluster, "topology_domain", "") or "")
        level = packing_level(levels)
        if pin and domain and level:
            for group in worker_groups:
                pod = group["template"]["spec"]
                affinity = dict(pod.get("affinity", {}))
                affinity["nodeAffinity"] = packed_affinity(
                    affinity.get("nodeAffinity"), level, domain
                )
                pod["affinity"] = affinity
        return
    pinned = pin and bool(domain_expression(cluster))
    if pinned and _required(cluster):
        # The required node affinity alone keeps every worker in the one domain: the
        # pod affinity would add nothing but work for the scheduler, and, were the
        # domain's nodes taken by others, it would not lead workers elsewhere anyway.
        together = {}
    for group in worker_groups:
        pod = group["template"]["spec"]
        affinity = {**pod.get("affinity", {}), **together}
        if pinned:
            affinity["nodeAffinity"] = pinned_affinity(cluster, affinity.get("nodeAffinity"))
        pod["affinity"] = affinity
