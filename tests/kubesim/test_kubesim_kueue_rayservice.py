"""A RayService in Kueue mode: kubesim's Kueue queues the RayCluster KubeRay creates for it
(the RayService's queue label is copied onto it, and Kueue's RayCluster integration holds
it suspended until its Workload is admitted). The RayService becomes Ready once admitted; a
second one waits for quota, initializing, until the first is deleted."""

from __future__ import annotations

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
    """The Workload of the RayService's RayCluster."""
    rs = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayservices", rs_name)
    st = rs["status"]
    cluster = (st["activeServiceStatus"] or st["pendingServiceStatus"])["rayClusterName"]
    for wl in custom.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]:
        if wl["metadata"]["ownerReferences"][0]["name"] == cluster:
            return dict(wl)
    raise AssertionError(f"no Workload for {cluster}")


def test_queued_rayservices_wait_for_quota_and_become_ready(
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", queued_service("one"))
    assert ready(custom, "one") == ("True", "NonZeroServeEndpoints")
    wl = workload(custom, "one")
    assert wl["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
    assert {c["type"]: c["status"] for c in wl["status"]["conditions"]}["Admitted"] == "True"

    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", queued_service("two"))
    assert ready(custom, "two") == ("False", "Initializing")
    wl = workload(custom, "two")
    reserved = next(c for c in wl["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert reserved["status"] == "False" and "insufficient unused quota" in reserved["message"]
    cluster = wl["metadata"]["ownerReferences"][0]["name"]
    rc = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", cluster)
    assert rc["spec"]["suspend"] is True
    assert not core.list_namespaced_pod(NS, label_selector=f"ray.io/cluster={cluster}").items

    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayservices", "one")
    assert ready(custom, "two") == ("True", "NonZeroServeEndpoints")
