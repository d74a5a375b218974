"""Idle GPUs go back: read each ready cluster's activity from Ray, warn, then suspend.

A pass (beat, every ``ACTIVITY_CHECK_SECONDS``) reads each ready cluster's dashboard
(:func:`clusters.kube.raydash.read_activity`; a notebook's busy kernels too,
``notebook_activity.py``), records ``last_active_at``, keeps the idle ledger
(:class:`clusters.models.IdleSpan`) and applies the tenant's policy
(``idle_suspend_minutes``; dev only unless ``idle_suspend_prod``; GPUs under
``idle_gpu_util_percent`` are idle even if Ray is busy, ``gpu_activity.py``): idle that long, the
owner is warned; still idle ``IDLE_GRACE_MINUTES`` later, it is suspended. Any use cancels
the warning; an unreadable dashboard is never idleness; writes are conditional on the row
as read. Kinds' own idle policies (``Kind.idle_reclaim``: scale to zero) run here too.
"""

from __future__ import annotations

import datetime
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import idle_reclaimers, interactive_workloads
from clusters.engine import gpu_activity, notebook_activity
from clusters.engine.tunnel_activity import with_tunnels
from clusters.kube.connection import placed_gateways
from clusters.kube.dcgm import GpuReading, read_gpu_utilization
from clusters.kube.gateway import Gateway
from clusters.kube.raydash import Activity, DashboardUnreachable, read_activity
from clusters.models import ClusterKind, ClusterRequest, IdleSpan
from clusters.rows import lifecycle
from clusters.rows.transitions import note
from controlplane.exceptions import ServiceConflict

# Dashboards read at once: each read is two small HTTP calls through the API server.
_READERS = 8


@dataclass
class IdleReport:
    """What one pass did, for logs and tests."""

    checked: int = 0
    unreachable: int = 0
    warned: list[str] = field(default_factory=list)
    suspended: list[str] = field(default_factory=list)
    # Rows whose GPUs a kind's own idle policy gave back (a service scaled to zero).
    reclaimed: list[str] = field(default_factory=list)


def policy_applies(cluster: ClusterRequest) -> bool:
    """Whether the tenant's idle policy covers this cluster (its kind, and not off)."""
    tenant = cluster.tenant
    if not tenant.idle_suspend_minutes:
        return False
    return cluster.kind == ClusterKind.DEV or tenant.idle_suspend_prod


def idle_deadline(cluster: ClusterRequest) -> datetime.datetime | None:
    """When an idle, warned cluster will be suspended (``None`` if it is not warned)."""
    if cluster.idle_warned_at is None:
        return None
    return cluster.idle_warned_at + timedelta(minutes=settings.IDLE_GRACE_MINUTES)


def _read(
    gw: Gateway, cluster: ClusterRequest
) -> tuple[Activity | DashboardUnreachable, GpuReading]:
    gpus = read_gpu_utilization(gw, cluster)
    try:
        found = read_activity(gw, cluster.namespace, cluster.name)
    except DashboardUnreachable as exc:
        return exc, gpus
    # Sources of use besides Ray, each in its own module.
    return notebook_activity.with_notebook(gw, cluster, found), gpus


def check_activity(*, now: datetime.datetime | None = None) -> IdleReport:
    """One pass over every ready cluster (see the module docstring)."""
    now = now or timezone.now()
    report = IdleReport()
    for reclaim in idle_reclaimers():
        report.reclaimed += reclaim(now=now)
    clusters = list(
        ClusterRequest.objects.unscoped()
        .filter(state=State.READY, workload__in=interactive_workloads())
        .select_related("tenant", "owner", "flavor")
        .order_by("pk")
    )
    if not clusters:
        return report
    gateways = placed_gateways(clusters)  # each cluster is read on its own member
    with ThreadPoolExecutor(max_workers=_READERS) as pool:
        found = list(pool.map(lambda c: _read(gateways[c.pk], c), clusters))
    gpu_activity.forget_old(now=now)
    for cluster, (activity, gpus) in zip(clusters, found, strict=True):
        report.checked += 1
        gpu_activity.record(cluster, gpus, now=now)
        if isinstance(activity, DashboardUnreachable):
            report.unreachable += 1
            ClusterRequest.objects.filter(pk=cluster.pk, state=State.READY).update(
                activity_checked_at=now,
                activity_note=f"activity unknown: {activity.message}"[:300],
            )
            continue
        by_gpus = gpu_activity.with_gpus(cluster, activity, gpus, now=now)
        if by_gpus is not activity:
            # Idle by its GPUs while Ray is busy: Ray's recent use does not count.
            cluster.last_active_at = None
        activity = with_tunnels(cluster, by_gpus, now=now)
        apply_activity(cluster, activity, now=now, report=report)
    return report


def _last_active(
    cluster: ClusterRequest, activity: Activity, now: datetime.datetime
) -> datetime.datetime:
    if activity.active:
        return now
    moments = [m for m in (cluster.last_active_at, activity.last_active_at, cluster.ready_at) if m]
    return min(max(moments), now) if moments else now


def apply_activity(
    cluster: ClusterRequest,
    activity: Activity,
    *,
    now: datetime.datetime,
    report: IdleReport | None = None,
) -> None:
    """Record one reading of a ready cluster's activity and act on the tenant's policy."""
    report = report or IdleReport()
    last = _last_active(cluster, activity, now)
    warned = cluster.idle_warned_at
    still_warned = warned if warned is not None and last <= warned else None
    with transaction.atomic():
        updated = ClusterRequest.objects.filter(
            pk=cluster.pk, state=State.READY, idle_warned_at=warned
        ).update(
            last_active_at=last,
            activity_checked_at=now,
            activity_note=activity.reason[:300],
            idle_warned_at=still_warned,
        )
        if not updated:
            return  # moved meanwhile (suspended, deleted, kept alive): next pass
        cluster.last_active_at = last
        cluster.idle_warned_at = still_warned
        _keep_idle_ledger(cluster, idle=not activity.active, last=last, now=now)
    if not policy_applies(cluster) or activity.active:
        return
    idle_for = now - last
    threshold = timedelta(minutes=cluster.tenant.idle_suspend_minutes)
    if still_warned is None and idle_for >= threshold:
        _warn(cluster, idle_for, now, report, why=activity.reason)
    elif still_warned is not None and now >= (idle_deadline(cluster) or now):
        _suspend(cluster, idle_for, report)


def _keep_idle_ledger(
    cluster: ClusterRequest, *, idle: bool, last: datetime.datetime, now: datetime.datetime
) -> None:
    """Close the open idle span where use was seen; open one when the cluster is idle."""
    open_span = IdleSpan.objects.filter(cluster_id=cluster.pk, ended_at__isnull=True).first()
    if open_span is not None and (not idle or last > open_span.started_at):
        # Used since the span opened (now, or between two readings): idle until then.
        open_span.ended_at = now if not idle else last
        open_span.save(update_fields=["ended_at"])
        open_span = None
    if idle and open_span is None:
        start = max(last, cluster.admitted_at or last)
        IdleSpan.objects.create(
            tenant_id=cluster.tenant_id,
            cluster_id=cluster.pk,
            username=cluster.owner.get_username(),
            flavor_name=cluster.flavor.name,
            gpus=cluster.gpus,
            started_at=start,
        )


def mark_used(cluster_id: int, at: datetime.datetime) -> bool:
    """Count ``at`` as use of a ready cluster seen outside Ray (a visit through the
    dashboard proxy, "keep alive"): its idle clock starts again, a pending idle warning
    is withdrawn and its open idle span ends. ``False`` when it is not ready."""
    with transaction.atomic():
        updated = ClusterRequest.objects.filter(pk=cluster_id, state=State.READY).update(
            last_active_at=at, idle_warned_at=None
        )
        if updated:
            IdleSpan.objects.filter(cluster_id=cluster_id, ended_at__isnull=True).update(
                ended_at=at
            )
    return bool(updated)


def _minutes(delta: timedelta) -> int:
    return max(int(delta.total_seconds() // 60), 0)


def _warn(
    cluster: ClusterRequest,
    idle_for: timedelta,
    now: datetime.datetime,
    report: IdleReport,
    *,
    why: str,
) -> None:
    with transaction.atomic():
        claimed = ClusterRequest.objects.filter(
            pk=cluster.pk, state=State.READY, idle_warned_at__isnull=True
        ).update(idle_warned_at=now)
        if not claimed:
            return
        cluster.idle_warned_at = now
        deadline = idle_deadline(cluster)
        note(
            cluster,
            reason="idle_warning",
            message=f"idle for {_minutes(idle_for)} min ({why[:200]}); it will be "
            f"suspended at {deadline:%H:%M} UTC and its GPUs released unless it is used or "
            "kept alive",
        )
    report.warned.append(cluster.name)


def _suspend(cluster: ClusterRequest, idle_for: timedelta, report: IdleReport) -> None:
    with transaction.atomic():
        current = lifecycle.locked(cluster)
        if current.state != State.READY or current.idle_warned_at != cluster.idle_warned_at:
            return  # used, kept alive, suspended or deleted since it was read
        try:
            lifecycle.suspend(
                current,
                reason="idle",
                message=f"idle for {_minutes(idle_for)} min: suspended and its GPUs released; "
                "resume it to get back in line",
            )
        except ServiceConflict:
            return
    report.suspended.append(cluster.name)
