"""End to end through kubesim: a cluster with its own image, environment variables and
container_gpus is admitted by the namespace's Pod Security (baseline), becomes ready,
and its worker pods carry the CDI init container and the variables."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from tests.clusters.engine.conftest import wait_for

OTHER = "rayproject/ray:2.40.0-py310-gpu"


@pytest.fixture(autouse=True)
def _nested_settings(settings: Any) -> None:
    """Before the worker starts, so that it runs with them too."""
    settings.RAY_IMAGE_ALLOWLIST = [settings.RAY_IMAGE_DEFAULT, OTHER]
    settings.CONTAINER_GPUS_SECCOMP_PROFILE = "profiles/gangway-podman.json"


def test_a_nested_container_cluster_runs_on_a_baseline_tenant(
    worker: Any, as_user: Any, bob: Any
) -> None:
    body = {
        "name": "nested",
        "flavor": "l4",
        "image": OTHER,
        "env": {"WANDB_MODE": "offline"},
        "container_gpus": True,
    }
    response = as_user(bob).post("/api/v1/tenants/acme/clusters/", body, format="json")
    assert response.status_code == 201, response.content
    pk = ClusterRequest.objects.unscoped().get(name="nested").pk

    def row() -> Any:
        return ClusterRequest.objects.unscoped().get(pk=pk)

    try:
        # The worker process may take a while to start on a loaded machine: a liveness
        # deadline, not a speed goal.
        wait_for(lambda: row().state == "ready", what="ready", timeout=120)
    except AssertionError:
        r = row()
        events = get_gateway().list("v1", "Event")
        raise AssertionError(
            (r.state, r.state_reason, r.last_error, [e.get("message") for e in events][-8:])
        ) from None
    gw = get_gateway()
    (pod,) = gw.list("v1", "Pod", label_selector="ray.io/cluster=nested,ray.io/node-type=worker")
    spec = pod["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["gpu-cdi-spec"]
    ray = spec["containers"][0]
    assert ray["image"] == OTHER
    assert {"name": "WANDB_MODE", "value": "offline"} in ray["env"]
