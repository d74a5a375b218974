"""The preemption notice on a request's live pods (docs/preemption.md): while a request
has notice, each of its running pods carries ``gangway.dev/preemption-notice`` (the
deadline, RFC 3339 UTC) and ``gangway.dev/preemption-reason``; a reprieve takes them
off. The pods' downward-API volume shows them to the Ray processes as a file.

The live pods are patched rather than the RayCluster's or RayJob's pod templates: a
template change reaches only pods created after it (KubeRay does not roll a
RayCluster's pods when its template changes), and a RayJob's template is read once,
when its Ray cluster is created. Patching a pod's metadata restarts nothing.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from clusters.domain import preemption as pre
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest

KEYS = (pre.NOTICE_ANNOTATION, pre.REASON_ANNOTATION)


def wanted(cluster: ClusterRequest) -> dict[str, str] | None:
    """The annotations the request's pods should carry; None: none of the notice."""
    if cluster.notice_at is None or cluster.reclaim_after is None:
        return None
    deadline = cluster.reclaim_after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {pre.NOTICE_ANNOTATION: deadline, pre.REASON_ANNOTATION: cluster.notice_reason}


def sync(cluster: ClusterRequest, pods: list[dict[str, Any]], gw: Gateway) -> int:
    """Write (or take off) the notice on each pod that still runs; how many were patched.
    A pod that already says it is left alone, so a settled request costs no write."""
    want = wanted(cluster)
    patched = 0
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in (
            "Succeeded",
            "Failed",
        ):
            continue
        have = meta.get("annotations") or {}
        if want is not None:
            if all(have.get(k) == v for k, v in want.items()):
                continue
            body: dict[str, Any] = dict(want)
        else:
            if not any(k in have for k in KEYS):
                continue
            body = {k: None for k in KEYS}
        gw.merge_patch(
            "v1", "Pod", meta["name"], {"metadata": {"annotations": body}}, meta["namespace"]
        )
        patched += 1
    return patched
