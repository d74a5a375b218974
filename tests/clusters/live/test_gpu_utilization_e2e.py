"""GPU utilisation end to end: kubesim's DCGM exporter behind the node proxy, read per
worker (``clusters.kube.dcgm``), kept as samples, and the tenant's GPU rule of
the idle pass (``clusters.engine.gpu_activity``): a cluster whose Ray is busy but whose
GPUs kubesim holds at 0 % is warned and suspended under the rule, and left alone without
it. ``now`` is passed to the pass so that an hour of idleness takes no time.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from clusters.domain.states import State
from clusters.engine.idle import check_activity
from clusters.kube.dcgm import GpuReading, parse_exposition, read_gpu_utilization
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterEvent, ClusterRequest, GpuSample
from tests.clusters.engine.conftest import wait_for


def _row(cluster: ClusterRequest) -> ClusterRequest:
    return ClusterRequest.objects.select_related("tenant").get(pk=cluster.pk)


def _read(cluster: ClusterRequest) -> GpuReading:
    return read_gpu_utilization(get_gateway(), cluster)


def _worker_gpus(cluster: ClusterRequest) -> GpuReading:
    """The first reading that shows the worker's GPU (the worker starts after the head)."""
    found: list[GpuReading] = []

    def seen() -> bool:
        found[:] = [_read(cluster)]
        return bool(found[0].gpus)

    wait_for(seen, timeout=30, what="the worker's GPU in the exporter's metrics")
    return found[0]


def _force(cluster: ClusterRequest, value: str | None) -> None:
    get_gateway().merge_patch(
        "ray.io/v1",
        "RayCluster",
        cluster.name,
        {"metadata": {"annotations": {"kubesim.io/gpu-utilization": value}}},
        cluster.namespace,
    )


def test_the_exporter_follows_the_simulated_load(
    live_cluster: ClusterRequest, kubesim: Any
) -> None:
    reading = _worker_gpus(live_cluster)
    assert reading.error == ""
    [gpu] = reading.gpus
    assert gpu.pod.startswith(f"{live_cluster.name}-") and gpu.gpu_uuid.startswith("GPU-")
    assert gpu.utilization == 0 and gpu.memory_used_mib == 0  # no driver: idle
    kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "active")
    [busy] = _read(live_cluster).gpus
    assert 60 <= busy.utilization <= 95 and busy.memory_used_mib > 0
    _force(live_cluster, "0")
    [held] = _read(live_cluster).gpus
    assert held.utilization == 0


def test_the_exporter_speaks_dcgm_exporters_text_format(
    live_cluster: ClusterRequest, kubesim: Any
) -> None:
    [gpu] = _worker_gpus(live_cluster).gpus
    node = get_gateway().get("v1", "Pod", gpu.pod, live_cluster.namespace)["spec"]["nodeName"]
    status, body = get_gateway().node_proxy_get(node, 9400, "metrics", limit=1 << 20)
    assert status == 200
    text = body.decode()
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
    series = [s for s in parse_exposition(text) if s[0] == "DCGM_FI_DEV_GPU_UTIL"]
    mine = [labels for _, labels, _ in series if labels.get("pod") == gpu.pod]
    assert len(mine) == 1
    assert {"gpu", "UUID", "device", "modelName", "Hostname", "namespace", "container"} <= set(
        mine[0]
    )
    assert mine[0]["Hostname"] == node and mine[0]["namespace"] == live_cluster.namespace
    # A port no exporter listens on is refused as the API server refuses it.
    status, _ = get_gateway().node_proxy_get(node, 9401, "metrics", limit=1 << 20)
    assert status == 503


def test_busy_ray_with_idle_gpus_is_suspended_under_the_gpu_rule(
    live_cluster: ClusterRequest, kubesim: Any, settings: Any
) -> None:
    settings.IDLE_GRACE_MINUTES = 10
    live_cluster.tenant.idle_gpu_util_percent = 5
    live_cluster.tenant.save()
    kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "active")
    _force(live_cluster, "0")
    _worker_gpus(live_cluster)

    now = timezone.now()
    report = check_activity(now=now + timedelta(minutes=1))
    assert report.checked == 1 and not report.warned
    assert GpuSample.objects.filter(cluster=live_cluster, utilization=0).count() == 1
    report = check_activity(now=now + timedelta(minutes=62))
    assert report.warned == ["bob-live"]
    warning = ClusterEvent.objects.get(cluster=live_cluster, reason="idle_warning")
    assert "Number of active drivers: 1, but its 1 GPU stayed under 5%" in warning.message
    report = check_activity(now=now + timedelta(minutes=73))
    assert report.suspended == ["bob-live"]
    assert _row(live_cluster).state == State.SUSPENDED


def test_without_the_gpu_rule_busy_ray_keeps_it(live_cluster: ClusterRequest, kubesim: Any) -> None:
    assert live_cluster.tenant.idle_gpu_util_percent == 0
    kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "active")
    _force(live_cluster, "0")
    _worker_gpus(live_cluster)
    now = timezone.now()
    for minutes in (1, 62, 73):
        report = check_activity(now=now + timedelta(minutes=minutes))
        assert not report.warned and not report.suspended
    assert _row(live_cluster).state == State.READY
    # The readings were kept all the same, for the page.
    assert GpuSample.objects.filter(cluster=live_cluster).count() == 3


def test_busy_gpus_keep_it_under_the_gpu_rule(live_cluster: ClusterRequest, kubesim: Any) -> None:
    live_cluster.tenant.idle_gpu_util_percent = 5
    live_cluster.tenant.save()
    kubesim.set_ray_driver(live_cluster.namespace, live_cluster.name, "active")
    _worker_gpus(live_cluster)
    now = timezone.now()
    for minutes in (1, 62, 73):
        report = check_activity(now=now + timedelta(minutes=minutes))
        assert not report.warned and not report.suspended
    assert GpuSample.objects.filter(cluster=live_cluster, utilization__gte=60).count() == 3
