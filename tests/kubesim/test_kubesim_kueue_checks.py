"""Kueue's ProvisioningRequest admission check over HTTP: a Workload reserves quota, Kueue
asks the (emulated) cluster autoscaler for the capacity with a ProvisioningRequest, and
the job starts only once it is provisioned; failures are retried with backoff, then
rejected."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubesim_helpers import H100, pod_manifest, raycluster

from kubesim import KubeSim
from kubesim.clock import ManualClock

KQ = ("kueue.x-k8s.io", "v1beta2")
AS = ("autoscaling.x-k8s.io", "v1")
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK = "check-capacity.autoscaling.x-k8s.io"
NS = "t"
FLEET: dict[str, Any] = {
    "name": "k",
    "pools": [
        {
            "name": "h100",
            "count": 1,
            "maxCount": 3,
            "labels": {"nvidia.com/gpu.product": H100},
            "allocatable": {"cpu": "192", "memory": "1800Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        },
        {"name": "cpu", "count": 1, "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    ],
}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def ksim(clock: ManualClock) -> Iterator[KubeSim]:
    s = KubeSim(fleet=FLEET, kueue=True, clock=clock).start()
    yield s
    s.stop()


@pytest.fixture
def api(ksim: KubeSim) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    cfg.host = ksim.url
    a = client.ApiClient(cfg)
    yield a
    a.close()


@pytest.fixture
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def co(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def wait_for(pred: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def setup(
    co: client.CustomObjectsApi,
    v1: client.CoreV1Api,
    cls: str = ATOMIC,
    params: dict[str, str] | None = None,
    retry: dict[str, int] | None = None,
    more_checks: tuple[str, ...] = (),
    on_flavors: list[str] | None = None,
) -> None:
    """Flavors, a provisioning check (and ``more_checks`` of a controller kubesim does not
    run) on a ClusterQueue with 24 GPUs, a LocalQueue."""
    for name, labels in (("h100", {"nvidia.com/gpu.product": H100}), ("cpu", {})):
        co.create_cluster_custom_object(
            *KQ,
            "resourceflavors",
            {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}},
        )
    prc: dict[str, Any] = {
        "provisioningClassName": cls,
        "managedResources": ["nvidia.com/gpu"],
    }
    if params:
        prc["parameters"] = params
    if retry:
        prc["retryStrategy"] = retry
    co.create_cluster_custom_object(
        *KQ,
        "provisioningrequestconfigs",
        {"kind": "ProvisioningRequestConfig", "metadata": {"name": "prov"}, "spec": prc},
    )
    co.create_cluster_custom_object(
        *KQ,
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "capacity"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "prov",
                },
            },
        },
    )
    for name in more_checks:
        co.create_cluster_custom_object(
            *KQ,
            "admissionchecks",
            {
                "kind": "AdmissionCheck",
                "metadata": {"name": name},
                "spec": {"controllerName": "example.com/manual-approval"},
            },
        )
        # What that check's own controller would do: mark it Active.
        co.patch_cluster_custom_object_status(
            *KQ,
            "admissionchecks",
            name,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Active",
                            "message": "The admission check is active",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ]
                }
            },
        )
    co.create_cluster_custom_object(
        *KQ,
        "clusterqueues",
        {
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "admissionChecksStrategy": {
                    "admissionChecks": [
                        {"name": n, **({"onFlavors": on_flavors} if on_flavors else {})}
                        for n in ("capacity", *more_checks)
                    ]
                },
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "cpu",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "1000"},
                                    {"name": "memory", "nominalQuota": "10Ti"},
                                ],
                            }
                        ],
                    },
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 24}],
                            }
                        ],
                    },
                ],
            },
        },
    )
    v1.create_namespace({"metadata": {"name": NS}})
    co.create_namespaced_custom_object(
        *KQ,
        NS,
        "localqueues",
        {"kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}},
    )


def submit(co: client.CustomObjectsApi, name: str, workers: int, gpus: int = 8) -> None:
    body = raycluster(
        name, NS, workers=workers, gpus=gpus, labels={"kueue.x-k8s.io/queue-name": "lq"}
    )
    co.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", body)


def workload(co: client.CustomObjectsApi) -> dict[str, Any]:
    items = co.list_namespaced_custom_object(*KQ, NS, "workloads")["items"]
    assert len(items) == 1
    result: dict[str, Any] = items[0]
    return result


def wl_cond(wl: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == ctype), None)


def check_state(co: client.CustomObjectsApi) -> dict[str, Any]:
    states = workload(co)["status"]["admissionChecks"]
    assert [s["name"] for s in states] == ["capacity"]
    result: dict[str, Any] = states[0]
    return result


def requests(co: client.CustomObjectsApi) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = co.list_namespaced_custom_object(*AS, NS, "provisioningrequests")[
        "items"
    ]
    return items


def suspended(co: client.CustomObjectsApi, name: str) -> bool:
    rc = co.get_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", name)
    return bool(rc["spec"].get("suspend"))


def test_admission_check_is_active(co: client.CustomObjectsApi, v1: client.CoreV1Api) -> None:
    setup(co, v1)
    ac = co.get_cluster_custom_object(*KQ, "admissionchecks", "capacity")
    active = ac["status"]["conditions"][0]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Active")
    co.create_cluster_custom_object(
        *KQ,
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "broken"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "missing",
                },
            },
        },
    )
    broken = co.get_cluster_custom_object(*KQ, "admissionchecks", "broken")
    assert broken["status"]["conditions"][0]["reason"] == "BadParametersRef"


def test_pending_then_ready_then_admitted(
    co: client.CustomObjectsApi, v1: client.CoreV1Api, clock: ManualClock
) -> None:
    setup(co, v1)
    # A pod outside Kueue holds the one H100 node: three more nodes would be needed and
    # the group may add only two, so the atomic request cannot be provisioned yet.
    v1.create_namespaced_pod("default", pod_manifest("squatter", gpu=8, tolerate=True))
    submit(co, "job", workers=3)
    wl = workload(co)
    name = wl["metadata"]["name"]
    assert wl_cond(wl, "QuotaReserved")["status"] == "True"  # type: ignore[index]
    admitted = wl_cond(wl, "Admitted")
    assert admitted and (admitted["status"], admitted["reason"]) == ("False", "UnsatisfiedChecks")
    assert suspended(co, "job")
    state = check_state(co)
    assert state["state"] == "Pending"
    assert state["message"] == "Capacity is not found, CA will try to find it later."
    [pr] = requests(co)
    assert pr["metadata"]["name"] == f"{name}-capacity-1"
    assert pr["metadata"]["ownerReferences"][0]["name"] == name
    assert pr["spec"]["provisioningClassName"] == ATOMIC
    # Only the GPU pod set is in the request (the config manages nvidia.com/gpu).
    assert pr["spec"]["podSets"] == [
        {"podTemplateRef": {"name": f"ppt-{name}-capacity-1-gpu"}, "count": 3}
    ]
    tpl = v1.read_namespaced_pod_template(f"ppt-{name}-capacity-1-gpu", NS)
    assert tpl.template.spec.node_selector == {"nvidia.com/gpu.product": H100}
    assert tpl.metadata.owner_references[0].kind == "ProvisioningRequest"
    cq = co.get_cluster_custom_object(*KQ, "clusterqueues", "cq")
    assert (cq["status"]["reservingWorkloads"], cq["status"]["admittedWorkloads"]) == (1, 0)

    # The node is freed: one worker fits it, the group grows by two for the others.
    v1.delete_namespaced_pod("squatter", "default")
    state = check_state(co)
    assert state["state"] == "Ready"
    assert state["podSetUpdates"] == [
        {
            "name": "gpu",
            "annotations": {
                "autoscaling.x-k8s.io/consume-provisioning-request": f"{name}-capacity-1",
                "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
            },
        }
    ]
    admitted = wl_cond(workload(co), "Admitted")
    assert admitted and admitted["status"] == "True"
    assert not suspended(co, "job")
    workers = [
        p
        for p in v1.list_namespaced_pod(NS, label_selector="ray.io/node-type=worker").items
        if p.metadata.annotations.get("autoscaling.x-k8s.io/consume-provisioning-request")
        == f"{name}-capacity-1"
    ]
    assert len(workers) == 3
    assert sum(1 for p in workers if p.spec.node_name) == 1  # the others wait for their nodes
    clock.advance(30)
    wait_for(
        lambda: all(
            p.status.phase == "Running"
            for p in v1.list_namespaced_pod(NS, label_selector="ray.io/node-type=worker").items
        )
    )
    assert len(v1.list_node().items) == 4


def test_failure_is_retried_with_backoff_then_rejected(
    co: client.CustomObjectsApi, v1: client.CoreV1Api, clock: ManualClock
) -> None:
    # check-capacity with noRetry: a miss is a final Failed, which Kueue retries once.
    setup(
        co,
        v1,
        cls=CHECK,
        params={"noRetry": "true"},
        retry={"backoffLimitCount": 1, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800},
    )
    submit(co, "job", workers=2)  # 16 GPUs; the cluster has 8
    wl = workload(co)
    name = wl["metadata"]["name"]
    evicted = wl_cond(wl, "Evicted")
    assert evicted and (evicted["status"], evicted["reason"]) == ("True", "AdmissionCheck")
    assert evicted["message"] == "At least one admission check is false"
    assert wl_cond(wl, "QuotaReserved")["status"] == "False"  # type: ignore[index]
    assert "admission" not in wl["status"]
    assert wl["status"]["requeueState"]["count"] == 1
    [state] = wl["status"]["admissionChecks"]
    assert state["state"] == "Pending"
    assert state["message"] == "Reset to Pending after eviction. Previously: Retry"
    [pr] = requests(co)
    assert pr["metadata"]["name"] == f"{name}-capacity-1"
    assert suspended(co, "job")

    clock.advance(61)  # the backoff: requeued, quota reserved again, attempt 2
    wl = wait_for(lambda: (w := workload(co)) and w["spec"].get("active") is False and w)
    assert [p["metadata"]["name"] for p in requests(co)] == [f"{name}-capacity-2"]
    evicted = wl_cond(wl, "Evicted")
    assert evicted and evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert evicted["message"] == (
        'The workload is deactivated due to AdmissionCheck in Rejected state: "capacity"'
    )
    assert wl["status"]["admissionChecks"][0]["message"] == (
        "Reset to Pending after eviction. Previously: Rejected"
    )
    assert suspended(co, "job")
    cq = co.get_cluster_custom_object(*KQ, "clusterqueues", "cq")
    assert cq["status"]["reservingWorkloads"] == 0


def test_no_managed_resource_needs_no_request(
    co: client.CustomObjectsApi, v1: client.CoreV1Api
) -> None:
    setup(co, v1)
    submit(co, "cpu-only", workers=1, gpus=0)
    state = check_state(co)
    assert (state["state"], state["message"]) == ("Ready", "the provisioning request is not needed")
    assert wl_cond(workload(co), "Admitted")["status"] == "True"  # type: ignore[index]
    assert not suspended(co, "cpu-only")
    assert requests(co) == []


def test_deleting_the_job_deletes_its_request(
    co: client.CustomObjectsApi, v1: client.CoreV1Api
) -> None:
    setup(co, v1)
    submit(co, "job", workers=1)
    assert check_state(co)["state"] == "Ready"
    assert len(requests(co)) == 1
    assert len(v1.list_namespaced_pod_template(NS).items) == 1
    co.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", "job")
    assert requests(co) == []
    assert v1.list_namespaced_pod_template(NS).items == []


def test_booking_expired_before_admission_is_retried(
    co: client.CustomObjectsApi, v1: client.CoreV1Api, clock: ManualClock
) -> None:
    # A second check that nothing decides keeps the Workload from being admitted.
    setup(co, v1, more_checks=("approval",))
    submit(co, "job", workers=1)
    wl = workload(co)
    name = wl["metadata"]["name"]
    states = {s["name"]: s["state"] for s in wl["status"]["admissionChecks"]}
    assert states == {"capacity": "Ready", "approval": "Pending"}
    assert wl_cond(wl, "Admitted")["status"] == "False"  # type: ignore[index]
    clock.advance(600)  # CA's booking time: BookingExpired before admission
    wl = wait_for(lambda: (w := workload(co)) and wl_cond(w, "Evicted") and w)
    assert wl_cond(wl, "Evicted")["reason"] == "AdmissionCheck"  # type: ignore[index]
    events = v1.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={name},reason=AdmissionCheckUpdated"
    ).items
    assert any(
        "Retrying after booking expired: Capacity reservation time is expired" in e.message
        for e in events
    )
    clock.advance(60)  # the first retry's backoff
    wait_for(lambda: [p["metadata"]["name"] for p in requests(co)] == [f"{name}-capacity-2"])
    state = wait_for(
        lambda: next(
            (
                s
                for s in workload(co)["status"].get("admissionChecks", [])
                if s["name"] == "capacity"
            ),
            None,
        )
    )
    assert state["state"] == "Ready"


def test_checks_apply_only_on_their_flavors(
    co: client.CustomObjectsApi, v1: client.CoreV1Api
) -> None:
    setup(co, v1, on_flavors=["l4"])  # the Workload gets h100 and cpu: no check for it
    submit(co, "job", workers=1)
    wl = workload(co)
    assert "admissionChecks" not in wl["status"]
    assert wl_cond(wl, "Admitted")["status"] == "True"  # type: ignore[index]
    assert requests(co) == []
    assert not suspended(co, "job")


def test_a_queue_with_a_missing_or_inactive_check_admits_nothing(
    co: client.CustomObjectsApi, v1: client.CoreV1Api
) -> None:
    setup(co, v1)
    cq = co.get_cluster_custom_object(*KQ, "clusterqueues", "cq")
    co.patch_cluster_custom_object(
        *KQ,
        "clusterqueues",
        "cq",
        {
            "spec": {
                "admissionChecksStrategy": {
                    "admissionChecks": [{"name": "capacity"}, {"name": "later"}]
                }
            }
        },
    )
    submit(co, "job", workers=1)
    cq = co.get_cluster_custom_object(*KQ, "clusterqueues", "cq")
    active = cq["status"]["conditions"][0]
    assert (active["status"], active["reason"]) == ("False", "AdmissionCheckNotFound")
    assert active["message"] == (
        "Can't admit new workloads: references missing AdmissionCheck(s): later."
    )
    qr = wl_cond(workload(co), "QuotaReserved")
    assert qr and (qr["status"], qr["reason"]) == ("False", "Inadmissible")
    assert qr["message"] == "ClusterQueue cq is inactive"
    # The check appears, but no controller of its kind runs: inactive.
    co.create_cluster_custom_object(
        *KQ,
        "admissionchecks",
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "later"},
            "spec": {"controllerName": "example.com/nobody"},
        },
    )
    cq = co.get_cluster_custom_object(*KQ, "clusterqueues", "cq")
    assert cq["status"]["conditions"][0]["reason"] == "AdmissionCheckInactive"
    # Back to the provisioning check alone: the queue is active and the Workload reserves.
    co.patch_cluster_custom_object(
        *KQ,
        "clusterqueues",
        "cq",
        {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "capacity"}]}}},
    )
    assert (
        co.get_cluster_custom_object(*KQ, "clusterqueues", "cq")["status"]["conditions"][0][
            "status"
        ]
        == "True"
    )
    assert check_state(co)["state"] == "Ready"


def test_a_job_rewritten_while_its_checks_are_pending_keeps_its_reservation(
    co: client.CustomObjectsApi, v1: client.CoreV1Api
) -> None:
    setup(co, v1)
    v1.create_namespaced_pod("default", pod_manifest("squatter", gpu=8, tolerate=True))
    submit(co, "job", workers=3)
    assert check_state(co)["state"] == "Pending"
    assert suspended(co, "job")
    # Its owner applies the RayCluster again (as gangway's reconciler does) while Kueue
    # holds it suspended for its checks: that is not a user's suspend.
    co.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", "job", {"metadata": {"labels": {"again": "1"}}}
    )
    wl = workload(co)
    assert wl["spec"]["active"] is True
    assert wl_cond(wl, "QuotaReserved")["status"] == "True"  # type: ignore[index]
    v1.delete_namespaced_pod("squatter", "default")
    assert wl_cond(workload(co), "Admitted")["status"] == "True"  # type: ignore[index]
    assert not suspended(co, "job")
