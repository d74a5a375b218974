"""Reading a cluster's pods: is it ready, and if not, what is it waiting for?

A cluster is ``ready`` only when KubeRay says so, its head pod is ready and every
desired worker is; until then :func:`waiting_reason` says in plain words what the pods
wait for, from their conditions and the scheduler's FailedScheduling events, or why they
cannot start (``pod_trouble.py``).
"""

from __future__ import annotations

from typing import Any

from clusters.admission import counts_in_words
from clusters.engine.pod_trouble import pod_trouble
from clusters.models import ClusterKind, ClusterRequest


def pod_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def waiting_reason(
    cluster: ClusterRequest, pods: list[dict[str, Any]], events: dict[str, dict[str, Any]]
) -> str:
    """Why the cluster is not ready yet, in plain words."""
    if not pods:
        return "waiting for KubeRay to create the pods"
    trouble = pod_trouble(pods)
    if trouble:
        return trouble
    pending = [p for p in pods if (p.get("status") or {}).get("phase") in (None, "", "Pending")]
    for pod in pending:
        uid = (pod.get("metadata") or {}).get("uid", "")
        event = events.get(uid)
        if event is None:
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    event = {"message": cond.get("message", "")}
        if event is not None:
            role = (pod.get("metadata") or {}).get("labels", {}).get("ray.io/node-type", "pod")
            needs = "a CPU node" if role == "head" else f"a node with a free {cluster.flavor.name}"
            return f"waiting for {needs}: {event.get('message', '').strip()}"[:500]
    if pending:
        return f"{counts_in_words.count(len(pending), 'pod')} waiting to be scheduled"
    unready = [p for p in pods if not pod_ready(p)]
    if unready:
        return f"{counts_in_words.count(len(unready), 'pod')} starting"
    return "waiting for KubeRay to report the cluster ready"


def is_ready(cluster: ClusterRequest, rc: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
    status = rc.get("status") or {}
    heads = [p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "head"]
    workers = [
        p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "worker"
    ]
    desired = int(status.get("desiredWorkerReplicas", cluster.workers) or 0)
    want = (
        max(desired, cluster.min_workers or 0)
        if cluster.kind == ClusterKind.PROD
        else cluster.workers
    )
    return (
        status.get("state") == "ready"
        and any(pod_ready(p) for p in heads)
        and sum(1 for p in workers if pod_ready(p)) >= want
    )
