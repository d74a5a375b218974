"""The reconciler: one pass folds the cluster's truth into the rows and repairs drift.

A pass reads with one LIST per kind (RayClusters, pods, nodes, scheduling events,
namespaces — never a GET per cluster), records the free GPU capacity per flavor
(:mod:`clusters.capacity`), then for every row that is not deleted:

* folds RayCluster status and pod state into the row: ``ready`` only when the head and
  every desired worker are running and ready; otherwise ``state_reason`` says in plain
  words what the pods wait for, from their conditions and FailedScheduling events;
* recreates objects that vanished (and the namespace bundle with them);
* finishes deletions once the RayCluster and its pods are gone;
* warns owners once when a cluster is about to expire, and deletes clusters whose TTL
  ran out (reason ``expired``);
* keeps each tenant's namespace bundle (ResourceQuota and all) in step with its quota;
* in Kueue mode, puts a running cluster whose Workload Kueue evicted back in the queue;
* deletes managed RayClusters that no live row wants (orphans).
It returns what it did, so the task can run an admission pass when capacity freed.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from clusters import capacity, kueue_mode, provisioning
from clusters.admission import words
from clusters.kube import labels
from clusters.kube.gateway import Gateway, KubeError, get_gateway
from clusters.models import ClusterRequest
from clusters.services import cluster_delete
from clusters.states import HOLDS_QUOTA, LIVE, State
from clusters.transitions import note, transition

log = logging.getLogger(__name__)

# Rows in these states want their RayCluster to exist; others' RayClusters are orphans.
_WANTED = {State.ADMITTED, State.PROVISIONING, State.READY, State.SUSPENDED, State.DELETING}


@dataclass
class Report:
    """What one reconcile pass did (for logs, tests and the admission nudge)."""

    ready: list[int] = field(default_factory=list)
    recreated: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def freed_capacity(self) -> bool:
        return bool(self.deleted or self.expired)


def _pod_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _waiting_reason(
    cluster: ClusterRequest, pods: list[dict[str, Any]], events: dict[str, dict[str, Any]]
) -> str:
    """Why the cluster is not ready yet, in plain words."""
    if not pods:
        return "waiting for KubeRay to create the pods"
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
        return f"{words.count(len(pending), 'pod')} waiting to be scheduled"
    unready = [p for p in pods if not _pod_ready(p)]
    if unready:
        return f"{words.count(len(unready), 'pod')} starting"
    return "waiting for KubeRay to report the cluster ready"


def _is_ready(cluster: ClusterRequest, rc: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
    status = rc.get("status") or {}
    heads = [p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "head"]
    workers = [
        p for p in pods if p["metadata"].get("labels", {}).get("ray.io/node-type") == "worker"
    ]
    desired = int(status.get("desiredWorkerReplicas", cluster.workers) or 0)
    want = max(desired, cluster.min_workers or 0) if cluster.kind == "prod" else cluster.workers
    return (
        status.get("state") == "ready"
        and any(_pod_ready(p) for p in heads)
        and sum(1 for p in workers if _pod_ready(p)) >= want
    )


def reconcile_once(gw: Gateway | None = None) -> Report:
    """One reconcile pass; see the module docstring."""
    gw = gw or get_gateway()
    report = Report()
    selector = labels.managed_selector()
    rayclusters = gw.list("ray.io/v1", "RayCluster", label_selector=selector)
    # Every pod (not only ours): the free capacity per GPU flavor counts them all.
    all_pods = gw.list("v1", "Pod")
    managed_key, managed_value = selector.split("=", 1)
    pods = [
        p for p in all_pods if (p["metadata"].get("labels") or {}).get(managed_key) == managed_value
    ]
    capacity.record(capacity.free_by_product(gw.list("v1", "Node"), all_pods))
    namespaces = {
        ns["metadata"]["name"] for ns in gw.list("v1", "Namespace", label_selector=selector)
    }
    events: dict[str, dict[str, Any]] = {}
    for event in gw.list("v1", "Event", field_selector="involvedObject.kind=Pod"):
        if event.get("reason") == "FailedScheduling":
            events[(event.get("involvedObject") or {}).get("uid", "")] = event

    kueue = settings.QUEUE_MODE == "kueue"
    workloads: dict[tuple[str, str], dict[str, Any]] = {}
    positions: dict[tuple[str, str], dict[str, Any]] = {}
    if kueue:
        kueue_mode.ensure_queues(gw)
        workloads = kueue_mode.workloads_by_cluster(gw)

    rc_by_key = {(rc["metadata"]["namespace"], rc["metadata"]["name"]): rc for rc in rayclusters}
    pods_by_key: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for pod in pods:
        meta = pod["metadata"]
        pods_by_key[(meta["namespace"], meta.get("labels", {}).get("ray.io/cluster", ""))].append(
            pod
        )

    rows = list(
        ClusterRequest.objects.unscoped()
        .exclude(state=State.DELETED)
        .select_related("tenant", "flavor", "owner")
    )
    wanted: set[tuple[str, str]] = set()
    now = timezone.now()
    if kueue:
        waiting = {c.namespace for c in rows if c.state == State.QUEUED}
        positions = kueue_mode.pending_positions(gw, waiting)
    for cluster in rows:
        key = (cluster.namespace, cluster.name)
        wants = cluster.state in _WANTED or (kueue and cluster.state == State.QUEUED)
        if wants and not (kueue and cluster.state == State.SUSPENDED):
            wanted.add(key)
        if cluster.tenant.namespace not in namespaces:
            provisioning.forget_bundle(cluster.tenant_id)
            kueue_mode.forget_queues()
        try:
            if kueue and cluster.state in (State.QUEUED, State.SUSPENDED):
                _reconcile_kueue_row(cluster, rc_by_key.get(key), workloads, positions, gw)
                continue
            if (
                kueue
                and cluster.state in HOLDS_QUOTA
                and rc_by_key.get(key) is not None
                and kueue_mode.fold_eviction(cluster, workloads.get(key))
            ):
                report.evicted.append(cluster.pk)
                continue
            _reconcile_row(
                cluster, rc_by_key.get(key), pods_by_key.get(key, []), events, gw, report, now
            )
        except KubeError as exc:
            report.errors.append(f"{cluster}: {exc.message}")
            log.warning("reconcile %s: %s", cluster, exc.message)

    # Keep every namespace bundle in step with its tenant's quota (a no-op unless the
    # quota changed or the namespace vanished: ensure_bundle remembers what it applied).
    for tenant in {c.tenant_id: c.tenant for c in rows if c.state in _WANTED}.values():
        try:
            provisioning.ensure_bundle(tenant, gw)
        except KubeError as exc:
            report.errors.append(f"bundle of {tenant.slug}: {exc.message}")

    for key, rc in rc_by_key.items():
        if key not in wanted and not rc["metadata"].get("deletionTimestamp"):
            try:
                gw.delete("ray.io/v1", "RayCluster", key[1], key[0])
                report.orphans.append(f"{key[0]}/{key[1]}")
            except KubeError as exc:
                report.errors.append(f"orphan {key}: {exc.message}")
    return report


def _reconcile_row(
    cluster: ClusterRequest,
    rc: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    events: dict[str, dict[str, Any]],
    gw: Gateway,
    report: Report,
    now: Any,
) -> None:
    state = cluster.state
    if state in LIVE and cluster.expires_at and cluster.expires_at <= now:
        cluster_delete(actor=None, cluster=cluster, reason="expired")
        report.expired.append(cluster.pk)
        return
    if state == State.DELETING:
        if rc is not None and not rc["metadata"].get("deletionTimestamp"):
            gw.delete("ray.io/v1", "RayCluster", cluster.name, cluster.namespace)
        elif rc is None and not pods and provisioning.finish_deletion(cluster):
            report.deleted.append(cluster.pk)
        return
    if state not in (State.PROVISIONING, State.READY, State.SUSPENDED):
        return
    _warn_of_expiry(cluster, now)
    if rc is None:
        provisioning.apply_cluster(cluster, gw)
        report.recreated.append(cluster.pk)
        if state == State.READY:
            transition(
                cluster,
                State.PROVISIONING,
                reason="recreated",
                message="its RayCluster vanished and was recreated",
                ready_at=None,
            )
        return
    if state == State.SUSPENDED:
        if not (rc.get("spec") or {}).get("suspend"):
            provisioning.apply_cluster(cluster, gw)
        return
    ready = _is_ready(cluster, rc, pods)
    if ready and state == State.PROVISIONING:
        transition(
            cluster,
            State.READY,
            reason="ready",
            message="head and workers are ready",
            ready_at=now,
        )
        report.ready.append(cluster.pk)
    elif not ready:
        reason = _waiting_reason(cluster, pods, events)
        if state == State.READY:
            transition(
                cluster, State.PROVISIONING, reason="degraded", message=reason, ready_at=None
            )
        elif reason != cluster.state_reason:
            ClusterRequest.objects.filter(pk=cluster.pk, state=state).update(state_reason=reason)


def _reconcile_kueue_row(
    cluster: ClusterRequest,
    rc: dict[str, Any] | None,
    workloads: dict[tuple[str, str], dict[str, Any]],
    positions: dict[tuple[str, str], dict[str, Any]],
    gw: Gateway,
) -> None:
    """Kueue mode: queued rows want their (Kueue-suspended) RayCluster and Kueue's verdict;
    suspended rows want none (a RayCluster holds Kueue quota until it is deleted)."""
    if cluster.state == State.SUSPENDED:
        if rc is not None and not rc["metadata"].get("deletionTimestamp"):
            gw.delete("ray.io/v1", "RayCluster", cluster.name, cluster.namespace)
        return
    if rc is None:
        provisioning.apply_cluster(cluster, gw)
        return
    kueue_mode.fold_queued(cluster, workloads.get((cluster.namespace, cluster.name)), positions)


def _warn_of_expiry(cluster: ClusterRequest, now: Any) -> None:
    """Tell the owner, once, that the cluster expires soon and can be extended (USERS 1)."""
    warning = timedelta(minutes=settings.EXPIRY_WARNING_MINUTES)
    if not cluster.expires_at or cluster.expiry_warned_at or cluster.expires_at - now > warning:
        return
    claimed = ClusterRequest.objects.filter(pk=cluster.pk, expiry_warned_at__isnull=True).update(
        expiry_warned_at=now
    )
    if claimed:
        minutes = max(int((cluster.expires_at - now).total_seconds() // 60), 0)
        note(
            cluster,
            reason="expiry_warning",
            message=f"expires at {cluster.expires_at:%H:%M} UTC (in {minutes} min) and its GPUs "
            "will be released; extend it to keep it",
        )
