"""What every Ray pod carries so its job can hear of a preemption (docs/preemption.md):
a downward-API volume showing the pod its own annotations (where the engine writes the
notice), and the environment naming the notice endpoint and the checkpoint to resume
from. Pure: rows in, dicts out.

The notice is written on the live pods, not on the RayCluster's or RayJob's pod
templates: a template change would reach only pods created after it, and the kubelet
refreshes a downward-API file when the pod's own metadata changes.
"""

from __future__ import annotations

from typing import Any

from clusters.domain import preemption as pre

Manifest = dict[str, Any]


def podinfo_volume() -> Manifest:
    """The downward-API volume with the pod's annotations as one file."""
    return {
        "name": pre.PODINFO_VOLUME,
        "downwardAPI": {
            "items": [{"path": pre.PODINFO_FILE, "fieldRef": {"fieldPath": "metadata.annotations"}}]
        },
    }


def podinfo_mount() -> Manifest:
    """Where a Ray container sees it (read only)."""
    return {"name": pre.PODINFO_VOLUME, "mountPath": pre.PODINFO_DIR, "readOnly": True}


def preemption_env(cluster: Any) -> list[Manifest]:
    """The notice endpoint (a saved request only: its token is its id's), the annotation
    file, and for a run resumed after a preemption the checkpoint it starts from."""
    env: list[Manifest] = [
        {"name": pre.PODINFO_ENV, "value": f"{pre.PODINFO_DIR}/{pre.PODINFO_FILE}"}
    ]
    if getattr(cluster, "pk", None):
        env.append({"name": pre.PREEMPTION_URL_ENV, "value": pre.preemption_url(cluster.pk)})
    resume = getattr(cluster, "resume_from", "") or ""
    if resume:
        env.append({"name": pre.RESUME_FROM_ENV, "value": str(resume)})
    return env


def add_notice_channel(pod_spec: Manifest, containers: list[Manifest], cluster: Any) -> None:
    """Give ``containers`` (of ``pod_spec``) the volume, its mount and the environment."""
    volumes = pod_spec.setdefault("volumes", [])
    if not any(v.get("name") == pre.PODINFO_VOLUME for v in volumes):
        volumes.append(podinfo_volume())
    env = preemption_env(cluster)
    for container in containers:
        container.setdefault("volumeMounts", []).append(podinfo_mount())
        container["env"] = [*(container.get("env") or []), *env]
