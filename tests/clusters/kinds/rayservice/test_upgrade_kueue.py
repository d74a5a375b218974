"""An upgrade in Kueue mode, the real loop: Kueue v0.17-0.19 neither queues nor charges
the second RayCluster KubeRay brings up for a RayService's zero-downtime upgrade (the
Workload's pod sets are the RayService's own, compared by count only, so a new image keeps
the admitted slice), and it ungates that cluster's pods. The image change is applied at
once, no surge is recorded, the switch happens and the Workload stays the one slice: the
re-applied RayService keeps what Kueue wrote on admission, so the new cluster's pods carry
the slice name Kueue ungates them by."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clusters.engine.conftest import wait_for, worker
from tests.clusters.engine.test_jobs_kueue import kubesim
from tests.clusters.kinds.rayservice import upgrades as up
from tests.clusters.kinds.rayservice.test_services_kueue import _workloads
from tests.clusters.kinds.rayservice.upgrades import OTHER, SERVICES, other_image

__all__ = ["kubesim", "other_image", "worker"]  # the engine tests' fixtures, and ours
pytestmark = pytest.mark.usefixtures("other_image")  # the upgrade is to OTHER


def test_an_upgrade_under_kueue_is_applied_at_once_and_switches(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    first = up.ready_service(api).service.active_cluster
    (before,) = _workloads("sd")
    assert api.patch(SERVICES + "sd/", {"image": OTHER}, format="json").status_code == 200
    wait_for(lambda: up.images() == {OTHER}, timeout=60, what="the new image applied")
    assert up.surge() is None

    def switched() -> bool:
        names = [rc["metadata"]["name"] for rc in up.rayclusters()]
        now = up.row().service.active_cluster
        return now not in ("", first) and names == [now]

    wait_for(switched, timeout=240, what="the switch and the old cluster gone")
    assert up.row().state == "ready"
    (after,) = _workloads("sd")
    assert after["metadata"]["name"] == before["metadata"]["name"]
    assert "kueue.x-k8s.io/workload-slice-replacement-for" not in after["metadata"].get(
        "annotations", {}
    )
    # Nothing gangway charges either: the service holds its one GPU, no surge span.
    assert [(s.gpus, s.surge) for s in up.open_spans(up.row())] == [(1, False)]
