"""Services in Kueue mode: the RayService joins the tenant's LocalQueue as an elastic job
(Kueue's RayService integration, emulated by kubesim), Kueue gives it a Workload of its
own, the row follows Kueue's verdict (waiting with Kueue's reason, admitted, starting,
ready), and deleting the service takes the Workload with it; one scaled to zero leaves
Kueue (no Workload) until a request queues its RayService again."""

from __future__ import annotations

import json
import urllib.request
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from clusters.engine import idle
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, Service, UsageSpan
from tests.clusters.engine.conftest import wait_for, worker
from tests.clusters.engine.test_jobs_kueue import kubesim
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

__all__ = ["kubesim", "worker"]  # the Kueue engine tests' fixtures: kubesim with Kueue

SERVICES = "/api/v1/tenants/acme/services/"
CLUSTERS = "/api/v1/tenants/acme/clusters/"
NS = "gw-acme"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def _workloads(name: str) -> list[dict[str, Any]]:
    """The Workloads Kueue made for RayService ``name`` (owned by it)."""
    return [
        wl
        for wl in get_gateway().list("kueue.x-k8s.io/v1beta2", "Workload", namespace=NS)
        if any(
            o.get("kind") == "RayService" and o.get("name") == name
            for o in wl["metadata"].get("ownerReferences") or []
        )
    ]


def _conditions(wl: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}


def test_a_service_is_queued_admitted_served_and_deleted_by_kueue(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    body = {"name": "ksd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
    assert api.post(SERVICES, body, format="json").status_code == 201
    gw = get_gateway()
    rs = wait_for(lambda: gw.get("ray.io/v1", "RayService", "ksd", NS), what="the RayService")
    meta = rs["metadata"]
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "gangway"
    assert meta["annotations"]["kueue.x-k8s.io/elastic-job"] == "true"
    (wl,) = wait_for(lambda: _workloads("ksd"), what="Kueue's Workload of the RayService")
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job"] == "true"
    sets = wl["spec"]["podSets"]
    assert len(sets) == 2 and sets[0]["name"] == "head"  # the head and the worker group

    row = wait_for(lambda: (r := _row("ksd")).state == "ready" and r, what="ready", timeout=120)
    assert _conditions(_workloads("ksd")[0])["Admitted"] == "True"
    assert row.events.filter(to_state="starting", message__startswith="admitted by Kueue").exists()
    assert row.holds_gpus and row.service.active_cluster.startswith("ksd-raycluster-")
    # Only the RayService is queued: the RayCluster KubeRay made for it has no Workload.
    owners = {
        o["kind"]
        for w in gw.list("kueue.x-k8s.io/v1beta2", "Workload", namespace=NS)
        for o in w["metadata"]["ownerReferences"]
    }
    assert owners == {"RayService"}

    assert api.delete(SERVICES + "ksd/").status_code == 202
    done = wait_for(lambda: (r := _row("ksd")).state == "deleted" and r, what="deleted")
    assert not done.holds_gpus
    assert UsageSpan.objects.unscoped().get(cluster_id=done.pk).ended_at is not None
    wait_for(lambda: not _workloads("ksd"), what="the Workload gone with the RayService")


def test_a_service_that_does_not_fit_waits_with_kueues_reason(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, bob: Any
) -> None:
    hog = {"name": "khog", "kind": "prod", "flavor": "h100", "workers": 2}
    assert as_user(alice).post(CLUSTERS, hog, format="json").status_code == 201
    wait_for(lambda: _row("khog").state == "ready", what="acme's H100 quota taken", timeout=90)

    body = {"name": "kwait", "flavor": "h100", "workers": 1, "serve_config": STABLE_DIFFUSION}
    assert as_user(bob).post(SERVICES, body, format="json").status_code == 201

    def told() -> ClusterRequest | None:
        row = _row("kwait")
        return row if row.queue_message.startswith("Kueue:") and row.queue_position else None

    waiting = wait_for(told, what="Kueue's position and reason on the service")
    assert waiting.state == "queued" and not waiting.holds_gpus
    assert waiting.queue_reason in ("tenant_quota", "cohort_quota")
    listed = as_user(bob).get("/api/v1/tenants/acme/queue/").json()
    entries = listed["results"] if isinstance(listed, dict) else listed
    (entry,) = [e for e in entries if e["name"] == "kwait"]
    assert entry["message"].startswith("Kueue:") and entry["position"] == 1
    rs = get_gateway().get("ray.io/v1", "RayService", "kwait", NS)
    assert rs["spec"]["rayClusterConfig"]["suspend"] is True  # held by Kueue
    assert not get_gateway().list(
        "ray.io/v1",
        "RayCluster",
        namespace=NS,
        label_selector="ray.io/originated-from-cr-name=kwait",
    )

    assert as_user(alice).delete(CLUSTERS + "khog/").status_code == 202
    wait_for(lambda: _row("kwait").state == "ready", what="admitted and ready", timeout=120)


def test_a_service_kueue_evicts_goes_back_in_line(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    body = {"name": "kev", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
    assert as_user(bob).post(SERVICES, body, format="json").status_code == 201
    wait_for(lambda: _row("kev").state == "ready", what="ready", timeout=120)
    selector = f"ray.io/cluster={Service.objects.get(pk=_row('kev').pk).active_cluster}"
    assert get_gateway().list("v1", "Pod", namespace=NS, label_selector=selector)
    request = urllib.request.Request(
        f"{kubesim.url}/_kubesim/kueue/evict",
        data=json.dumps({"namespace": NS, "name": "kev", "reason": "InactiveWorkload"}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=5).read()
    row = wait_for(
        lambda: (r := _row("kev")).state == "queued" and r, what="the eviction folded into the row"
    )
    assert row.events.filter(reason="InactiveWorkload", to_state="queued").exists()
    assert not row.holds_gpus
    assert UsageSpan.objects.unscoped().get(cluster_id=row.pk).ended_at is not None
    rs = get_gateway().get("ray.io/v1", "RayService", "kev", NS)
    assert rs["spec"]["rayClusterConfig"]["suspend"] is True  # held again by Kueue
    wait_for(
        lambda: not get_gateway().list("v1", "Pod", namespace=NS, label_selector=selector),
        what="the evicted service's pods gone",
    )


def test_a_service_scaled_to_zero_leaves_kueue_and_a_request_queues_it_again(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, vera: Any
) -> None:
    api = as_user(bob)
    body = {
        "name": "kzero",
        "flavor": "l4",
        "workers": 1,
        "serve_config": STABLE_DIFFUSION,
        "scale_to_zero": True,
        "scale_to_zero_after_minutes": 5,
    }
    assert api.post(SERVICES, body, format="json").status_code == 201
    wait_for(lambda: _row("kzero").state == "ready", what="ready", timeout=120)
    assert idle.check_activity(now=timezone.now() + timedelta(minutes=6)).reclaimed == ["kzero"]
    row = _row("kzero")
    assert row.state == "suspended" and not row.holds_gpus
    wait_for(lambda: not _workloads("kzero"), what="its RayService and Workload gone")

    caller = Client(HTTP_AUTHORIZATION=f"Bearer {AuthToken.objects.create(user=vera)[1]}")
    woken = caller.get("/serve/acme/kzero/")
    assert woken.status_code == 503 and json.loads(woken.content)["error"]["code"] == "waking"
    wait_for(lambda: _workloads("kzero"), what="a Workload of the RayService written anew")
    wait_for(lambda: _row("kzero").state == "ready", what="admitted by Kueue, ready", timeout=120)
    assert _row("kzero").holds_gpus
    wait_for(lambda: caller.get("/serve/acme/kzero/").status_code == 200, what="served", timeout=60)
