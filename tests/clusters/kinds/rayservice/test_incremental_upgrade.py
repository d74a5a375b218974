"""An incremental upgrade (``NewClusterWithIncrementalUpgrade``) through the real loop
(kubesim over HTTP, a Celery worker): while KubeRay moves capacity and traffic from the
old cluster to the new one step by step, the row, the API and the service page show
both clusters side by side with each one's target capacity and traffic, and the split
moves from all on the old cluster, through a step, to all on the new one."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clusters.engine.conftest import kubesim, room_for_l4, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.clusters.kinds.rayservice.upgrades import (
    HALF_AT_A_TIME,
    OTHER,
    SERVICES,
    other_image,
    row,
    switched_and_released,
)
from tests.frontend.test_pages import client_for

__all__ = ["kubesim", "other_image", "worker"]  # the engine tests' fixtures, and ours

BODY = {
    "name": "sd",
    "kind": "prod",
    "flavor": "l4",
    "workers": 1,
    "min_workers": 1,
    "max_workers": 2,
    "serve_config": STABLE_DIFFUSION,
    "upgrade_strategy": HALF_AT_A_TIME,
}


@pytest.fixture(autouse=True)
def _other_image(other_image: None) -> None:
    """The upgrade goes to :data:`OTHER`."""


def _split() -> tuple[int, int, int, int] | None:
    """(active capacity, active traffic, pending capacity, pending traffic) on the row."""
    traffic = row().service.traffic
    if not traffic:
        return None
    a, p = traffic["active"], traffic["pending"]
    return (
        a["target_capacity"],
        a["traffic_routed_percent"],
        p["target_capacity"],
        p["traffic_routed_percent"],
    )


def test_an_incremental_upgrade_shows_its_traffic_split_as_it_moves(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, acme: Any, l4: Any
) -> None:
    room_for_l4(acme, l4, 4)
    api = as_user(alice)
    assert api.post(SERVICES, BODY, format="json").status_code == 201
    wait_for(
        lambda: row().state == "ready" and row().service.active_cluster,
        timeout=120,
        what="the service ready",
    )
    first = row().service.active_cluster
    assert _split() is None  # no upgrade, no split
    assert api.get(SERVICES + "sd/").json()["service"]["traffic_split"] is None

    assert api.patch(SERVICES + "sd/", {"image": OTHER}, format="json").status_code == 200
    seen: list[tuple[int, int, int, int]] = []

    def halfway() -> bool:
        split = _split()
        if split is not None and (not seen or seen[-1] != split):
            seen.append(split)
        return split is not None and split[1] == split[3] == 50

    wait_for(halfway, timeout=120, what="half the traffic on the new cluster")
    assert seen[0][1] == 100 and seen[0][3] == 0  # it starts all on the old cluster
    detail = api.get(SERVICES + "sd/").json()["service"]
    split = detail["traffic_split"]
    assert split["active"]["cluster"] == first and split["pending"]["cluster"]
    assert split["pending"]["cluster"] == detail["pending_cluster"]
    assert split["active"]["traffic_routed_percent"] == 50
    assert split["pending"]["traffic_routed_percent"] == 50
    assert split["pending"]["target_capacity"] >= 50
    page = client_for(alice).get("/t/acme/services/sd/").content.decode()
    assert 'data-traffic-split="50/50"' in page and first in page
    assert split["pending"]["cluster"] in page

    switched_and_released(first, watch_ready=True)
    assert row().service.traffic == {}  # promoted: all on the new cluster, no split left
    assert api.get(SERVICES + "sd/").json()["service"]["traffic_split"] is None
    after = client_for(alice).get("/t/acme/services/sd/").content.decode()
    assert "data-traffic-split" not in after
    # Capacity and traffic only ever moved one way, and never past 100 % between them.
    traffic = [(a, p) for _, a, _, p in seen]
    assert traffic == sorted(traffic, key=lambda t: t[1]) and all(a + p == 100 for a, p in traffic)
