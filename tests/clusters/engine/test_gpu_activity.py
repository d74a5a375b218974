"""GPU utilisation one reading at a time (clusters/engine/gpu_activity.py): what is kept,
what is forgotten, when idle GPUs make a busy-Ray cluster idle, and how the page's and
API's history is read back (``cluster_gpu_utilization``). End to end on kubesim:
tests/clusters/live/test_gpu_utilization_e2e.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.engine import gpu_activity
from clusters.kube.dcgm import GpuReading, WorkerGpu, parse_exposition
from clusters.kube.raydash import Activity
from clusters.models import ClusterEvent, ClusterRequest, GpuSample
from clusters.selectors import cluster_gpu_utilization

BUSY = Activity(active=True, last_active_at=None, reason="job raysubmit_1 is running")
IDLE = Activity(active=False, last_active_at=None, reason="no Ray driver or job is running")


@pytest.fixture
def gpu_cluster(acme: Any, bob: Any, h100: Any) -> ClusterRequest:
    now = timezone.now()
    acme.idle_gpu_util_percent = 5
    acme.save()
    return ClusterRequest.objects.select_related("tenant").get(
        pk=ClusterRequest.objects.create(
            tenant=acme,
            owner=bob,
            name="bob-gpus",
            kind="dev",
            flavor=h100,
            workers=2,
            gpus=2,
            state="ready",
            holds_gpus=True,
            admitted_at=now,
            ready_at=now,
        ).pk
    )


def _reading(*values: int) -> GpuReading:
    return GpuReading(
        [WorkerGpu(f"w{i}", f"GPU-{i}", value, 100 * value) for i, value in enumerate(values)]
    )


def test_the_text_format_is_parsed_with_escaped_labels_and_comments() -> None:
    text = (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="A \\"big\\" one",pod="p"} 42\n'
        "DCGM_FI_DEV_FB_USED 7 1700000000000\n"
        "garbage line\n"
    )
    assert parse_exposition(text) == [
        (
            "DCGM_FI_DEV_GPU_UTIL",
            {"gpu": "0", "UUID": "GPU-a", "modelName": 'A "big" one', "pod": "p"},
            42.0,
        ),
        ("DCGM_FI_DEV_FB_USED", {}, 7.0),
    ]


def test_readings_are_kept_and_forgotten_after_the_retention(
    gpu_cluster: ClusterRequest, settings: Any
) -> None:
    settings.GPU_SAMPLE_RETENTION_HOURS = 2
    now = timezone.now()
    gpu_activity.record(gpu_cluster, _reading(10, 90), now=now - timedelta(hours=3))
    gpu_activity.record(gpu_cluster, _reading(0, 0), now=now)
    gpu_activity.record(gpu_cluster, GpuReading([], error="unreadable"), now=now)
    assert GpuSample.objects.count() == 4
    assert gpu_activity.forget_old(now=now) == 2
    assert set(GpuSample.objects.values_list("utilization", flat=True)) == {0}


def test_idle_gpus_make_busy_ray_idle_since_they_were_last_busy(
    gpu_cluster: ClusterRequest,
) -> None:
    now = timezone.now()
    gpu_activity.record(gpu_cluster, _reading(50, 0), now=now - timedelta(minutes=90))
    gpu_activity.record(gpu_cluster, _reading(4, 0), now=now - timedelta(minutes=60))
    gpu_activity.record(gpu_cluster, _reading(0, 0), now=now)
    found = gpu_activity.with_gpus(gpu_cluster, BUSY, _reading(0, 0), now=now)
    assert not found.active
    assert found.last_active_at == now - timedelta(minutes=90)
    assert found.reason.startswith("job raysubmit_1 is running, but its 2 GPUs stayed under 5%")
    # Keep alive restarts the clock.
    kept = ClusterEvent.objects.create(cluster=gpu_cluster, to_state="ready", reason="kept_alive")
    later = kept.at + timedelta(minutes=1)
    found = gpu_activity.with_gpus(gpu_cluster, BUSY, _reading(0, 0), now=later)
    assert found.last_active_at == kept.at


def test_the_rule_changes_nothing_unless_it_applies(gpu_cluster: ClusterRequest) -> None:
    now = timezone.now()
    gpu_activity.record(gpu_cluster, _reading(0, 0), now=now - timedelta(hours=2))
    # A GPU at the threshold is busy; an empty reading is no evidence; Ray idle stays so.
    assert gpu_activity.with_gpus(gpu_cluster, BUSY, _reading(5, 0), now=now) is BUSY
    assert gpu_activity.with_gpus(gpu_cluster, BUSY, GpuReading([], error="x"), now=now) is BUSY
    assert gpu_activity.with_gpus(gpu_cluster, IDLE, _reading(0, 0), now=now) is IDLE
    gpu_cluster.tenant.idle_gpu_util_percent = 0
    assert gpu_activity.with_gpus(gpu_cluster, BUSY, _reading(0, 0), now=now) is BUSY


def test_the_history_is_per_worker_gpu_and_limited_to_the_last_readings(
    gpu_cluster: ClusterRequest,
) -> None:
    now = timezone.now()
    assert cluster_gpu_utilization(gpu_cluster) == []
    for minute in range(5):
        gpu_activity.record(
            gpu_cluster, _reading(minute, 2 * minute), now=now + timedelta(minutes=minute)
        )
    found = cluster_gpu_utilization(gpu_cluster, readings=3)
    assert [(g["pod"], g["gpu_uuid"], g["utilization"]) for g in found] == [
        ("w0", "GPU-0", 4),
        ("w1", "GPU-1", 8),
    ]
    assert [s["utilization"] for s in found[1]["samples"]] == [4, 6, 8]
    assert found[0]["read_at"] == now + timedelta(minutes=4)


def test_the_api_detail_has_gpu_utilization(
    gpu_cluster: ClusterRequest, as_user: Any, bob: Any
) -> None:
    now = timezone.now()
    gpu_activity.record(gpu_cluster, _reading(70, 0), now=now)
    url = f"/api/v1/tenants/acme/clusters/{gpu_cluster.name}/"
    body = as_user(bob).get(url).json()
    assert body["gpu_utilization"][0]["pod"] == "w0"
    assert body["gpu_utilization"][0]["utilization"] == 70
    assert body["gpu_utilization"][0]["samples"][0]["memory_used_mib"] == 7000
    listed = as_user(bob).get("/api/v1/tenants/acme/clusters/").json()
    assert "gpu_utilization" not in listed["results"][0]
