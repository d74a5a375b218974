"""Kueue emulation: suspension on create, Workloads, quota reservation in FIFO order,
borrowing in a cohort, unsuspend on admission, release, and pending positions."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubesim_helpers import H100, L4, apply, raycluster

from kubesim import KubeSim
from kubesim.resources import Registry

KQ = ("kueue.x-k8s.io", "v1beta2")


@pytest.fixture
def ksim() -> Iterator[KubeSim]:
    s = KubeSim(kueue=True).start()
    yield s
    s.stop()


@pytest.fixture
def kapi(ksim: KubeSim) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    cfg.host = ksim.url
    api = client.ApiClient(cfg)
    yield api
    api.close()


def setup_queues(
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    h100_quota: int = 8,
    cohort: str | None = None,
    preemption: dict | None = None,
    b_lends: int | None = None,
    b_cohort: str | None = None,
) -> None:
    for name, product in (("h100", H100), ("l4", L4)):
        custom.create_cluster_custom_object(
            *KQ,
            "resourceflavors",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}},
            },
        )
    custom.create_cluster_custom_object(
        *KQ,
        "resourceflavors",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "cpu"},
            "spec": {},
        },
    )
    for tenant, quota in (("a", h100_quota), ("b", 8)):
        cq: dict = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{tenant}"},
            "spec": {
                "namespaceSelector": {},
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
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}],
                            },
                            {
                                "name": "l4",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 0}],
                            },
                        ],
                    },
                ],
            },
        }
        if tenant == "b" and b_lends is not None:
            h100 = cq["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]
            h100["lendingLimit"] = b_lends
        if cohort:
            cq["spec"]["cohortName"] = b_cohort if tenant == "b" and b_cohort else cohort
        if preemption:
            cq["spec"]["preemption"] = preemption
        custom.create_cluster_custom_object(*KQ, "clusterqueues", cq)
        core.create_namespace({"metadata": {"name": f"t-{tenant}"}})
        custom.create_namespaced_custom_object(
            *KQ,
            f"t-{tenant}",
            "localqueues",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "lq"},
                "spec": {"clusterQueue": f"cq-{tenant}"},
            },
        )


def queued(name: str, ns: str, workers: int, gpus: int = 1, priority: str = "") -> dict:
    labels = {"kueue.x-k8s.io/queue-name": "lq"}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return raycluster(name, ns, workers=workers, gpus=gpus, labels=labels)


def workload(custom: client.CustomObjectsApi, ns: str, rc: str) -> dict:
    items = custom.list_namespaced_custom_object(*KQ, ns, "workloads")["items"]
    return next(w for w in items if w["metadata"]["ownerReferences"][0]["name"] == rc)


def test_admission_fifo_positions_and_release(ksim: KubeSim, kapi: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core)
    apply(custom, queued("first", "t-a", workers=6))
    rc = custom.get_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "first")
    assert rc["spec"]["suspend"] is False and rc["status"]["state"] == "ready"
    assert rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": H100
    }
    wl = workload(custom, "t-a", "first")
    assert wl["metadata"]["name"].startswith("raycluster-first-")
    assert [p["name"] for p in wl["spec"]["podSets"]] == ["head", "gpu"]
    adm = wl["status"]["admission"]
    assert adm["clusterQueue"] == "cq-a"
    gpu_set = next(p for p in adm["podSetAssignments"] if p["name"] == "gpu")
    assert gpu_set["flavors"]["nvidia.com/gpu"] == "h100"
    assert gpu_set["resourceUsage"]["nvidia.com/gpu"] == "6"
    conds = {c["type"]: c["status"] for c in wl["status"]["conditions"]}
    assert conds == {"QuotaReserved": "True", "Admitted": "True"}
    # Workload validates against its CRD schema
    rt = Registry.shared().by_key("workloads.kueue.x-k8s.io")
    ksim.cluster.validator.prepare_custom(rt, "v1beta2", wl, strict=True)

    apply(custom, queued("second", "t-a", workers=4))
    apply(custom, queued("third", "t-a", workers=1))
    second = custom.get_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "second")
    assert second["spec"]["suspend"] is True
    assert not core.list_namespaced_pod("t-a", label_selector="ray.io/cluster=second").items
    wl2 = workload(custom, "t-a", "second")
    cond = next(c for c in wl2["status"]["conditions"] if c["type"] == "QuotaReserved")
    assert cond["status"] == "False"
    assert cond["message"] == (
        "couldn't assign flavors to pod set gpu: insufficient unused "
        "quota for nvidia.com/gpu in flavor h100, 2 more needed"
    )
    # BestEffortFIFO: the small one behind it fits and is admitted
    third = custom.get_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "third")
    assert third["spec"]["suspend"] is False
    apply(custom, queued("fourth", "t-a", workers=8))
    with urllib.request.urlopen(
        ksim.url + "/apis/visibility.kueue.x-k8s.io/v1beta2/"
        "namespaces/t-a/localqueues/lq/pendingworkloads"
    ) as resp:
        summary = json.load(resp)
    assert summary["kind"] == "PendingWorkloadsSummary"
    owners = [i["metadata"]["ownerReferences"][0]["name"] for i in summary["items"]]
    assert owners == ["second", "fourth"]
    assert [i["positionInLocalQueue"] for i in summary["items"]] == [0, 1]
    with urllib.request.urlopen(
        ksim.url + "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq-a/pendingworkloads"
    ) as resp:
        assert [i["positionInClusterQueue"] for i in json.load(resp)["items"]] == [0, 1]
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cq-a")
    assert cq["status"]["pendingWorkloads"] == 2 and cq["status"]["admittedWorkloads"] == 2

    # deleting the first releases 6 GPUs: second (4) is admitted, fourth (8) still waits
    custom.delete_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "first")
    second = custom.get_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "second")
    assert second["spec"]["suspend"] is False and second["status"]["state"] == "ready"
    # a user suspend releases the reservation; resume goes back through the queue
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", "t-a", "rayclusters", "second", {"spec": {"suspend": True}}
    )
    assert "admission" not in workload(custom, "t-a", "second")["status"]
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", "t-a", "rayclusters", "second", {"spec": {"suspend": False}}
    )
    second = custom.get_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "second")
    assert second["spec"]["suspend"] is False
    assert workload(custom, "t-a", "second")["status"]["admission"]["clusterQueue"] == "cq-a"


def test_borrowing_within_cohort(ksim: KubeSim, kapi: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core, h100_quota=4, cohort="gpus")
    apply(custom, queued("big", "t-a", workers=10))
    wl = workload(custom, "t-a", "big")
    assert wl["status"]["admission"]["clusterQueue"] == "cq-a"  # 4 own + 6 borrowed of b's 8
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cq-a")
    h100 = next(f for f in cq["status"]["flavorsReservation"] if f["name"] == "h100")
    assert h100["resources"][0] == {"name": "nvidia.com/gpu", "total": "10", "borrowed": "6"}
    apply(custom, queued("b1", "t-b", workers=3))
    wl_b = workload(custom, "t-b", "b1")
    assert "admission" not in wl_b["status"]  # only 2 left in b's quota


def _cohort(custom: client.CustomObjectsApi, name: str, parent: str) -> None:
    custom.create_cluster_custom_object(
        *KQ,
        "cohorts",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": name},
            "spec": {"parentName": parent},
        },
    )


def test_cohorts_under_one_parent_borrow_and_reclaim_across_the_tree(
    ksim: KubeSim, kapi: client.ApiClient
) -> None:
    """a (cohort research) and b (cohort serving) cannot borrow from each other until
    both cohorts name the parent org; then a borrows b's unused H100s, and b reclaims them
    across the tree ("InCohortReclamation")."""
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(
        custom, core, h100_quota=4, cohort="research", b_cohort="serving", preemption=PREEMPTION
    )
    apply(custom, queued("own", "t-a", workers=4))
    apply(custom, queued("big", "t-a", workers=6))
    assert "admission" not in workload(custom, "t-a", "big")["status"]  # two separate cohorts
    _cohort(custom, "research", "org")
    _cohort(custom, "serving", "org")
    big = workload(custom, "t-a", "big")
    assert big["status"]["admission"]["clusterQueue"] == "cq-a"  # 6 of b's 8, through org
    apply(custom, queued("mine", "t-b", workers=7))
    conds = conditions(workload(custom, "t-a", "big"))
    assert conds["Preempted"][:2] == ("True", "InCohortReclamation")
    assert "admission" in workload(custom, "t-a", "own")["status"]
    assert rc_of(custom, "t-b", "mine")["spec"]["suspend"] is False


def test_a_lending_limit_keeps_the_rest_of_the_quota_for_its_queue(
    ksim: KubeSim, kapi: client.ApiClient
) -> None:
    """b lends only 3 of its 8 H100s: a may borrow 3, not 6, and b keeps 5 for itself."""
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core, h100_quota=4, cohort="gpus", b_lends=3)
    apply(custom, queued("big", "t-a", workers=10))
    assert "admission" not in workload(custom, "t-a", "big")["status"]  # 4 own + 3 lent < 10
    apply(custom, queued("fits", "t-a", workers=7))
    assert workload(custom, "t-a", "fits")["status"]["admission"]["clusterQueue"] == "cq-a"
    apply(custom, queued("b-own", "t-b", workers=5))  # what b keeps is still there
    assert workload(custom, "t-b", "b-own")["status"]["admission"]["clusterQueue"] == "cq-b"
    apply(custom, queued("b-more", "t-b", workers=1))  # b's lent 3 are a's now
    assert "admission" not in workload(custom, "t-b", "b-more")["status"]


def test_without_kueue_the_label_is_ignored(sim: KubeSim, custom: client.CustomObjectsApi) -> None:
    apply(custom, queued("plain", "default", workers=1))
    rc = custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", "plain")
    assert not rc["spec"].get("suspend") and rc["status"]["state"] == "ready"


PREEMPTION = {
    "withinClusterQueue": "LowerPriority",
    "reclaimWithinCohort": "Any",
    "borrowWithinCohort": {"policy": "Never"},
}


def priority_classes(custom: client.CustomObjectsApi) -> None:
    for name, value in (("dev", 100), ("prod", 1000)):
        custom.create_cluster_custom_object(
            *KQ,
            "workloadpriorityclasses",
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )


def conditions(wl: dict) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in wl["status"]["conditions"]}


def rc_of(custom: client.CustomObjectsApi, ns: str, name: str) -> dict:
    return custom.get_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)


def test_a_higher_priority_workload_preempts_within_its_queue(
    ksim: KubeSim, kapi: client.ApiClient
) -> None:
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core, preemption=PREEMPTION)
    priority_classes(custom)
    apply(custom, queued("low-old", "t-a", workers=2, priority="dev"))
    apply(custom, queued("low-new", "t-a", workers=4, priority="dev"))
    assert rc_of(custom, "t-a", "low-new")["status"]["state"] == "ready"

    # 8 GPUs, 6 held by dev work: a 5-GPU prod cluster needs the newest dev one gone only.
    apply(custom, queued("high", "t-a", workers=5, priority="prod"))
    evicted = workload(custom, "t-a", "low-new")
    assert "admission" not in evicted["status"]
    conds = conditions(evicted)
    high_uid = workload(custom, "t-a", "high")["metadata"]["uid"]
    message = (
        f"Preempted to accommodate a workload (UID: {high_uid}, JobUID: "
        f"{rc_of(custom, 't-a', 'high')['metadata']['uid']}) due to prioritization in the "
        "ClusterQueue"
    )
    assert conds["Evicted"] == ("True", "Preempted", message)
    assert conds["Preempted"] == ("True", "InClusterQueue", message)
    # Released with the eviction's message, then tried again at once: it does not fit.
    assert conds["QuotaReserved"][:2] == ("False", "Pending")
    assert conds["QuotaReserved"][2].startswith("couldn't assign flavors to pod set gpu")
    assert conds["Admitted"][:2] == ("False", "NoReservation")
    assert conds["Requeued"][:2] == ("True", "Preempted")
    assert rc_of(custom, "t-a", "low-new")["spec"]["suspend"] is True
    assert not core.list_namespaced_pod("t-a", label_selector="ray.io/cluster=low-new").items
    assert "admission" in workload(custom, "t-a", "low-old")["status"]
    assert rc_of(custom, "t-a", "high")["spec"]["suspend"] is False
    events = core.list_namespaced_event("t-a").items
    assert any(e.reason == "Preempted" and e.message == message for e in events)

    # Once the prod cluster is gone, the evicted one is admitted again.
    custom.delete_namespaced_custom_object("ray.io", "v1", "t-a", "rayclusters", "high")
    again = conditions(workload(custom, "t-a", "low-new"))
    assert again["Evicted"] == ("False", "QuotaReserved", f"Previously: {message}")
    assert again["Preempted"] == ("False", "QuotaReserved", f"Previously: {message}")
    assert again["Admitted"][0] == "True"
    assert rc_of(custom, "t-a", "low-new")["status"]["state"] == "ready"


def test_a_queue_reclaims_its_nominal_quota_from_a_borrower(
    ksim: KubeSim, kapi: client.ApiClient
) -> None:
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core, h100_quota=4, cohort="gpus", preemption=PREEMPTION)
    apply(custom, queued("own", "t-a", workers=4))
    apply(custom, queued("borrowed", "t-a", workers=6))  # 6 of b's 8
    assert rc_of(custom, "t-a", "borrowed")["status"]["state"] == "ready"
    apply(custom, queued("mine", "t-b", workers=7))
    conds = conditions(workload(custom, "t-a", "borrowed"))
    assert conds["Evicted"][:2] == ("True", "Preempted")
    assert conds["Preempted"][:2] == ("True", "InCohortReclamation")
    assert conds["Evicted"][2].endswith("due to reclamation within the cohort")
    assert "admission" in workload(custom, "t-a", "own")["status"]  # within a's nominal
    assert rc_of(custom, "t-b", "mine")["spec"]["suspend"] is False


def test_no_preemption_without_a_policy(ksim: KubeSim, kapi: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core)
    priority_classes(custom)
    apply(custom, queued("low", "t-a", workers=6, priority="dev"))
    apply(custom, queued("high", "t-a", workers=4, priority="prod"))
    assert "admission" in workload(custom, "t-a", "low")["status"]
    assert "admission" not in workload(custom, "t-a", "high")["status"]


def _evict(ksim: KubeSim, body: dict) -> dict:
    request = urllib.request.Request(
        ksim.url + "/_kubesim/kueue/evict",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as resp:
        return json.load(resp)


def test_the_admin_knob_evicts_as_kueue_does(
    ksim: KubeSim, kapi: client.ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubesim.operators import kueue

    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core)
    apply(custom, queued("slow", "t-a", workers=2))
    apply(custom, queued("idle", "t-a", workers=2))

    # PodsReadyTimeout: requeued only after the backoff (1 s here, 60 s by default).
    monkeypatch.setattr(kueue, "REQUEUE_BACKOFF_SECONDS", 1)
    answer = _evict(ksim, {"namespace": "t-a", "name": "slow", "reason": "PodsReadyTimeout"})
    wl = workload(custom, "t-a", "slow")
    assert answer == {"status": "evicted", "workload": wl["metadata"]["name"]}
    conds = conditions(wl)
    assert conds["Evicted"] == (
        "True",
        "PodsReadyTimeout",
        f"Exceeded the PodsReady timeout t-a/{wl['metadata']['name']}",
    )
    assert "Preempted" not in conds
    assert conds["Requeued"][:2] == ("False", "PodsReadyTimeout")
    assert wl["status"]["requeueState"]["count"] == 1
    assert rc_of(custom, "t-a", "slow")["spec"]["suspend"] is True
    deadline = time.monotonic() + 10
    while "admission" not in workload(custom, "t-a", "slow")["status"]:
        assert time.monotonic() < deadline, "never requeued"
        time.sleep(0.1)
    assert conditions(workload(custom, "t-a", "slow"))["Requeued"][:2] == (
        "True",
        "BackoffFinished",
    )

    # InactiveWorkload: stays out of the queue until the Workload is active again.
    _evict(ksim, {"namespace": "t-a", "name": "idle", "reason": "InactiveWorkload"})
    wl = workload(custom, "t-a", "idle")
    assert wl["spec"]["active"] is False
    assert conditions(wl)["Evicted"] == ("True", "InactiveWorkload", "The workload is deactivated")
    assert "admission" not in wl["status"]
    custom.patch_namespaced_custom_object(
        *KQ, "t-a", "workloads", wl["metadata"]["name"], {"spec": {"active": True}}
    )
    assert "admission" in workload(custom, "t-a", "idle")["status"]

    with pytest.raises(urllib.error.HTTPError) as refused:
        _evict(ksim, {"namespace": "t-a", "name": "idle", "reason": "Bored"})
    assert refused.value.code == 400


def test_kueue_refuses_an_autoscaling_raycluster(ksim: KubeSim, kapi: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(kapi), client.CoreV1Api(kapi)
    setup_queues(custom, core)
    body = queued("grow", "t-a", workers=1)
    body["spec"]["enableInTreeAutoscaling"] = True
    with pytest.raises(client.ApiException) as refused:
        apply(custom, body)
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        'admission webhook "vraycluster.kb.io" denied the request: '
        "spec.enableInTreeAutoscaling: Invalid value: true: a kueue-managed RayCluster can use "
        "autoscaling only as an elastic job: enable the ElasticJobsViaWorkloadSlices feature "
        'gate and set the "kueue.x-k8s.io/elastic-job": "true" annotation'
    )
    body["spec"]["enableInTreeAutoscaling"] = False
    apply(custom, body)
    body["metadata"]["labels"] = {}
    body["metadata"]["name"] = "unqueued"
    body["spec"]["enableInTreeAutoscaling"] = True
    apply(custom, body)  # not Kueue's: no webhook
