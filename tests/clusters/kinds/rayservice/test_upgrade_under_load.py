"""An upgrade under load, through the real loop (kubesim over HTTP, a Celery worker, the
product served over HTTP): clients call the service's endpoint without pause while its
image is upgraded to a new Ray cluster, from the surge waiting for quota to the old
cluster's deletion. Every call must be answered 200 by Serve: none refused, none 5xx,
each caller moving from the old cluster to the new one once and never back."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from knox.models import AuthToken

from benchmarks.http_session import HttpSession
from clusters.kube.gateway import get_gateway
from clusters.models import Service
from tests.clusters.engine.conftest import kubesim, room_for_l4, wait_for, worker
from tests.clusters.kinds.rayservice import upgrades
from tests.clusters.kinds.rayservice.upgrades import other_image

__all__ = ["kubesim", "other_image", "worker"]  # the engine tests' fixtures, and ours

CALLERS = 2
STARTUP_SECONDS = 3.0  # a pod's ContainerCreating in kubesim from the upgrade on
DEPLOY_KNOB = "kubesim.io/serve-deploy-seconds"
DEPLOY_SECONDS = 3  # Serve's deploy on the new cluster's head, once it is Ready
PAUSE_SECONDS = 0.02  # between one caller's calls: steady load, CPU left for the loop


@pytest.fixture(autouse=True)
def _other_image(other_image: None) -> None:
    """The upgrade goes to :data:`upgrades.OTHER`."""


@dataclass
class Answer:
    """One call: when it was answered (monotonic), its status, and the Ray cluster whose
    Serve answered (simulated Serve says so), or what came back instead."""

    at: float
    status: int
    cluster: str


class Caller(threading.Thread):
    """A client calling ``url`` over one keep-alive connection until ``stop`` is set."""

    def __init__(self, url: str, token: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.token = token
        self.stop = stop
        self.answers: list[Answer] = []

    def run(self) -> None:
        session = HttpSession({"Authorization": f"Bearer {self.token}"})
        try:
            while not self.stop.is_set():
                self.answers.append(self._call(session))
                time.sleep(PAUSE_SECONDS)
        finally:
            session.close()
            connection.close()  # the live server's threads use their own

    def _call(self, session: HttpSession) -> Answer:
        try:
            answer = session.get(self.url)
        except OSError as exc:  # refused or cut: a lost request
            session.close()
            return Answer(time.monotonic(), 0, repr(exc))
        if answer.status_code != 200:
            return Answer(time.monotonic(), answer.status_code, answer.text[:300])
        return Answer(time.monotonic(), 200, answer.json()["rayCluster"])


def _calls_go_on(callers: list[Caller], at: float, what: str) -> None:
    """Wait until each caller was answered after ``at`` (the load did not stall)."""
    wait_for(
        lambda: all(any(a.at >= at for a in c.answers) for c in callers),
        timeout=30,
        what=f"calls answered {what}",
    )


def test_no_request_is_lost_across_an_image_upgrade(
    worker: Any, kubesim: Any, live_server: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 2)  # the service's GPU and its surge's, once the hog is gone
    api = as_user(bob)
    first = upgrades.ready_service(api).service.active_cluster
    wait_for(
        lambda: Service.objects.get(request__name="sd").serve_endpoints >= 1,
        timeout=60,
        what="a serve endpoint",
    )
    hog = {"name": "hog", "flavor": "l4", "workers": 1}
    assert api.post("/api/v1/tenants/acme/clusters/", hog, format="json").status_code == 201
    wait_for(lambda: upgrades.row("hog").holds_gpus, timeout=60, what="the other cluster admitted")
    counted_before = api.get(upgrades.SERVICES + "sd/").json()["service_endpoint"]["requests"]

    stop = threading.Event()
    url = f"{live_server.url}/serve/acme/sd/imagine?prompt=a+cat"
    token = AuthToken.objects.create(user=bob)[1]
    callers = [Caller(url, token, stop) for _ in range(CALLERS)]
    for caller in callers:
        caller.start()
    try:
        _calls_go_on(callers, time.monotonic(), "before the upgrade")

        # The new cluster's pods take a while to start, as a real node's do (a switch
        # before they are Ready would show as refused calls: no endpoints), and Serve a
        # while to deploy on its head (kubesim's knob, which KubeRay copies from the
        # RayService onto the clusters it makes).
        kubesim.cluster.startup_delay = STARTUP_SECONDS
        knob = {"metadata": {"annotations": {DEPLOY_KNOB: str(DEPLOY_SECONDS)}}}
        get_gateway().merge_patch("ray.io/v1", "RayService", "sd", knob, "gw-acme")
        # The surge waits for the hog's GPU: nothing changes, the old cluster serves.
        patched = api.patch(upgrades.SERVICES + "sd/", {"image": upgrades.OTHER}, format="json")
        assert patched.status_code == 200, patched.content
        wait_for(
            lambda: (s := upgrades.surge()) is not None and s.queue_reason == "tenant_quota",
            timeout=60,
            what="the surge waiting for quota",
        )
        assert api.get(upgrades.SERVICES + "sd/").json()["upgrade_surge"]["state"] == "waiting"
        _calls_go_on(callers, time.monotonic(), "while the surge waits")

        # Quota frees: admitted, applied, a second cluster charged beside the first.
        assert api.delete("/api/v1/tenants/acme/clusters/hog/").status_code == 202
        wait_for(lambda: len(upgrades.rayclusters()) == 2, timeout=90, what="a second RayCluster")
        (new,) = [rc for rc in upgrades.rayclusters() if rc["metadata"]["name"] != first]
        assert new["metadata"]["annotations"][DEPLOY_KNOB] == str(DEPLOY_SECONDS)
        sd = upgrades.row()
        applied = upgrades.surge()
        assert applied is not None and applied.admitted_at and applied.applied_at
        assert applied.admitted_at <= applied.applied_at
        assert api.get(upgrades.SERVICES + "sd/").json()["upgrade_surge"]["state"] == "applied"
        assert sorted((s.surge, s.gpus) for s in upgrades.open_spans(sd)) == [
            (False, sd.gpus),
            (True, sd.gpus),
        ]
        _calls_go_on(callers, time.monotonic(), "while both clusters run")

        # KubeRay switches the serve service to the new cluster once it serves; the old
        # one runs on (and its surge stays charged) until KubeRay deletes it.
        wait_for(
            lambda: upgrades.row().service.active_cluster not in ("", first),
            timeout=upgrades.SWITCH_AND_CLEANUP,
            what="the switch to the new cluster",
        )
        switched = time.monotonic()
        second = upgrades.row().service.active_cluster
        _calls_go_on(callers, switched, "after the switch")
        assert [rc["metadata"]["name"] for rc in upgrades.rayclusters()] == sorted([first, second])
        assert any(s.surge for s in upgrades.open_spans(sd)), "the surge was released too soon"

        wait_for(
            lambda: [rc["metadata"]["name"] for rc in upgrades.rayclusters()] == [second],
            timeout=upgrades.SWITCH_AND_CLEANUP,
            what="the old cluster deleted",
        )
        wait_for(lambda: upgrades.surge() is None, timeout=60, what="the surge released")
        _calls_go_on(callers, time.monotonic(), "after the old cluster's deletion")
    finally:
        stop.set()
        for caller in callers:
            caller.join(timeout=30)

    answers = [a for c in callers for a in c.answers]
    lost = [a for a in answers if a.status != 200]
    assert not lost, f"{len(lost)} of {len(answers)} calls not answered by Serve: {lost[:5]}"
    # Each caller was served by the old cluster, then by the new one, and never back.
    for caller in callers:
        served = [a.cluster for a in caller.answers]
        assert served[0] == first and served[-1] == second
        assert served == sorted(served, key=lambda c: c == second), "served by the old again"
    # Every call was relayed and counted (the count is exact at any moment).
    counted = api.get(upgrades.SERVICES + "sd/").json()["service_endpoint"]["requests"]
    assert counted - counted_before == len(answers)
    sd = upgrades.row()
    assert sd.state == "ready" and sd.image == upgrades.OTHER
    reasons = [e.reason for e in sd.events.all()]
    assert "surge_admitted" in reasons and "surge_released" in reasons
