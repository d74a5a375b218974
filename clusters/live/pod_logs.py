"""A cluster's pod logs: the head's and each worker's, through ``pods/log``.

The API (``GET .../clusters/{name}/logs/?pod=&container=&tail=&limit_bytes=``) and the
cluster page's live tail both read through :func:`pod_log`. Bounded like a job's log
(:class:`clusters.live.log_bounds.LogBounds`: lines and bytes), so a chatty worker cannot make
the control plane read or send megabytes. Only the cluster's own pods can be read: the
pod named must carry the cluster's ``ray.io/cluster`` label in the tenant's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError

from clusters.kube.connection import gateway_of
from clusters.kube.gateway import KubeError, PermanentKubeError
from clusters.live.log_bounds import LogBounds, bounded
from clusters.models import ClusterRequest

_POD_NAME_MAX = 253


@dataclass(frozen=True)
class PodInfo:
    """One pod of the cluster, as the log viewer lists it."""

    name: str
    role: str  # "head" or "worker"
    group: str
    phase: str
    containers: list[str]


@dataclass(frozen=True)
class PodLog:
    """What was read: the pod and container, the text and whether it was cut, the pods
    there are to choose from, and ``message`` when there is no text (in plain words)."""

    pod: str
    container: str
    text: str
    truncated: bool
    message: str
    pods: list[PodInfo] = field(default_factory=list)


def _info(pod: Mapping[str, Any]) -> PodInfo:
    labels = pod.get("metadata", {}).get("labels") or {}
    return PodInfo(
        name=pod["metadata"]["name"],
        role=labels.get("ray.io/node-type", ""),
        group=labels.get("ray.io/group", ""),
        phase=(pod.get("status") or {}).get("phase", ""),
        containers=[c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []],
    )


def cluster_pods(cluster: ClusterRequest) -> list[PodInfo]:
    """The cluster's pods, the head first, then workers by name."""
    pods = gateway_of(cluster).list(
        "v1", "Pod", namespace=cluster.namespace, label_selector=f"ray.io/cluster={cluster.name}"
    )
    found = [_info(p) for p in pods]
    return sorted(found, key=lambda p: (p.role != "head", p.name))


def parse_choice(params: Mapping[str, Any]) -> tuple[str, str]:
    """``pod`` and ``container`` from query parameters (empty: the head, its container)."""
    pod = str(params.get("pod") or "")
    container = str(params.get("container") or "")
    errors = {}
    if len(pod) > _POD_NAME_MAX:
        errors["pod"] = "A pod name has at most 253 characters."
    if len(container) > 63:
        errors["container"] = "A container name has at most 63 characters."
    if errors:
        raise ValidationError(errors)
    return pod, container


def pod_log(cluster: ClusterRequest, *, pod: str, container: str, bounds: LogBounds) -> PodLog:
    """The log of one of the cluster's pods (the head when ``pod`` is empty)."""
    try:
        pods = cluster_pods(cluster)
    except KubeError as exc:
        return PodLog(
            pod, container, "", False, f"The Kubernetes API did not answer: {exc.message}"
        )
    if not pods:
        return PodLog(pod, container, "", False, f"{cluster.name} has no pods now.", pods)
    chosen = next((p for p in pods if p.name == pod), None) if pod else pods[0]
    if chosen is None:
        return PodLog(
            pod,
            container,
            "",
            False,
            f"{pod!r} is not a pod of {cluster.name}; choose one of: "
            + ", ".join(p.name for p in pods),
            pods,
        )
    container = container or (chosen.containers[0] if chosen.containers else "")
    if container not in chosen.containers:
        return PodLog(
            chosen.name,
            container,
            "",
            False,
            f"{chosen.name} has no container {container!r}; choose one of: "
            + ", ".join(chosen.containers),
            pods,
        )
    try:
        text = gateway_of(cluster).pod_log(
            cluster.namespace,
            chosen.name,
            container=container,
            tail_lines=bounds.tail + 1,  # one more, to tell whether there is more
            limit_bytes=bounds.limit_bytes + 1,
        )
    except PermanentKubeError as exc:
        return PodLog(chosen.name, container, "", False, exc.message, pods)
    except KubeError as exc:
        message = f"The Kubernetes API did not answer ({exc.message}); try again shortly."
        return PodLog(chosen.name, container, "", False, message, pods)
    if text is None:
        return PodLog(chosen.name, container, "", False, f"{chosen.name} is gone.", pods)
    kept, truncated = bounded(text, bounds)
    return PodLog(chosen.name, container, kept, truncated, "", pods)
