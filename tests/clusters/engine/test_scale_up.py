"""Capacity on demand with the built-in queue: a gang the quota admits but the current
nodes cannot hold, on a flavor whose node group can grow, asks the cluster autoscaler
(emulated by kubesim) for its nodes with a ProvisioningRequest, waits with the
autoscaler's words, is admitted once the request is provisioned, and goes back in line
with a readable reason when the autoscaler fails it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from clusters.models import ClusterRequest
from kubesim import KubeSim
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.growing_fleet import growing_kubesim, h100_nodes, named_row

CLUSTERS = "/api/v1/tenants/acme/clusters/"
PROVREQS = "provisioningrequests.autoscaling.x-k8s.io"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with growing_kubesim(tmp_path, settings) as sim:
        yield sim


def test_a_gang_asks_for_nodes_waits_and_starts_on_them(
    worker: Any, kubesim: Any, growing: Any, as_user: Any, alice: Any
) -> None:
    api = as_user(alice)
    one = {"name": "one", "kind": "prod", "flavor": "h100", "workers": 1}
    assert api.post(CLUSTERS, one, format="json").status_code == 201
    wait_for(lambda: named_row("one").state == "ready", what="a 1-node cluster ready", timeout=60)

    # Two whole nodes: the quota has room (24), the fleet one busy node and room to add
    # one: the autoscaler cannot hold the gang atomically yet, and says so.
    two = {"name": "two", "kind": "prod", "flavor": "h100", "workers": 2}
    assert api.post(CLUSTERS, two, format="json").status_code == 201
    waiting = wait_for(
        lambda: ClusterRequest.objects.filter(
            name="two", queue_reason="waiting_for_nodes", capacity_message__contains="not found"
        ).first(),
        what="waiting for nodes with the autoscaler's words",
        timeout=60,
    )
    assert waiting.state == "queued" and not waiting.holds_gpus
    assert waiting.capacity_request == "two-nodes-1"
    assert "asked the cluster autoscaler for new h100 nodes" in waiting.queue_message
    # The queue page says so, with since when.
    page = Client()
    page.force_login(alice)
    html = page.get("/t/acme/queue/").content.decode()
    assert "waiting for new nodes" in html and "min ago" in html
    (request,) = kubesim.list(PROVREQS, "gw-acme")
    assert request["spec"]["provisioningClassName"].startswith("best-effort-atomic-scale-up")
    assert request["spec"]["podSets"][0]["count"] == 2

    # The first cluster goes: its node and one new one hold the gang.
    assert api.delete(CLUSTERS + "one/").status_code == 202
    wait_for(lambda: named_row("two").state == "ready", what="admitted and ready", timeout=90)
    assert h100_nodes() == 2
    row = named_row("two")
    assert row.events.filter(reason="nodes_provisioned").exists()
    # Nobody waits on the request any more: it is gone, with its pod templates.
    wait_for(lambda: not kubesim.list(PROVREQS, "gw-acme"), what="the request cleaned up")
    assert not kubesim.list("podtemplates", "gw-acme")


def test_a_failed_request_puts_the_gang_back_in_line(
    worker: Any, kubesim: Any, growing: Any, as_user: Any, alice: Any, settings: Any
) -> None:
    api = as_user(alice)
    # Three nodes can never be had (the group grows to two): that is a 400 at once.
    three = {"name": "three", "kind": "prod", "flavor": "h100", "workers": 3}
    assert api.post(CLUSTERS, three, format="json").status_code == 400
    one = {"name": "one", "kind": "prod", "flavor": "h100", "workers": 1}
    assert api.post(CLUSTERS, one, format="json").status_code == 201
    wait_for(lambda: named_row("one").state == "ready", what="ready", timeout=60)
    two = {"name": "two", "kind": "prod", "flavor": "h100", "workers": 2}
    assert api.post(CLUSTERS, two, format="json").status_code == 201
    wait_for(lambda: kubesim.list(PROVREQS, "gw-acme"), what="the request written")

    # The autoscaler gives up on it (as cluster-autoscaler does when a request expires).
    with kubesim.cluster.lock:
        stored = kubesim.cluster.store.get(PROVREQS, "gw-acme", "two-nodes-1")
        failed = copy.deepcopy(stored)
        failed.setdefault("status", {}).setdefault("conditions", []).append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "Expired",
                "message": "ProvisioningRequest is expired",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        )
        kubesim.cluster.update_object(kubesim.cluster.rt(PROVREQS), failed, stored)
    row = wait_for(
        lambda: ClusterRequest.objects.filter(name="two", capacity_state="failed").first(),
        what="the failure folded in",
    )
    assert row.state == "queued"
    assert row.events.filter(reason="capacity_failed").exists()
    wait_for(
        lambda: (
            "could not add h100 nodes: ProvisioningRequest is expired"
            in named_row("two").queue_message
        ),
        what="the reason the user reads",
    )
    assert named_row("two").queue_reason == "capacity"
    wait_for(lambda: not kubesim.list(PROVREQS, "gw-acme"), what="the failed request deleted")

    # After the retry delay it asks again, with a new request.
    ClusterRequest.objects.filter(name="two").update(
        capacity_requested_at=named_row("two").capacity_requested_at - timedelta(minutes=6)
    )
    wait_for(
        lambda: named_row("two").capacity_request == "two-nodes-2", what="asked again", timeout=30
    )
