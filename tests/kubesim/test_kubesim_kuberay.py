"""The KubeRay emulation: pods, head service, status, scaling, suspend/resume, deletion."""

from __future__ import annotations

import jsonschema
from kubernetes import client
from kubesim_helpers import apply, get_rc, raycluster

from kubesim.resources import Registry


def schema() -> dict:
    """The RayCluster v1 status schema, from the CRD file kubesim ships."""
    return Registry.shared().by_key("rayclusters.ray.io").schemas["v1"]["properties"]["status"]


def test_lifecycle_create_ready_suspend_resume_delete(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    apply(custom, raycluster("life", workers=2, labels={"app.kubernetes.io/managed-by": "gangway"}))
    rc = get_rc(custom, "life")
    st = rc["status"]
    assert st["state"] == "ready"
    assert st["readyWorkerReplicas"] == st["desiredWorkerReplicas"] == 2
    assert st["availableWorkerReplicas"] == 2
    assert (st["minWorkerReplicas"], st["maxWorkerReplicas"]) == (0, 2)
    assert (st["desiredGPU"], st["desiredCPU"], st["desiredMemory"]) == ("2", "34", "136Gi")
    assert st["endpoints"] == {"client": "10001", "gcs-server": "6379", "dashboard": "8265"}
    assert st["head"]["serviceName"] == "life-head-svc" and st["head"]["serviceIP"]
    assert st["head"]["podIP"] and st["observedGeneration"] == 1
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds == {"HeadPodReady": "True", "RayClusterProvisioned": "True"}
    jsonschema.Draft4Validator(schema()).validate(st)

    pods = core.list_pod_for_all_namespaces(label_selector="ray.io/cluster=life").items
    head = [p for p in pods if p.metadata.labels["ray.io/node-type"] == "head"]
    workers = [p for p in pods if p.metadata.labels["ray.io/node-type"] == "worker"]
    assert len(head) == 1 and len(workers) == 2
    assert head[0].metadata.name.startswith("life-head-")
    assert head[0].metadata.labels["ray.io/group"] == "headgroup"
    assert all(w.metadata.name.startswith("life-gpu-worker-") for w in workers)
    assert workers[0].metadata.labels["ray.io/is-ray-node"] == "yes"
    ref = workers[0].metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.controller) == ("RayCluster", "life", True)
    svc = core.read_namespaced_service("life-head-svc", "default")
    assert {p.name: p.port for p in svc.spec.ports} == {
        "client": 10001,
        "gcs-server": 6379,
        "dashboard": 8265,
    }

    custom.patch_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "life", {"spec": {"suspend": True}}
    )
    rc = get_rc(custom, "life")
    assert rc["status"]["state"] == "suspended"
    conds = {c["type"]: c["status"] for c in rc["status"]["conditions"]}
    assert conds["RayClusterSuspended"] == "True" and conds["HeadPodReady"] == "False"
    assert not core.list_namespaced_pod("default", label_selector="ray.io/cluster=life").items
    jsonschema.Draft4Validator(schema()).validate(rc["status"])

    custom.patch_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "life", {"spec": {"suspend": False}}
    )
    rc = get_rc(custom, "life")
    assert rc["status"]["state"] == "ready" and rc["status"]["readyWorkerReplicas"] == 2
    assert {c["type"]: c["status"] for c in rc["status"]["conditions"]}[
        "RayClusterSuspended"
    ] == "False"

    custom.delete_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "life", propagation_policy="Foreground"
    )
    assert not core.list_namespaced_pod("default").items
    assert not core.list_namespaced_service("default").items
    assert not custom.list_cluster_custom_object("ray.io", "v1", "rayclusters")["items"]


def test_scaling_and_workers_to_delete(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    body = raycluster("scale", workers=1)
    body["spec"]["workerGroupSpecs"][0]["maxReplicas"] = 4
    apply(custom, body)
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    apply(custom, body)
    sel = "ray.io/cluster=scale,ray.io/node-type=worker"
    workers = core.list_namespaced_pod("default", label_selector=sel).items
    assert len(workers) == 3 and get_rc(custom, "scale")["status"]["readyWorkerReplicas"] == 3
    victim = workers[0].metadata.name
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    body["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": [victim]}
    apply(custom, body)
    names = {p.metadata.name for p in core.list_namespaced_pod("default", label_selector=sel).items}
    assert len(names) == 2 and victim not in names
    # replicas above maxReplicas are clamped, as KubeRay does
    body["spec"]["workerGroupSpecs"][0]["replicas"] = 9
    body["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {}
    apply(custom, body)
    assert len(core.list_namespaced_pod("default", label_selector=sel).items) == 4


def test_deleted_pod_is_recreated_and_pending_cluster_not_ready(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    apply(custom, raycluster("heal", workers=1))
    worker = (
        core.list_namespaced_pod("default", label_selector="ray.io/node-type=worker")
        .items[0]
        .metadata.name
    )
    core.delete_namespaced_pod(worker, "default")
    pods = core.list_namespaced_pod("default", label_selector="ray.io/node-type=worker").items
    assert len(pods) == 1 and pods[0].metadata.name != worker
    apply(custom, raycluster("huge", workers=1, gpus=9))  # no node has 9 GPUs
    st = get_rc(custom, "huge")["status"]
    assert "state" not in st and st["readyWorkerReplicas"] == 0
    assert {c["type"]: c["status"] for c in st["conditions"]}["RayClusterProvisioned"] == "False"


def test_gateway_style_list_by_label(
    core: client.CoreV1Api, custom: client.CustomObjectsApi
) -> None:
    core.create_namespace(
        {"metadata": {"name": "t1", "labels": {"app.kubernetes.io/managed-by": "gangway"}}}
    )
    apply(custom, raycluster("a", "t1", labels={"app.kubernetes.io/managed-by": "gangway"}))
    apply(custom, raycluster("b", "default"))
    listed = custom.list_cluster_custom_object(
        "ray.io", "v1", "rayclusters", label_selector="app.kubernetes.io/managed-by=gangway"
    )
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
    nss = core.list_namespace(label_selector="app.kubernetes.io/managed-by=gangway").items
    assert [n.metadata.name for n in nss] == ["t1"]
    ev = core.list_event_for_all_namespaces(field_selector="involvedObject.kind=Pod").items
    assert ev and all(e.involved_object.kind == "Pod" for e in ev)
