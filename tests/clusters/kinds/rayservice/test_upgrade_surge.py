"""An upgrade's surge through the real loop (kubesim over HTTP, a Celery worker): a new
image for a serving service needs a second Ray cluster's GPUs while the first serves.
The surge is charged (a usage span of its own) while both clusters run and released once
KubeRay switched and the old cluster is gone; without quota it waits, says why, and
nothing reaches the RayService until it is admitted; a new Serve config takes none."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, Surge, UsageSpan
from tests.clusters.engine.conftest import kubesim, room_for_l4, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.frontend.test_pages import client_for

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures

SERVICES = "/api/v1/tenants/acme/services/"
OTHER = "rayproject/ray:2.40.0-py310-gpu"
BODY = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
# KubeRay deletes the old cluster rayClusterDeletionDelaySeconds (60) after the switch.
SWITCH_AND_CLEANUP = 240


@pytest.fixture(autouse=True)
def _other_image(settings: Any) -> None:
    """Before the worker starts, so that it allows the second image too."""
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]


def _row(name: str = "sd") -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("service").get(name=name)


def _surge() -> Surge | None:
    return Surge.objects.filter(request__name="sd").first()


def _open_spans(row: ClusterRequest) -> list[UsageSpan]:
    return list(UsageSpan.objects.unscoped().filter(cluster_id=row.pk, ended_at__isnull=True))


def _rayclusters() -> list[dict[str, Any]]:
    return get_gateway().list(
        "ray.io/v1",
        "RayCluster",
        namespace="gw-acme",
        label_selector="ray.io/originated-from-cr-name=sd",
    )


def _images() -> set[str]:
    """The images of the RayService's cluster spec as kubesim holds it."""
    rs = get_gateway().get("ray.io/v1", "RayService", "sd", "gw-acme")
    spec = rs["spec"]["rayClusterConfig"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return {c["image"] for g in groups for c in g["template"]["spec"]["containers"]}


def _ready_service(api: Any) -> ClusterRequest:
    assert api.post(SERVICES, BODY, format="json").status_code == 201
    wait_for(
        lambda: _row().state == "ready" and _row().service.active_cluster,
        timeout=120,
        what="the service ready",
    )
    return _row()


def _switched_and_released(first: str, *, watch_ready: bool) -> None:
    """Wait until KubeRay serves from a new cluster, the old one is gone and the surge is
    released; with ``watch_ready``, the service must stay ready at every look."""

    def done() -> bool:
        row = _row()
        if watch_ready:
            assert row.state == "ready", row.state_reason
        names = [rc["metadata"]["name"] for rc in _rayclusters()]
        return row.service.active_cluster not in ("", first) and names == [
            row.service.active_cluster
        ]

    wait_for(done, timeout=SWITCH_AND_CLEANUP, what="the switch and the old cluster gone")
    wait_for(lambda: _surge() is None, timeout=60, what="the surge released")


def test_an_image_upgrade_charges_its_surge_while_both_clusters_run(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 2)  # the service's GPU and its surge's
    api = as_user(bob)
    row = _ready_service(api)
    first = row.service.active_cluster

    # A new Serve config alone is applied in place: no surge, nothing more charged.
    config = STABLE_DIFFUSION.replace(
        "num_replicas: 1\n      - name: Stable", "num_replicas: 2\n      - name: Stable"
    )
    patched = api.patch(SERVICES + "sd/", {"serve_config": config}, format="json")
    assert patched.status_code == 200 and patched.json()["upgrade_surge"] is None
    assert _surge() is None and len(_open_spans(row)) == 1
    assert _row().service.serve_config == config

    # A new image: its surge is admitted at once (quota is free) and charged.
    patched = api.patch(SERVICES + "sd/", {"image": OTHER}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["upgrade_surge"]["image"] == OTHER
    wait_for(lambda: len(_rayclusters()) == 2, timeout=60, what="a second RayCluster")
    spans = _open_spans(row)
    assert sorted((s.surge, s.gpus) for s in spans) == [(False, row.gpus), (True, row.gpus)]
    surge = _surge()
    assert surge is not None and surge.admitted_at is not None and surge.applied_at is not None
    detail = api.get(SERVICES + "sd/").json()
    assert detail["upgrade_surge"]["state"] == "applied" and _images() == {OTHER}

    _switched_and_released(first, watch_ready=True)
    row = _row()
    (span,) = _open_spans(row)
    assert not span.surge  # the service's own GPUs, now on the new cluster
    closed = UsageSpan.objects.unscoped().get(cluster_id=row.pk, surge=True)
    assert closed.ended_at is not None and closed.gpus == row.gpus
    assert row.state == "ready" and row.image == OTHER
    assert api.get(SERVICES + "sd/").json()["upgrade_surge"] is None
    reasons = [e.reason for e in row.events.all()]
    assert "surge_admitted" in reasons and "surge_released" in reasons


def test_an_upgrade_without_quota_waits_says_why_and_goes_on_when_quota_frees(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 2)
    api = as_user(bob)
    first = _ready_service(api).service.active_cluster
    hog = {"name": "hog", "flavor": "l4", "workers": 1}
    assert api.post("/api/v1/tenants/acme/clusters/", hog, format="json").status_code == 201
    wait_for(lambda: _row("hog").holds_gpus, timeout=60, what="the other cluster admitted")

    assert api.patch(SERVICES + "sd/", {"image": OTHER}, format="json").status_code == 200
    waiting = wait_for(
        lambda: (s := _surge()) is not None and s.queue_reason and s,
        timeout=60,
        what="the surge's standing",
    )
    assert waiting.admitted_at is None and waiting.queue_reason == "tenant_quota"
    said = api.get(SERVICES + "sd/").json()["upgrade_surge"]
    assert said["state"] == "waiting" and said["position"] == 1
    assert said["message"].startswith("upgrade waits for 1 l4 GPU: ")
    page = client_for(bob).get("/t/acme/services/sd/").content.decode()
    assert "upgrade waits for 1 l4 GPU" in page and 'data-upgrade-surge="waiting"' in page
    # Nothing reached the RayService: one cluster, the old image, the row's too.
    assert len(_rayclusters()) == 1 and OTHER not in _images()
    assert _row().image != OTHER and _row().state == "ready"

    # Quota frees: the surge is admitted, the new image applied, the switch follows.
    assert api.delete("/api/v1/tenants/acme/clusters/hog/").status_code == 202
    wait_for(lambda: _images() == {OTHER}, timeout=90, what="the upgrade applied")
    _switched_and_released(first, watch_ready=False)
    assert _row().image == OTHER and _row().state == "ready"
