"""An upgrade's surge through the real loop (kubesim over HTTP, a Celery worker): a new
image for a serving service needs a second Ray cluster's GPUs while the first serves.
The surge is charged (a usage span of its own) while both clusters run and released once
KubeRay switched and the old cluster is gone; without quota it waits, says why, and
nothing reaches the RayService until it is admitted; a new Serve config takes none."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.models import UsageSpan
from tests.clusters.engine.conftest import kubesim, room_for_l4, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.clusters.kinds.rayservice.upgrades import (
    OTHER,
    SERVICES,
    images,
    open_spans,
    other_image,
    rayclusters,
    ready_service,
    row,
    surge,
    switched_and_released,
)
from tests.frontend.test_pages import client_for

__all__ = ["kubesim", "other_image", "worker"]  # the engine tests' fixtures, and ours


@pytest.fixture(autouse=True)
def _other_image(other_image: None) -> None:
    """Every test here upgrades to :data:`OTHER`."""


def test_an_image_upgrade_charges_its_surge_while_both_clusters_run(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 2)  # the service's GPU and its surge's
    api = as_user(bob)
    sd = ready_service(api)
    first = sd.service.active_cluster

    # A new Serve config alone is applied in place: no surge, nothing more charged.
    config = STABLE_DIFFUSION.replace(
        "num_replicas: 1\n      - name: Stable", "num_replicas: 2\n      - name: Stable"
    )
    patched = api.patch(SERVICES + "sd/", {"serve_config": config}, format="json")
    assert patched.status_code == 200 and patched.json()["upgrade_surge"] is None
    assert surge() is None and len(open_spans(sd)) == 1
    assert row().service.serve_config == config

    # A new image: its surge is admitted at once (quota is free) and charged.
    patched = api.patch(SERVICES + "sd/", {"image": OTHER}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["upgrade_surge"]["image"] == OTHER
    wait_for(lambda: len(rayclusters()) == 2, timeout=60, what="a second RayCluster")
    spans = open_spans(sd)
    assert sorted((s.surge, s.gpus) for s in spans) == [(False, sd.gpus), (True, sd.gpus)]
    applied = surge()
    assert applied is not None and applied.admitted_at and applied.applied_at
    detail = api.get(SERVICES + "sd/").json()
    assert detail["upgrade_surge"]["state"] == "applied" and images() == {OTHER}

    switched_and_released(first, watch_ready=True)
    sd = row()
    (span,) = open_spans(sd)
    assert not span.surge  # the service's own GPUs, now on the new cluster
    closed = UsageSpan.objects.unscoped().get(cluster_id=sd.pk, surge=True)
    assert closed.ended_at is not None and closed.gpus == sd.gpus
    assert sd.state == "ready" and sd.image == OTHER
    assert api.get(SERVICES + "sd/").json()["upgrade_surge"] is None
    reasons = [e.reason for e in sd.events.all()]
    assert "surge_admitted" in reasons and "surge_released" in reasons


def test_an_upgrade_without_quota_waits_says_why_and_goes_on_when_quota_frees(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 2)
    api = as_user(bob)
    first = ready_service(api).service.active_cluster
    hog = {"name": "hog", "flavor": "l4", "workers": 1}
    assert api.post("/api/v1/tenants/acme/clusters/", hog, format="json").status_code == 201
    wait_for(lambda: row("hog").holds_gpus, timeout=60, what="the other cluster admitted")

    assert api.patch(SERVICES + "sd/", {"image": OTHER}, format="json").status_code == 200
    waiting = wait_for(
        lambda: (s := surge()) is not None and s.queue_reason and s,
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
    assert len(rayclusters()) == 1 and OTHER not in images()
    assert row().image != OTHER and row().state == "ready"

    # Quota frees: the surge is admitted, the new image applied, the switch follows.
    assert api.delete("/api/v1/tenants/acme/clusters/hog/").status_code == 202
    wait_for(lambda: images() == {OTHER}, timeout=90, what="the upgrade applied")
    switched_and_released(first, watch_ready=False)
    assert row().image == OTHER and row().state == "ready"
