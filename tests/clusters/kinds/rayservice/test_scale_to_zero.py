"""Scale to zero through the real loop (PostgreSQL, Redis, a Celery worker, kubesim over
HTTP): a service with the option on and no request for its window gives its GPUs back
(its RayService and pods go) and another request takes them; the next request to its
endpoint wakes it (503 with Retry-After saying it is waking, its place in the queue while
it waits for quota, then 200); without the option an idle service stays; a wrong option
is a 400 that changes nothing. The idle pass is run with ``now`` moved on
(docs/idle.md), so an idle window takes no time."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from clusters.engine import idle
from clusters.kinds.rayservice import scale_to_zero
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterEvent, ClusterRequest, Service, UsageSpan
from tests.clusters.engine.conftest import kubesim, room_for_l4, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION, queued_service
from tests.frontend.test_pages import client_for

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures

SERVICES = "/api/v1/tenants/acme/services/"
ENDPOINT = "/serve/acme/sd/imagine?prompt=a+cat"
BODY = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}


def _row(name: str = "sd") -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=name)


def _caller(user: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {AuthToken.objects.create(user=user)[1]}")


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def _ready(api: Any, body: dict[str, Any], name: str = "sd") -> ClusterRequest:
    created = api.post(SERVICES, body, format="json")
    assert created.status_code == 201, created.content
    wait_for(lambda: _row(name).state == "ready", timeout=120, what=f"{name} ready")
    wait_for(
        lambda: Service.objects.get(request__name=name).serve_endpoints >= 1,
        timeout=60,
        what="a serve endpoint",
    )
    return _row(name)


def _pods(name: str) -> list[dict[str, Any]]:
    return get_gateway().list(
        "v1", "Pod", namespace="gw-acme", label_selector=f"ray.io/originated-from-cr-name={name}"
    )


def test_an_idle_service_scales_to_zero_its_gpus_serve_another_and_a_request_wakes_it(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, vera: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 1)  # one GPU: the service's, then the other request's
    api = as_user(bob)
    body = {**BODY, "scale_to_zero": True, "scale_to_zero_after_minutes": 5}
    row = _ready(api, body)
    caller = _caller(vera)
    answer = caller.get(ENDPOINT)
    assert answer.status_code == 200, _body(answer)
    last = timezone.now()

    # Used within its window: it stays.
    assert scale_to_zero.reclaim_idle(now=last + timedelta(minutes=4)) == []
    assert _row().state == "ready"

    # Five minutes without a request: the idle pass scales it to zero.
    report = idle.check_activity(now=last + timedelta(minutes=6))
    assert report.reclaimed == ["sd"]
    row = _row()
    assert row.state == "suspended" and not row.holds_gpus
    assert row.state_reason.startswith("scaled to zero after 5 min without requests")
    (span,) = UsageSpan.objects.unscoped().filter(cluster_id=row.pk)
    assert span.ended_at is not None  # its usage stops with its GPUs
    wait_for(
        lambda: (
            get_gateway().get("ray.io/v1", "RayService", "sd", "gw-acme") is None
            and not _pods("sd")
        ),
        timeout=60,
        what="its RayService and pods gone",
    )
    detail = api.get(SERVICES + "sd/").json()
    assert detail["state"] == "suspended" and detail["service"]["scale_to_zero"] is True
    for url in ("/t/acme/services/", "/t/acme/services/sd/"):
        page = client_for(bob).get(url).content.decode()
        assert "scaled to zero after 5 min without requests" in page.lower(), url
    assert "data-scaled-to-zero" in page and "data-cold-start" in page

    # Its GPU is free: another request of the tenant takes it.
    hog = {"name": "hog", "flavor": "l4", "workers": 1}
    assert api.post("/api/v1/tenants/acme/clusters/", hog, format="json").status_code == 201
    wait_for(lambda: _row("hog").state == "ready", timeout=90, what="the other cluster ready")

    # A request wakes it: back in the queue, where it waits for that GPU.
    woken = caller.get(ENDPOINT)
    assert woken.status_code == 503 and woken["Retry-After"] == "10"
    said = json.loads(woken.content)["error"]
    assert said["code"] == "waking" and said["cold_start"] is True, said
    assert "scaled to zero and is waking up" in said["message"]
    assert _row().state == "queued" and _row().service.woken_at is not None
    wait_for(lambda: _row().queue_reason, timeout=60, what="its place in the queue")
    waiting = json.loads(caller.get(ENDPOINT).content)["error"]
    assert waiting["code"] == "waking" and waiting["queue"]["position"] == 1, waiting
    assert waiting["queue"]["reason"] == "tenant_quota"
    page = client_for(bob).get("/t/acme/services/sd/").content.decode()
    assert "data-waking" in page

    # The GPU comes back: it is admitted, comes up and serves; 503 "waking" until then.
    assert api.delete("/api/v1/tenants/acme/clusters/hog/").status_code == 202

    def served() -> bool:
        answer = caller.get(ENDPOINT)
        if answer.status_code == 503:
            assert json.loads(answer.content)["error"]["code"] == "waking"
            return False
        assert answer.status_code == 200, _body(answer)
        return True

    wait_for(served, timeout=150, what="the woken service serving")
    reasons = list(ClusterEvent.objects.filter(cluster_id=row.pk).values_list("reason", flat=True))
    assert "scaled_to_zero" in reasons and "woken" in reasons
    # Serving again, it is no longer waking (the next idle pass says so).
    scale_to_zero.reclaim_idle()
    assert _row().service.woken_at is None and _row().holds_gpus


def test_without_the_option_an_idle_service_keeps_its_gpus(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 1)
    row = _ready(as_user(bob), BODY)
    assert row.service.scale_to_zero is False  # off by default
    report = idle.check_activity(now=timezone.now() + timedelta(days=30))
    assert report.reclaimed == []
    row = _row()
    assert row.state == "ready" and row.holds_gpus
    assert get_gateway().get("ray.io/v1", "RayService", "sd", "gw-acme") is not None


def test_a_wrong_option_is_a_400_that_changes_nothing(
    as_user: Any, bob: Any, acme: Any, transactional_db: Any
) -> None:
    api = as_user(bob)
    for wrong in (
        {"scale_to_zero_after_minutes": 1},
        {"scale_to_zero_after_minutes": 10081},
        {"scale_to_zero_after_minutes": "soon"},
        {"scale_to_zero": "maybe"},
    ):
        refused = api.post(SERVICES, {**BODY, "scale_to_zero": True, **wrong}, format="json")
        assert refused.status_code == 400, refused.content
        assert set(refused.json()["error"]["fields"]) == set(wrong), refused.json()
    assert not ClusterRequest.objects.exists()

    row = queued_service(acme, bob)
    before = Service.objects.get(pk=row.pk)
    events = ClusterEvent.objects.count()
    other = STABLE_DIFFUSION.replace("num_replicas: 1", "num_replicas: 2")
    for wrong in (
        {"scale_to_zero": True, "scale_to_zero_after_minutes": 4},
        # A good Serve config beside a wrong window: neither is taken.
        {"serve_config": other, "scale_to_zero_after_minutes": 0},
        {"scale_to_zero": None},
    ):
        refused = api.patch(SERVICES + "sd/", wrong, format="json")
        assert refused.status_code == 400, refused.content
    after = Service.objects.get(pk=row.pk)
    assert (after.scale_to_zero, after.scale_to_zero_after_minutes, after.serve_config) == (
        before.scale_to_zero,
        before.scale_to_zero_after_minutes,
        before.serve_config,
    )
    assert ClusterEvent.objects.count() == events

    # A right one is taken, with an event saying so.
    done = api.patch(
        SERVICES + "sd/",
        {"scale_to_zero": True, "scale_to_zero_after_minutes": 15},
        format="json",
    )
    assert done.status_code == 200, done.content
    serving = done.json()["service"]
    assert serving["scale_to_zero"] is True and serving["scale_to_zero_after_minutes"] == 15
    (event,) = ClusterEvent.objects.filter(cluster_id=row.pk, reason="idle_policy")
    assert event.message == "scale to zero after 15 min without requests"
