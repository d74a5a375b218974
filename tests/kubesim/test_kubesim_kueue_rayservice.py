"""A RayService in Kueue mode: Kueue's RayService integration (a top-level job since Kueue
0.17) gives the RayService itself a Workload and holds it through
``spec.rayClusterConfig.suspend``; KubeRay creates no RayCluster while it is held, and the
RayCluster it creates once admitted (with the queue label copied) is not queued again. The
RayService becomes Ready once admitted; a second one waits for quota, initializing and
without a cluster, until the first is deleted. An elastic one (``kueue.x-k8s.io/elastic-job``)
is gated and ungated through its Workload slice; its zero-downtime upgrade keeps that one
slice (Kueue compares pod set counts only) and KubeRay's second cluster runs ungated and
uncharged beside the first until the switch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubesim_helpers import H100
from test_kubesim_kueue import KQ, setup_queues
from test_kubesim_rayservice import gpu_group, rayservice

from kubesim import KubeSim

NS = "t-a"


@pytest.fixture
def apis() -> Iterator[tuple[client.CustomObjectsApi, client.CoreV1Api]]:
    sim = KubeSim(kueue=True).start()
    cfg = client.Configuration()
    cfg.host = sim.url
    api = client.ApiClient(cfg)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    setup_queues(custom, core)
    try:
        yield custom, core
    finally:
        api.close()
        sim.stop()


def queued_service(name: str) -> dict[str, Any]:
    """A RayService with one 8-GPU H100 worker, in local queue ``lq``."""
    body = rayservice(name)
    body["metadata"].update(namespace=NS, labels={"kueue.x-k8s.io/queue-name": "lq"})
    body["spec"]["rayClusterConfig"]["workerGroupSpecs"] = [
        gpu_group(H100, 8, "32", "256Gi", 1, 1, 1)
    ]
    return body


def ready(custom: client.CustomObjectsApi, name: str) -> tuple[str, str]:
    rs = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayservices", name)
    found = next(c for c in rs["status"]["conditions"] if c["type"] == "Ready")
    return found["status"], found["reason"]


def workload(custom: client.CustomObjectsApi, rs_name: str) -> dict[str, Any]:
    """The Workload of the RayService (the only one: its RayCluster gets none)."""
    found = [
        wl
        for wl in custom.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]
        if wl["metadata"]["name"].startswith(f"rayservice-{rs_name}-")
        or wl["metadata"]["ownerReferences"][0]["name"].startswith(f"{rs_name}-raycluster-")
    ]
    assert len(found) == 1, found
    return dict(found[0])


def test_queued_rayservices_wait_for_quota_and_become_ready(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, _ = apis
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", queued_service("one"))
    assert ready(custom, "one") == ("True", "NonZeroServeEndpoints")
    wl = workload(custom, "one")
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "RayService"
    assert [p["name"] for p in wl["spec"]["podSets"]] == ["head", "gpu"]
    assert {c["type"]: c["status"] for c in wl["status"]["conditions"]}["Admitted"] == "True"

    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", queued_service("two"))
    assert ready(custom, "two") == ("False", "Initializing")
    wl = workload(custom, "two")
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "False" and "insufficient unused quota" in reserved["message"]
    rs = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "two")
    assert rs["spec"]["rayClusterConfig"]["suspend"] is True
    clusters = custom.list_namespaced_custom_object("ray.io", "v1", NS, "rayclusters")["items"]
    assert not [c for c in clusters if c["metadata"]["name"].startswith("two-")]

    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "one")
    assert ready(custom, "two") == ("True", "NonZeroServeEndpoints")


def elastic_service(custom: client.CustomObjectsApi, name: str) -> None:
    """Create ``name`` as an elastic job and wait until it is admitted and Ready."""
    body = queued_service(name)
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", body)
    assert ready(custom, name) == ("True", "NonZeroServeEndpoints")


def test_elastic_rayservice_is_gated_and_ungated_by_its_slice(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    elastic_service(custom, "el")
    rs = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "el")
    config = rs["spec"]["rayClusterConfig"]
    gates = [config["headGroupSpec"]["template"]["spec"]["schedulingGates"]]
    gates += [g["template"]["spec"]["schedulingGates"] for g in config["workerGroupSpecs"]]
    assert all({"name": "kueue.x-k8s.io/elastic-job"} in g for g in gates)
    wl = workload(custom, "el")
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job"] == "true"
    pods = core.list_namespaced_pod(NS, label_selector="ray.io/cluster").items
    assert len(pods) == 2 and all(not p.spec.scheduling_gates for p in pods)

    # An update that drops the gate of an elastic service is refused, as Kueue's webhook does.
    del rs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["schedulingGates"]
    with pytest.raises(client.ApiException) as refused:
        custom.replace_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "el", rs)
    assert "must contain the" in refused.value.body


def test_autoscaling_rayservice_must_be_elastic(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, _ = apis
    body = queued_service("auto")
    body["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    with pytest.raises(client.ApiException) as refused:
        custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", body)
    assert "vrayservice.kb.io" in refused.value.body
    assert "a kueue managed service can use autoscaling only" in refused.value.body


def h100_reserved(custom: client.CustomObjectsApi) -> str:
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cq-a")
    flavor = next(f for f in cq["status"]["flavorsReservation"] if f["name"] == "h100")
    return str(next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")["total"])


def test_elastic_rayservice_upgrade_runs_its_second_cluster_unqueued(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    elastic_service(custom, "up")
    first = workload(custom, "up")["metadata"]["name"]
    assert h100_reserved(custom) == "8"  # the whole of cq-a's H100 quota

    rs = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "up")
    active = rs["status"]["activeServiceStatus"]["rayClusterName"]
    config = rs["spec"]["rayClusterConfig"]
    for group in [config["headGroupSpec"], *config["workerGroupSpecs"]]:
        for container in group["template"]["spec"]["containers"]:
            container["image"] = "rayproject/ray:2.40.0"
    custom.replace_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "up", rs)

    both_ran = False
    for _ in range(300):
        rs = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "up")
        pods = core.list_namespaced_pod(NS, label_selector="ray.io/cluster").items
        running = {p.metadata.labels["ray.io/cluster"] for p in pods if p.status.phase == "Running"}
        if len(running) == 2:
            both_ran = True
            # Kueue charges the RayService's one slice only: the second cluster is not counted.
            assert (
                h100_reserved(custom) == "8" and workload(custom, "up")["metadata"]["name"] == first
            )
        if rs["status"]["activeServiceStatus"]["rayClusterName"] != active:
            break
        time.sleep(0.1)
    assert both_ran and rs["status"]["activeServiceStatus"]["rayClusterName"] != active
    assert all(not p.spec.scheduling_gates for p in pods)
    wl = workload(custom, "up")
    assert wl["metadata"]["name"] == first and "workload-slice-replacement-for" not in str(wl)
