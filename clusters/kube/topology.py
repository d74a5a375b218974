"""What a production gang's topology wish becomes in its worker pods (docs/topology.md).

``required``: every worker needs a node in the domain (the ``topology_level`` label's value)
where the gang's other workers run — the first worker goes where it fits and the others
follow it, as kube-scheduler's inter-pod affinity has it. ``preferred``: the same term,
weighted, so that the scheduler packs the workers into as few domains as it can. Pure:
the request's fields in, a pod ``affinity`` block out.
"""

from __future__ import annotations

from typing import Any

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


def keep_together(cluster: Any, worker_groups: list[Manifest]) -> None:
    """Give every worker group's pods the gang's :func:`gang_affinity` (if it asks one)."""
    together = gang_affinity(cluster)
    if not together:
        return
    for group in worker_groups:
        pod = group["template"]["spec"]
        pod["affinity"] = {**pod.get("affinity", {}), **together}
