"""GPU utilisation in the idle pass: record each reading, and idle GPUs as idleness.

Every ready cluster's GPUs are read with its Ray activity
(:func:`clusters.kube.dcgm.read_gpu_utilization`) and kept as
:class:`~clusters.models.GpuSample` rows for ``GPU_SAMPLE_RETENTION_HOURS``. Under a
tenant's ``idle_gpu_util_percent`` a cluster whose GPUs all stay under that percentage
is idle even while Ray is busy (on CPU, say): its last use is when a GPU was last seen at
or above it, or when watching began, or when it was last kept alive, whichever is latest.
A reading without GPUs (unreadable, or none yet) never makes a cluster idle.
"""

from __future__ import annotations

import datetime
from datetime import timedelta

from django.conf import settings

from clusters.kube.dcgm import GpuReading
from clusters.kube.raydash import Activity
from clusters.models import ClusterEvent, ClusterRequest, GpuSample


def record(cluster: ClusterRequest, reading: GpuReading, *, now: datetime.datetime) -> None:
    """Keep one reading of the cluster's GPUs (nothing for an empty one)."""
    GpuSample.objects.bulk_create(
        GpuSample(
            cluster_id=cluster.pk,
            at=now,
            pod=gpu.pod[:253],
            gpu_uuid=gpu.gpu_uuid[:64],
            utilization=min(max(gpu.utilization, 0), 100),
            memory_used_mib=max(gpu.memory_used_mib, 0),
        )
        for gpu in reading.gpus
    )


def forget_old(*, now: datetime.datetime) -> int:
    """Delete the samples past their retention; how many went."""
    cutoff = now - timedelta(hours=settings.GPU_SAMPLE_RETENTION_HOURS)
    deleted, _ = GpuSample.objects.filter(at__lt=cutoff).delete()
    return deleted


def with_gpus(
    cluster: ClusterRequest, activity: Activity, reading: GpuReading, *, now: datetime.datetime
) -> Activity:
    """Ray's reading of ``cluster``, made idle when the tenant's GPU rule says so (see the
    module); the pass then takes its last use from the returned reading alone."""
    below = cluster.tenant.idle_gpu_util_percent
    if not below or not activity.active or not reading.gpus:
        return activity
    if any(gpu.utilization >= below for gpu in reading.gpus):
        return activity
    samples = GpuSample.objects.filter(cluster_id=cluster.pk)
    moments = [
        samples.filter(utilization__gte=below).order_by("-at").values_list("at", flat=True).first(),
        samples.order_by("at").values_list("at", flat=True).first(),
        ClusterEvent.objects.filter(cluster_id=cluster.pk, reason="kept_alive")
        .order_by("-at")
        .values_list("at", flat=True)
        .first(),
    ]
    since = max([m for m in moments if m is not None], default=now)
    return Activity(
        active=False,
        last_active_at=min(since, now),
        reason=f"{activity.reason}, but its {len(reading.gpus)} GPU"
        f"{'s' if len(reading.gpus) > 1 else ''} stayed under {below}% "
        f"since {since:%H:%M} UTC",
    )
