"""Kueue's visibility API: the pending Workloads of a LocalQueue or a ClusterQueue.

``GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/{lq}/pendingworkloads``
and ``.../clusterqueues/{cq}/pendingworkloads`` answer a ``PendingWorkloadsSummary``: the
Workloads in admission order with ``positionInClusterQueue`` and ``positionInLocalQueue``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.operators.kueue.admission import pending_by_cq
from kubesim.operators.kueue.common import CQ, LQ, VIS
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


def pending_workloads(cluster: ClusterView, method: str, path: str) -> dict[str, Any]:
    """``.../localqueues/{lq}/pendingworkloads`` and ``.../clusterqueues/{cq}/...``."""
    parts = [p for p in path.split("/") if p]
    if method != "GET" or len(parts) < 3 or parts[1] != VIS:
        raise errors.method_not_allowed()
    rest = parts[3:]
    if not cluster.kueue_enabled:
        raise errors.ApiError(
            404,
            "NotFound",
            "the server could not find the requested resource (Kueue emulation is off)",
        )
    pending = pending_by_cq(cluster)
    if (
        len(rest) == 5
        and rest[0] == "namespaces"
        and rest[2] == "localqueues"
        and rest[4] == "pendingworkloads"
    ):
        ns, lq_name = rest[1], rest[3]
        lq = cluster.store.get(LQ, ns, lq_name)
        if lq is None:
            raise errors.not_found("localqueues", VIS, lq_name)
        cq_name = get_path(lq, "spec", "clusterQueue", default="")
        items = [
            i
            for i in _summary(pending.get(cq_name, []))
            if i["metadata"]["namespace"] == ns and i["localQueueName"] == lq_name
        ]
    elif len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
        if cluster.store.get(CQ, "", rest[1]) is None:
            raise errors.not_found("clusterqueues", VIS, rest[1])
        items = _summary(pending.get(rest[1], []))
    else:
        raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"{VIS}/v1beta2",
        "metadata": {},
        "items": items,
    }


def _summary(queue: list[Obj]) -> list[dict[str, Any]]:
    """``PendingWorkload`` items for a queue in admission order, with their positions."""
    per_lq: Counter[tuple[str, str]] = Counter()
    items = []
    for pos, wl in enumerate(queue):
        lq_key = (wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))
        items.append(
            {
                "metadata": {
                    "name": wl["metadata"]["name"],
                    "namespace": wl["metadata"]["namespace"],
                    "creationTimestamp": wl["metadata"]["creationTimestamp"],
                    "ownerReferences": wl["metadata"].get("ownerReferences", []),
                },
                "priority": int(wl["spec"].get("priority") or 0),
                "localQueueName": lq_key[1],
                "positionInClusterQueue": pos,
                "positionInLocalQueue": per_lq[lq_key],
            }
        )
        per_lq[lq_key] += 1
    return items
