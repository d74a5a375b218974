"""Kueue's elastic jobs (ElasticJobsViaWorkloadSlices, on by default as in Kueue v0.19):
Kueue's own autoscaling samples are admitted as elastic workloads; a scale-up queues a
replacement slice that takes over the old one, a scale-down shrinks the slice in place, and
pods wait behind the elastic scheduling gate until a slice grants them. With the feature
gate off (kubesim's ``kueue_feature_gates``) they are refused as Kueue refuses them.
Driven by kubectl and the official client against kubesim over HTTP."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kubesim import KubeSim

CORPUS = Path(__file__).parent / "corpus" / "kueue"
KQ = ("kueue.x-k8s.io", "v1beta2")
GATE = "kueue.x-k8s.io/elastic-job"
REPLACES = "kueue.x-k8s.io/workload-slice-replacement-for"
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """kubesim with Kueue (the conftest's kubeconfig, clients and kubectl use it)."""
    s = KubeSim(kueue=True).start()
    try:
        yield s
    finally:
        s.stop()


def kueue_name(kind: str, group: str, name: str, uid: str, extra: str = "") -> str:
    """The Workload name Kueue's jobframework gives a job (workload_names.go)."""
    parts = [kind, group, name, uid] + ([extra] if extra else [])
    return f"{kind.lower()}-{name}-" + hashlib.sha1("\n".join(parts).encode()).hexdigest()[:5]


def elastic_raycluster() -> dict[str, Any]:
    """Kueue's RayCluster sample made elastic as Kueue's "Run A RayCluster" page says."""
    body: dict[str, Any] = yaml.safe_load((CORPUS / "ray-cluster-sample.yaml").read_text())
    body["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    body["spec"]["enableInTreeAutoscaling"] = True
    return body


def workloads(custom: client.CustomObjectsApi, owner: str) -> list[dict[str, Any]]:
    """The job's Workload slices in chain order (each replaces the one before it)."""
    items = custom.list_namespaced_custom_object(*KQ, "default", "workloads")["items"]
    mine = [w for w in items if w["metadata"]["ownerReferences"][0]["name"] == owner]
    by_target = {(w["metadata"].get("annotations") or {}).get(REPLACES, ""): w for w in mine}
    chain = [by_target[""]] if "" in by_target else []
    while chain and f"default/{chain[-1]['metadata']['name']}" in by_target:
        chain.append(by_target[f"default/{chain[-1]['metadata']['name']}"])
    assert len(chain) == len(mine)
    return chain


def conds(wl: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in wl["status"]["conditions"]}


def workers(core: client.CoreV1Api, cluster: str) -> list[Any]:
    sel = f"ray.io/cluster={cluster},ray.io/node-type=worker"
    return core.list_namespaced_pod("default", label_selector=sel).items


def cq_cpu(custom: client.CustomObjectsApi) -> str:
    cq = custom.get_cluster_custom_object(*KQ, "clusterqueues", "cluster-queue")
    (flavor,) = cq["status"]["flavorsReservation"]
    return str(next(r["total"] for r in flavor["resources"] if r["name"] == "cpu"))


def scale(
    kubectl: Kubectl, cluster: str, replicas: int, core: client.CoreV1Api | None = None
) -> None:
    """Scale worker group 0 as the Ray autoscaler does: a patch of ``replicas`` and, to
    scale down (``core`` given), the pods to go in ``workersToDelete`` — with in-tree
    autoscaling KubeRay deletes only the workers named there (waiting ones first here,
    then the newest)."""
    patch: list[dict[str, Any]] = [
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": replicas}
    ]
    if core is not None:
        pods = sorted(
            workers(core, cluster),
            key=lambda p: (p.status.phase == "Running", -p.metadata.creation_timestamp.timestamp()),
        )
        doomed = [p.metadata.name for p in pods[: max(len(pods) - replicas, 0)]]
        strategy = {"workersToDelete": doomed}
        patch.append(
            {"op": "add", "path": "/spec/workerGroupSpecs/0/scaleStrategy", "value": strategy}
        )
    kubectl("patch", "raycluster", cluster, "--type=json", "-p", json.dumps(patch))


def test_the_autoscaling_raycluster_sample_scales_through_workload_slices(
    kubectl: Kubectl, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(elastic_raycluster()))
    rc = custom.get_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "raycluster-complete"
    )
    uid = rc["metadata"]["uid"]
    assert rc["spec"]["suspend"] is False
    # Kueue's webhook gated every pod template.
    head_t = rc["spec"]["headGroupSpec"]["template"]
    assert head_t["spec"]["schedulingGates"] == [{"name": GATE}]
    assert rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["schedulingGates"] == [
        {"name": GATE}
    ]
    (first,) = workloads(custom, "raycluster-complete")
    name1 = kueue_name("RayCluster", "ray.io", "raycluster-complete", uid, "1")
    assert first["metadata"]["name"] == name1
    assert first["metadata"]["annotations"] == {
        "kueue.x-k8s.io/elastic-job": "true",
        "kueue.x-k8s.io/workload-slice-name": name1,
    }
    assert conds(first)["Admitted"] == ("True", "Admitted")
    head_set = first["spec"]["podSets"][0]
    # KubeRay's autoscaler sidecar is counted in the head's pod set.
    assert head_set["template"]["spec"]["containers"][-1]["name"] == "autoscaler"
    assert head_t["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "head"
    pods = core.list_namespaced_pod("default").items
    assert len(pods) == 2
    assert all(p.status.phase == "Running" and not p.spec.scheduling_gates for p in pods)
    assert cq_cpu(custom) == "2500m"  # head 1, autoscaler 500m, one worker

    # Scale up within the quota: a new slice replaces the first.
    scale(kubectl, "raycluster-complete", 3)
    first, second = workloads(custom, "raycluster-complete")
    # Kueue hashes the job's generation in: 1 at creation, 2 once Kueue unsuspended it,
    # 3 after the scale (replacing a slice leaves the spec as it was).
    gen = kubectl(
        "get", "raycluster", "raycluster-complete", "-o", "jsonpath={.metadata.generation}"
    )
    assert gen.stdout == "3"
    name2 = kueue_name("RayCluster", "ray.io", "raycluster-complete", uid, "3")
    assert second["metadata"]["name"] == name2
    assert second["metadata"]["annotations"] == {
        "kueue.x-k8s.io/elastic-job": "true",
        "kueue.x-k8s.io/workload-slice-name": name1,
        "kueue.x-k8s.io/workload-slice-replacement-for": f"default/{name1}",
    }
    assert conds(second)["Admitted"] == ("True", "Admitted")
    assert second["status"]["admission"]["podSetAssignments"][1]["count"] == 3
    finished = next(c for c in first["status"]["conditions"] if c["type"] == "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "WorkloadSliceReplaced")
    assert finished["message"] == (
        f"Replaced to accommodate a workload (UID: {second['metadata']['uid']}, JobUID: {uid}) "
        "due to workload slice aggregation"
    )
    assert [p.status.phase for p in workers(core, "raycluster-complete")] == ["Running"] * 3
    assert cq_cpu(custom) == "4500m"

    # Beyond the quota (9 CPU): the replacement waits, the new workers stay gated, the
    # cluster keeps running on what it has.
    scale(kubectl, "raycluster-complete", 8)
    _, second, third = workloads(custom, "raycluster-complete")
    assert third["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"default/{name2}"
    )
    assert conds(third)["QuotaReserved"] == ("False", "Pending")
    assert "insufficient unused quota for cpu in flavor default-flavor, 500m more needed" in next(
        c["message"] for c in third["status"]["conditions"] if c["type"] == "QuotaReserved"
    )
    assert "Finished" not in conds(second)
    pods = workers(core, "raycluster-complete")
    assert len(pods) == 8
    gated = [p for p in pods if p.spec.scheduling_gates]
    assert len(gated) == 5
    assert all(p.status.phase == "Pending" for p in gated)
    assert {(c.type, c.reason) for p in gated for c in p.status.conditions} == {
        ("PodScheduled", "SchedulingGated")
    }
    assert sum(p.status.phase == "Running" for p in pods) == 3
    rc = custom.get_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", "raycluster-complete"
    )
    assert rc["spec"]["suspend"] is False

    # Back down to 2 while the replacement waits: it shrinks and fits, replacing the
    # admitted slice.
    scale(kubectl, "raycluster-complete", 2, core)
    live = [w for w in workloads(custom, "raycluster-complete") if "Finished" not in conds(w)]
    assert [w["metadata"]["name"] for w in live] == [third["metadata"]["name"]]
    assert conds(live[0])["Admitted"] == ("True", "Admitted")
    pods = workers(core, "raycluster-complete")
    assert [(p.status.phase, p.spec.scheduling_gates) for p in pods] == [("Running", None)] * 2
    assert cq_cpu(custom) == "3500m"

    # A scale-down of an admitted slice shrinks it in place: no new slice.
    scale(kubectl, "raycluster-complete", 1, core)
    live = [w for w in workloads(custom, "raycluster-complete") if "Finished" not in conds(w)]
    assert [w["metadata"]["name"] for w in live] == [third["metadata"]["name"]]
    assert live[0]["spec"]["podSets"][1]["count"] == 1
    assert len(workers(core, "raycluster-complete")) == 1
    assert cq_cpu(custom) == "2500m"
    out = kubectl("get", "workloads", "-o", "name").stdout.split()
    assert len(out) == 3  # the first, the scale to 3, the scale to 8 (then 2, then 1)


def test_the_ray_autoscaling_rayjob_sample_is_an_elastic_workload(
    kubectl: Kubectl, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    kubectl("apply", "-f", str(CORPUS / "ray-job-autoscaling-sample.yaml"))
    rj = custom.get_namespaced_custom_object(
        "ray.io", "v1", "default", "rayjobs", "rayjob-autoscaling-sample"
    )
    assert rj["spec"]["suspend"] is False
    assert rj["status"]["jobDeploymentStatus"] == "Running"
    (first,) = workloads(custom, "rayjob-autoscaling-sample")
    assert first["metadata"]["annotations"]["kueue.x-k8s.io/elastic-job"] == "true"
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [
        ("head", 1),
        ("small-group", 1),
        ("submitter", 1),
    ]
    assert conds(first)["Admitted"] == ("True", "Admitted")
    cluster = rj["status"]["rayClusterName"]
    rc = custom.get_namespaced_custom_object("ray.io", "v1", "default", "rayclusters", cluster)
    assert rc["spec"]["headGroupSpec"]["template"]["spec"]["schedulingGates"] == [{"name": GATE}]
    ray_pods = core.list_namespaced_pod("default", label_selector=f"ray.io/cluster={cluster}")
    assert len(ray_pods.items) == 2
    assert all(not p.spec.scheduling_gates for p in ray_pods.items)
    assert all(p.status.phase == "Running" for p in ray_pods.items)

    # The Ray autoscaler scales the RayJob's RayCluster: Kueue follows with a new slice.
    scale(kubectl, cluster, 2)
    first, second = workloads(custom, "rayjob-autoscaling-sample")
    assert second["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"default/{first['metadata']['name']}"
    )
    assert [ps["count"] for ps in second["spec"]["podSets"]] == [1, 2, 1]
    assert conds(second)["Admitted"] == ("True", "Admitted")
    assert conds(first)["Finished"] == ("True", "WorkloadSliceReplaced")
    rj = custom.get_namespaced_custom_object(
        "ray.io", "v1", "default", "rayjobs", "rayjob-autoscaling-sample"
    )
    sizes = json.loads(
        rj["metadata"]["annotations"]["kueue.x-k8s.io/raycluster-podset-replica-sizes"]
    )
    assert {"name": "small-group", "count": 2} in sizes
    assert [p.status.phase for p in workers(core, cluster)] == ["Running"] * 2


def test_a_non_elastic_autoscaling_raycluster_is_refused(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    body = elastic_raycluster()
    del body["metadata"]["annotations"]
    out = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(body), check=False)
    assert out.returncode != 0
    assert (
        'admission webhook "vraycluster.kb.io" denied the request: spec.enableInTreeAutoscaling: '
        "Invalid value: true: a kueue-managed RayCluster can use autoscaling only as an elastic "
        "job: enable the ElasticJobsViaWorkloadSlices feature gate and set the "
        '"kueue.x-k8s.io/elastic-job": "true" annotation'
    ) in out.stderr


@pytest.mark.parametrize("gates", ["ElasticJobsViaWorkloadSlices=false"])
def test_with_the_feature_gate_off_the_samples_are_refused(gates: str, tmp_path: Path) -> None:
    s = KubeSim(kueue=True, kueue_feature_gates=gates).start()
    try:
        cfg = client.Configuration()
        cfg.host = s.url
        with client.ApiClient(cfg) as api:
            custom = client.CustomObjectsApi(api)
            with pytest.raises(client.ApiException) as refused:
                custom.create_namespaced_custom_object(
                    "ray.io", "v1", "default", "rayclusters", elastic_raycluster()
                )
            assert refused.value.status == 403
            assert "can use autoscaling only as an elastic job" in refused.value.body
            rj = yaml.safe_load((CORPUS / "ray-job-autoscaling-sample.yaml").read_text())
            with pytest.raises(client.ApiException) as refused:
                custom.create_namespaced_custom_object("ray.io", "v1", "default", "rayjobs", rj)
            assert json.loads(refused.value.body)["message"] == (
                'admission webhook "vrayjob.kb.io" denied the request: '
                "spec.rayClusterSpec.enableInTreeAutoscaling: Invalid value: true: a kueue "
                "managed job should only use autoscaling when workload slicing is enabled"
            )
    finally:
        s.stop()


def test_the_cli_refuses_an_unknown_kueue_feature_gate() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kubesim", "--kueue", "--kueue-feature-gates", "Elastic=true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "unknown Kueue feature gate 'Elastic'" in out.stderr
