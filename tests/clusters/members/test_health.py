"""The health beat task against real kubesims: a running member is reachable with a
latency, version and operators; a stopped one is unreachable with the error; the task
never raises."""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings

from clusters import tasks
from clusters.members import services
from clusters.models import KubeCluster
from kubesim import KubeSim
from tests.clusters.members.conftest import start_member_sim


def test_the_task_marks_a_stopped_member_unreachable_and_a_running_one_reachable(
    root: Any, member_sim: KubeSim
) -> None:
    other = start_member_sim()
    for name, sim in (("up", member_sim), ("down", other)):
        services.kube_cluster_register(actor=root, name=name, server=sim.url, token="member-token")
    KubeCluster.objects.update(reachable=None, api_latency_ms=None)
    other.stop()

    seen = tasks.probe_kube_clusters()  # "default", settings' cluster, runs no kubesim here
    assert {name: seen[name] for name in ("up", "down")} == {"up": True, "down": False}

    up, down = KubeCluster.objects.get(name="up"), KubeCluster.objects.get(name="down")
    assert up.reachable is True and up.api_latency_ms is not None and up.api_latency_ms > 0
    assert up.kubernetes_version.startswith("v1.") and "KubeRay" in up.operators
    assert up.health_message == "" and up.checked_at is not None
    assert down.reachable is False and down.health_message.startswith(f"Cannot reach {other.url}")
    assert down.kubernetes_version == up.kubernetes_version  # the last one seen stays


def test_a_member_whose_secret_no_key_opens_is_unreachable_not_a_crash(
    root: Any, member_sim: KubeSim, settings: Any
) -> None:
    services.kube_cluster_register(
        actor=root, name="sealed", server=member_sim.url, token="member-token"
    )
    settings.FLEET_CREDENTIAL_KEYS = ["x" * 43 + "="]  # not the key it was sealed with
    assert tasks.probe_kube_clusters()["sealed"] is False
    assert "no configured key" in KubeCluster.objects.get(name="sealed").health_message


def test_the_beat_runs_it() -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["kube-cluster-health"]
    assert entry["task"] == tasks.probe_kube_clusters.name
