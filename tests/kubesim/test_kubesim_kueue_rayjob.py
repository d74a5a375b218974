"""Kueue's RayJob integration: a queued RayJob is held suspended with a Workload (head,
worker groups, submitter), unsuspended with the flavor's node labels on admission, and its
Workload finishes (releasing quota) when the RayJob does. Manual clock."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import rayjob
from test_kubesim_kueue import KQ, setup_queues

from kubesim import KubeSim
from kubesim.clock import ManualClock

NS = "t-a"
QUEUE = {"kueue.x-k8s.io/queue-name": "lq"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ksim(clock: ManualClock) -> Iterator[KubeSim]:
    s = KubeSim(kueue=True, clock=clock).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def apis(ksim: KubeSim) -> Iterator[tuple[client.CustomObjectsApi, client.CoreV1Api]]:
    cfg = client.Configuration()
    cfg.host = ksim.url
    api = client.ApiClient(cfg)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    setup_queues(custom, core)
    yield custom, core
    api.close()


def advance(sim: KubeSim, clock: ManualClock, seconds: float) -> None:
    clock.advance(seconds)
    sim.cluster.tick()


def queued_job(name: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    spec.setdefault("shutdownAfterJobFinishes", True)
    return rayjob(name, NS, workers=1, gpus=gpus, labels=dict(QUEUE), **spec)


def get_rj(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    out: dict[str, Any] = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", name)
    return out


def workload_of(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    items = custom.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]
    owners = {
        (
            w["metadata"]["ownerReferences"][0]["kind"],
            w["metadata"]["ownerReferences"][0]["name"],
        ): w
        for w in items
    }
    return owners[("RayJob", name)]


def conds(wl: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in wl["status"]["conditions"]}


def test_a_queued_rayjob_is_admitted_runs_and_finishes_its_workload(
    ksim: KubeSim,
    clock: ManualClock,
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    custom.create_namespaced_custom_object(
        "ray.io",
        "v1",
        NS,
        "rayjobs",
        queued_job("q1", annotations={"kubesim.io/job-run-seconds": "3"}),
    )
    wl = workload_of(custom, "q1")
    assert wl["metadata"]["name"].startswith("rayjob-q1-")
    sets = {ps["name"]: ps for ps in wl["spec"]["podSets"]}
    assert list(sets) == ["head", "gpu", "submitter"]
    assert (sets["head"]["count"], sets["gpu"]["count"], sets["submitter"]["count"]) == (1, 1, 1)
    sub = sets["submitter"]["template"]["spec"]["containers"][0]
    assert sub["name"] == "ray-job-submitter"
    assert sub["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert conds(wl)["Admitted"] == ("True", "Admitted")
    psa = {a["name"]: a["flavors"] for a in wl["status"]["admission"]["podSetAssignments"]}
    assert psa["gpu"] == {"cpu": "cpu", "memory": "cpu", "nvidia.com/gpu": "h100"}

    rj = get_rj(custom, "q1")
    assert rj["spec"]["suspend"] is False
    # Kueue wrote the default submitter template into the spec on admission.
    assert (
        rj["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["name"] == "ray-job-submitter"
    )
    assert rj["status"]["jobDeploymentStatus"] == "Running"
    rc = custom.get_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", rj["status"]["rayClusterName"]
    )
    # The RayJob's RayCluster carries the queue label but is not queued itself.
    assert rc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "lq"
    assert not rc["spec"].get("suspend")
    workloads = custom.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]
    assert len(workloads) == 1
    gpu_selector = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"]
    assert gpu_selector["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cq-a")
    assert cq["status"]["admittedWorkloads"] == 1

    advance(ksim, clock, 5)
    st = get_rj(custom, "q1")["status"]
    assert (st["jobDeploymentStatus"], st["jobStatus"]) == ("Complete", "SUCCEEDED")
    wl = workload_of(custom, "q1")
    assert conds(wl)["Finished"] == ("True", "Succeeded")
    finished = next(c for c in wl["status"]["conditions"] if c["type"] == "Finished")
    assert finished["message"] == "Job finished successfully."
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cq-a")
    assert cq["status"]["admittedWorkloads"] == 0
    gpu_use = {
        r["name"]: r["total"]
        for f in cq["status"]["flavorsUsage"]
        for r in f["resources"]
        if f["name"] == "h100"
    }
    assert gpu_use["nvidia.com/gpu"] == "0"
    events = core.list_namespaced_event(NS, field_selector="reason=FinishedWorkload").items
    assert events and events[0].involved_object.name == "q1"


def test_a_second_rayjob_waits_for_quota_then_runs(
    ksim: KubeSim,
    clock: ManualClock,
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    ann = {"kubesim.io/job-run-seconds": "3"}
    custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", queued_job("big1", gpus=8, annotations=ann)
    )
    custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", queued_job("big2", gpus=8, annotations=ann)
    )
    assert get_rj(custom, "big1")["status"]["jobDeploymentStatus"] == "Running"
    second = get_rj(custom, "big2")
    assert second["spec"]["suspend"] is True
    assert second["status"]["jobDeploymentStatus"] == "Suspended"
    assert conds(workload_of(custom, "big2"))["QuotaReserved"] == ("False", "Pending")
    assert len(core.list_namespaced_pod(NS).items) == 3  # big1's head, worker, submitter
    vis = "apis/visibility.kueue.x-k8s.io/v1beta2"
    url = f"{ksim.url}/{vis}/namespaces/{NS}/localqueues/lq/pendingworkloads"
    with urllib.request.urlopen(url) as resp:
        (item,) = json.load(resp)["items"]
    assert item["metadata"]["ownerReferences"][0]["name"] == "big2"
    assert item["positionInLocalQueue"] == 0

    advance(ksim, clock, 5)
    assert get_rj(custom, "big1")["status"]["jobDeploymentStatus"] == "Complete"
    second = get_rj(custom, "big2")
    assert second["spec"]["suspend"] is False
    assert second["status"]["jobDeploymentStatus"] == "Running"
    assert conds(workload_of(custom, "big2"))["Admitted"] == ("True", "Admitted")


def test_kueue_refuses_a_queued_rayjob_that_keeps_its_cluster(
    ksim: KubeSim, apis: tuple[client.CustomObjectsApi, client.CoreV1Api]
) -> None:
    custom, _ = apis
    with pytest.raises(ApiException) as exc:
        custom.create_namespaced_custom_object(
            "ray.io", "v1", NS, "rayjobs", queued_job("keep", shutdownAfterJobFinishes=False)
        )
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'admission webhook "vrayjob.kb.io" denied the request: spec.shutdownAfterJobFinishes: '
        "Invalid value: false: a kueue managed job should delete the cluster after finishing"
    )


def test_eviction_suspends_the_rayjob_and_requeues_it(
    ksim: KubeSim,
    clock: ManualClock,
    apis: tuple[client.CustomObjectsApi, client.CoreV1Api],
) -> None:
    custom, core = apis
    custom.create_namespaced_custom_object(
        "ray.io",
        "v1",
        NS,
        "rayjobs",
        queued_job("ev", annotations={"kubesim.io/job-run-seconds": "100"}),
    )
    first = get_rj(custom, "ev")["status"]["jobId"]
    req = urllib.request.Request(
        ksim.url + "/_kubesim/kueue/evict",
        data=json.dumps({"namespace": NS, "name": "ev", "reason": "PodsReadyTimeout"}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(req) as resp:
        assert json.load(resp)["status"] == "evicted"
    rj = get_rj(custom, "ev")
    assert rj["spec"]["suspend"] is True
    assert rj["status"]["jobDeploymentStatus"] == "Suspended"
    assert custom.list_namespaced_custom_object("ray.io", "v1", NS, "rayclusters")["items"] == []
    assert core.list_namespaced_pod(NS).items == []
    assert conds(workload_of(custom, "ev"))["Evicted"] == ("True", "PodsReadyTimeout")

    # Kueue's requeue backoff (60 s) runs on the wall clock; emulate it being over.
    wl = workload_of(custom, "ev")
    with ksim.cluster.lock:
        stored = ksim.cluster.store.get("workloads.kueue.x-k8s.io", NS, wl["metadata"]["name"])
        assert stored is not None
        stored["status"]["requeueState"]["requeueAt"] = "2000-01-01T00:00:00Z"
    ksim.cluster.tick()
    rj = get_rj(custom, "ev")
    assert rj["spec"]["suspend"] is False
    assert rj["status"]["jobDeploymentStatus"] == "Running"
    assert rj["status"]["jobId"] != first
