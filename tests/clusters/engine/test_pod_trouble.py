"""Pods that cannot start, as their owner meets it: a real worker and kubesim (its
documented pod-failure knobs — an image its registry lacks, containers that crash or are
OOM-killed). The cluster's page, API and CLI say why in plain words instead of
"starting" for ever, and the owner is told once, not at every restart."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.test import Client

from clusters.engine.pod_trouble import PREFIX, pod_trouble
from clusters.models import ClusterEvent, ClusterRequest
from notifications.models import Delivery
from tests.clusters.engine.conftest import wait_for

CLUSTERS = "/api/v1/tenants/acme/clusters/"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def _trouble(name: str) -> str:
    reason = _row(name).state_reason
    return reason if reason.startswith(PREFIX) else ""


def test_an_image_that_cannot_be_pulled_is_said_shown_and_told_once(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    kubesim.set_missing_images([settings.RAY_IMAGE_DEFAULT])
    api = as_user(bob)
    assert api.post(CLUSTERS, {"name": "nopull", "flavor": "l4"}).status_code == 201
    reason = wait_for(lambda: _trouble("nopull"), what="the reason", timeout=60)
    assert reason.startswith(
        f"cannot start: the head cannot pull the image {settings.RAY_IMAGE_DEFAULT}"
    ), reason
    assert "1 worker cannot pull" in reason and "check the image name" in reason
    row = _row("nopull")
    assert row.state == "provisioning"
    # The API and the page say the same words.
    assert api.get(CLUSTERS + "nopull/").json()["state_reason"] == reason
    page = Client()
    page.force_login(bob)
    assert "cannot pull the image" in page.get("/t/acme/clusters/nopull/").content.decode()
    # Told once: a pods_failing note and a delivery of that kind, whatever the back-offs.
    wait_for(
        lambda: Delivery.objects.filter(kind="pods_failing", event__cluster=row).exists(),
        what="the notice",
    )
    notes = ClusterEvent.objects.filter(cluster=row, reason="pods_failing")
    assert notes.count() == 1 and notes.get().message == reason
    notice = Delivery.objects.filter(kind="pods_failing", event__cluster=row).first()
    assert notice is not None and notice.payload["text"] == f"Cluster nopull in acme {reason}"
    assert notice.payload["subject"] == "Cluster nopull in acme: pods cannot start"
    # The image reaches the registry: the cluster starts and the reason goes.
    kubesim.set_missing_images([])
    wait_for(lambda: _row("nopull").state == "ready", what="ready", timeout=90)
    assert ClusterEvent.objects.filter(cluster=row, reason="pods_failing").count() == 1


def test_workers_that_crash_or_run_out_of_memory_are_named(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    kubesim.set_container_fault("gw-acme", "ray.io/cluster=loop,ray.io/node-type=worker", "crash")
    kubesim.set_container_fault("gw-acme", "ray.io/cluster=oom,ray.io/node-type=head", "oom")
    for name in ("loop", "oom"):
        assert api.post(CLUSTERS, {"name": name, "flavor": "l4"}).status_code == 201
    loop = wait_for(lambda: _trouble("loop"), what="the crash loop", timeout=60)
    assert loop.startswith("cannot start: 1 worker keeps crashing (exit code 1"), loop
    assert "CrashLoopBackOff" in loop and "see its log" in loop
    oom = wait_for(lambda: _trouble("oom"), what="the OOM kill", timeout=60)
    assert oom.startswith("cannot start: the head keeps being killed for running out of memory")
    assert "OOMKilled of its" in oom and "memory limit" in oom
    # Still named after a restart (a restarted container runs, not ready, in between).
    wait_for(
        lambda: "2 times" in _trouble("loop") or "3 times" in _trouble("loop"),
        what="a second crash",
        timeout=60,
    )
    assert ClusterEvent.objects.filter(cluster=_row("loop"), reason="pods_failing").count() == 1


def _pod(role: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"ray.io/node-type": role}},
        "spec": {"containers": [{"name": "ray", "resources": {"limits": {"memory": "8Gi"}}}]},
        "status": {"containerStatuses": [{"name": "ray", "image": "img:1", **status}]},
    }


def test_the_words_for_each_trouble() -> None:
    pull = {"state": {"waiting": {"reason": "ImagePullBackOff"}}}
    crash = {
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "restartCount": 2,
        "lastState": {"terminated": {"exitCode": 3, "reason": "Error"}},
    }
    oom = {
        "state": {"running": {}},
        "ready": False,
        "restartCount": 1,
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    }
    running = {"state": {"running": {}}, "ready": True, "restartCount": 0}
    assert pod_trouble([_pod("head", **running), _pod("worker", **running)]) == ""
    assert pod_trouble([_pod("worker", **pull), _pod("worker", **pull)]).startswith(
        "cannot start: 2 workers cannot pull the image img:1"
    )
    said = pod_trouble([_pod("head", **oom), _pod("worker", **crash)])
    assert "the head keeps being killed for running out of memory (OOMKilled of its 8Gi " in said
    assert "1 worker keeps crashing (exit code 3, 3 times, CrashLoopBackOff)" in said
    assert len(pod_trouble([_pod("worker", **pull)] * 200)) <= 500
