"""Capacity on demand in Kueue mode: for a flavor whose node group can grow, the
control plane writes an AdmissionCheck with a ProvisioningRequestConfig and attaches it
to the ClusterQueues; Kueue (emulated by kubesim) then asks the cluster autoscaler
(emulated too) for a gang's nodes before admitting it, and the row says it waits for
nodes, since when, while the autoscaler cannot find room."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from tests.clusters.engine.conftest import wait_for
from tests.clusters.engine.growing_fleet import growing_kubesim, h100_nodes, named_row

CLUSTERS = "/api/v1/tenants/acme/clusters/"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with growing_kubesim(tmp_path, settings, kueue=True) as sim:
        yield sim


def test_a_gang_waits_for_nodes_and_is_admitted_when_they_come(
    worker: Any, kubesim: Any, growing: Any, as_user: Any, alice: Any
) -> None:
    gw = get_gateway()
    api = as_user(alice)
    one = {"name": "one", "kind": "prod", "flavor": "h100", "workers": 1}
    assert api.post(CLUSTERS, one, format="json").status_code == 201
    wait_for(lambda: named_row("one").state == "ready", what="a 1-node cluster ready", timeout=90)
    check = gw.get("kueue.x-k8s.io/v1beta2", "AdmissionCheck", "gangway-capacity")
    assert check is not None and check["spec"]["controllerName"].endswith("provisioning-request")
    queue = gw.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "gw-acme")
    (rule,) = queue["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert rule == {"name": "gangway-capacity", "onFlavors": ["h100"]}

    # Two more whole nodes: the quota has room (24), the node group only one more node.
    two = {"name": "two", "kind": "prod", "flavor": "h100", "workers": 2}
    assert api.post(CLUSTERS, two, format="json").status_code == 201
    waiting = wait_for(
        lambda: ClusterRequest.objects.filter(name="two", queue_reason="waiting_for_nodes").first(),
        what="the row waiting for nodes",
        timeout=60,
    )
    assert waiting.state == "queued" and not waiting.holds_gpus
    assert "waiting for nodes from the cluster autoscaler since" in waiting.queue_message
    detail = api.get(CLUSTERS + "two/").json()
    assert detail["queue"]["reason"] == "waiting_for_nodes"

    # The first cluster goes: its node and one new one hold the gang.
    assert api.delete(CLUSTERS + "one/").status_code == 202
    wait_for(lambda: named_row("two").state == "ready", what="admitted and ready", timeout=120)
    assert h100_nodes() == 2
    requests = kubesim.list("provisioningrequests.autoscaling.x-k8s.io", "gw-acme")
    assert any(
        c["type"] == "Provisioned" and c["status"] == "True"
        for r in requests
        for c in r["status"].get("conditions", [])
    )


def test_when_the_autoscaler_fails_kueue_puts_the_gang_back_in_line(
    worker: Any, kubesim: Any, growing: Any, as_user: Any, alice: Any
) -> None:
    api = as_user(alice)
    one = {"name": "one", "kind": "prod", "flavor": "h100", "workers": 1}
    assert api.post(CLUSTERS, one, format="json").status_code == 201
    wait_for(lambda: named_row("one").state == "ready", what="a 1-node cluster ready", timeout=90)
    two = {"name": "two", "kind": "prod", "flavor": "h100", "workers": 2}
    assert api.post(CLUSTERS, two, format="json").status_code == 201
    # Kueue names its request after the Workload of two's RayCluster.
    (request,) = wait_for(
        lambda: [
            r
            for r in kubesim.list("provisioningrequests.autoscaling.x-k8s.io", "gw-acme")
            if r["metadata"]["name"].startswith("raycluster-two-")
        ],
        what="Kueue's ProvisioningRequest for two",
    )
    # Its pod templates vanish: the autoscaler fails the request (FailedToCreatePods), as
    # cluster-autoscaler does, and Kueue's check goes to Retry.
    gw = get_gateway()
    for template in request["spec"]["podSets"]:
        gw.delete("v1", "PodTemplate", template["podTemplateRef"]["name"], "gw-acme")
    row = wait_for(
        lambda: (
            ClusterRequest.objects.filter(name="two", queue_reason="capacity")
            .exclude(queue_message="")
            .first()
        ),
        what="back in line with the autoscaler's words",
    )
    assert row.state == "queued" and not row.holds_gpus
    assert "could not provide the nodes" in row.queue_message
    assert "Kueue tries again at" in row.queue_message
