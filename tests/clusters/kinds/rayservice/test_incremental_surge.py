"""An incremental upgrade's surge is its step, not a second whole cluster, through the
real loop (kubesim over HTTP, a Celery worker): a service of two guaranteed workers
upgraded with a max surge of 50 % is charged one worker's GPUs for it, and at every look
its old and new clusters together run no more workers than the two guaranteed plus that
one, until the new cluster is promoted, the old one gone and the surge released."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from tests.clusters.engine.conftest import kubesim, room_for_l4, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION
from tests.clusters.kinds.rayservice.upgrades import (
    HALF_AT_A_TIME,
    OTHER,
    SERVICES,
    other_image,
    rayclusters,
    row,
    surge,
    switched_and_released,
)

__all__ = ["kubesim", "other_image", "worker"]  # the engine tests' fixtures, and ours

GUARANTEED, SURGE = 2, 1  # ceil(50 % of 2) workers
BODY = {
    "name": "sd",
    "kind": "prod",
    "flavor": "l4",
    "workers": GUARANTEED,
    "min_workers": GUARANTEED,
    "max_workers": GUARANTEED + 1,
    # One one-GPU model replica: the new cluster serves it on its surge worker alone.
    "serve_config": STABLE_DIFFUSION,
    "upgrade_strategy": HALF_AT_A_TIME,
}


@pytest.fixture(autouse=True)
def _other_image(other_image: None) -> None:
    """The upgrade goes to :data:`OTHER`."""


def _workers() -> dict[str, int]:
    """The service's running worker pods in kubesim, by RayCluster."""
    pods = get_gateway().list("v1", "Pod", namespace="gw-acme")
    out: dict[str, int] = {}
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if labels.get("ray.io/node-type") != "worker" or not str(
            labels.get("ray.io/cluster", "")
        ).startswith("sd-raycluster-"):
            continue
        if (pod.get("status") or {}).get("phase") == "Running":
            out[labels["ray.io/cluster"]] = out.get(labels["ray.io/cluster"], 0) + 1
    return out


def test_an_incremental_upgrade_is_charged_and_held_at_its_step(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, acme: Any, l4: Any
) -> None:
    # Quota for the guaranteed size and the step: a second whole cluster would not fit.
    room_for_l4(acme, l4, GUARANTEED + SURGE)
    api = as_user(alice)
    assert api.post(SERVICES, BODY, format="json").status_code == 201
    wait_for(
        lambda: row().state == "ready" and sum(_workers().values()) == GUARANTEED,
        timeout=120,
        what="the service ready on its two guaranteed workers",
    )
    first = row().service.active_cluster
    whole = row().gpus
    assert whole == GUARANTEED

    assert api.patch(SERVICES + "sd/", {"image": OTHER}, format="json").status_code == 200
    charged = surge()
    assert charged is not None
    assert charged.gpus == Decimal(SURGE) < whole  # the step's GPUs, not a second cluster
    seen: list[dict[str, int]] = []

    def looked() -> bool:
        now = _workers()
        if not seen or seen[-1] != now:
            seen.append(now)
        assert sum(now.values()) <= GUARANTEED + SURGE, seen
        return any(name != first and count for name, count in now.items())

    def capped() -> bool:
        # The new cluster runs a worker while the old one still runs both of its own
        # (Ray's idle timeout keeps them): it may run the surge alone, written on it.
        new = [rc for rc in rayclusters() if rc["metadata"]["name"] != first]
        group = new[0]["spec"]["workerGroupSpecs"][0] if new else {}
        return looked() and group.get("maxReplicas") == SURGE == group.get("minReplicas")

    wait_for(capped, timeout=120, what="a worker of the new cluster running, capped")

    def promoted() -> bool:
        looked()
        return not row().service.pending_cluster and row().service.active_cluster != first

    def where() -> str:
        groups = {
            rc["metadata"]["name"]: {
                k: rc["spec"]["workerGroupSpecs"][0].get(k)
                for k in ("minReplicas", "maxReplicas", "replicas")
            }
            for rc in rayclusters()
        }
        return f"the new cluster promoted: {seen[-3:]}, {row().service.traffic}, {groups}"

    wait_for(promoted, timeout=180, what=where)
    switched_and_released(first, watch_ready=False)
    assert surge() is None
    assert first not in _workers()
    # The new cluster ran workers beside the old one, and never more than the surge allowed.
    assert any(first in look and len(look) == 2 for look in seen), seen
