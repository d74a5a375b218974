"""Kueue's batch/v1 Job integration: a Job labelled with a queue is suspended on create,
gets a Workload ``job-<name>-<hash>`` with a ``main`` pod set, is admitted by its
ClusterQueue's quota (the flavor's node labels injected into its pod template), runs, and
its Workload finishes when it completes; a Job without the label is not Kueue's
(``manageJobsWithoutQueueName`` is off). Kueue's own samples, applied with kubectl and read
with the official client against kubesim over HTTP."""

from __future__ import annotations

import hashlib
import json
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from kubesim import KubeSim

CORPUS = Path(__file__).parent / "corpus" / "kueue"
KQ = ("kueue.x-k8s.io", "v1beta2")
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def sim() -> Iterator[KubeSim]:
    """kubesim with Kueue (the conftest's kubeconfig, clients and kubectl use it)."""
    s = KubeSim(kueue=True).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def batch(kube_api: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube_api)


def the_workload(custom: client.CustomObjectsApi, job: str) -> dict[str, Any]:
    items = custom.list_namespaced_custom_object(*KQ, "default", "workloads")["items"]
    (wl,) = [w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job]
    return wl


def cond(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == ctype)


def pods_of(core: client.CoreV1Api, job: str) -> list[Any]:
    return core.list_namespaced_pod("default", label_selector=f"job-name={job}").items


def exit_pod(sim: KubeSim, name: str, code: int = 0) -> None:
    """The pod's containers end (kubesim's admin knob: containers do not run)."""
    req = urllib.request.Request(
        sim.url + "/_kubesim/pods/exit",
        data=json.dumps({"namespace": "default", "name": name, "exitCode": code}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(req) as resp:
        assert json.load(resp)["status"] == "exited"


def cq_cpu(custom: client.CustomObjectsApi, cq: str = "cluster-queue") -> str:
    status = custom.get_cluster_custom_object(*KQ, "clusterqueues", cq)["status"]
    (flavor,) = status["flavorsReservation"]
    return str(next(r["total"] for r in flavor["resources"] if r["name"] == "cpu"))


def test_the_sample_job_is_suspended_queued_admitted_run_and_finished(
    sim: KubeSim,
    kubectl: Kubectl,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
) -> None:
    # Created before its LocalQueue exists: Kueue holds it suspended.
    out = kubectl("create", "-f", str(CORPUS / "sample-job.yaml")).stdout
    name = out.split()[0].removeprefix("job.batch/")
    assert name.startswith("sample-job-")
    job = batch.read_namespaced_job(name, "default")
    assert job.spec.suspend is True
    assert job.status.start_time is None
    (suspended,) = job.status.conditions
    assert (suspended.type, suspended.status, suspended.reason) == (
        "Suspended",
        "True",
        "JobSuspended",
    )
    assert pods_of(core, name) == []
    wl = the_workload(custom, name)
    digest = hashlib.sha1(f"Job\nbatch\n{name}\n{job.metadata.uid}".encode()).hexdigest()[:5]
    assert wl["metadata"]["name"] == f"job-{name}-{digest}"
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": job.metadata.uid}
    assert wl["spec"]["queueName"] == "user-queue"
    (main,) = wl["spec"]["podSets"]
    assert (main["name"], main["count"]) == ("main", 3)
    # The Job controller's own labels are not part of the pod set.
    assert "batch.kubernetes.io/controller-uid" not in main["template"]["metadata"]["labels"]
    reserved = cond(wl, "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "Inadmissible")
    assert reserved["message"] == "LocalQueue user-queue doesn't exist"

    # The quick start's queues come: admitted, unsuspended, three pods run.
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    wl = the_workload(custom, name)
    assert cond(wl, "Admitted")["status"] == "True"
    (psa,) = wl["status"]["admission"]["podSetAssignments"]
    assert psa["flavors"] == {"cpu": "default-flavor", "memory": "default-flavor"}
    assert psa["resourceUsage"] == {"cpu": "3", "memory": "600Mi"}
    job = batch.read_namespaced_job(name, "default")
    assert job.spec.suspend is False
    assert job.spec.template.metadata.labels["kueue.x-k8s.io/podset"] == "main"
    resumed = next(c for c in job.status.conditions if c.type == "Suspended")
    assert (resumed.status, resumed.reason) == ("False", "JobResumed")
    assert job.status.start_time is not None
    pods = pods_of(core, name)
    assert [p.status.phase for p in pods] == ["Running"] * 3
    assert cq_cpu(custom) == "3"
    listed = kubectl("get", "workloads", "-o", "name").stdout.split()
    assert listed == [f"workload.kueue.x-k8s.io/{wl['metadata']['name']}"]

    # The pods end: the Job completes, its Workload finishes and gives the quota back.
    for p in pods:
        exit_pod(sim, p.metadata.name)
    job = batch.read_namespaced_job(name, "default")
    assert next(c for c in job.status.conditions if c.type == "Complete").status == "True"
    finished = cond(the_workload(custom, name), "Finished")
    assert (finished["status"], finished["reason"]) == ("True", "Succeeded")
    assert cq_cpu(custom) == "0"
    events = core.list_namespaced_event("default", field_selector="reason=FinishedWorkload").items
    assert [e.involved_object.name for e in events] == [name]


def test_a_flavors_node_labels_go_into_the_jobs_pod_template(
    kubectl: Kubectl, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    setup = list(yaml.safe_load_all((CORPUS / "single-clusterqueue-setup.yaml").read_text()))
    setup[0]["spec"] = {"nodeLabels": {"node.kubernetes.io/instance-type": "m6i.8xlarge"}}
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(setup))
    body = yaml.safe_load((CORPUS / "sample-job.yaml").read_text())
    del body["metadata"]["generateName"]
    body["metadata"]["name"] = "on-cpu-nodes"
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(body))
    job = json.loads(kubectl("get", "job", "on-cpu-nodes", "-o", "json").stdout)
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "m6i.8xlarge"
    }
    pods = pods_of(core, "on-cpu-nodes")
    assert len(pods) == 3
    assert all(p.spec.node_name.startswith("demo-cpu-") for p in pods)


def test_a_job_that_does_not_fit_waits_suspended_without_pods(
    kubectl: Kubectl, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    body = yaml.safe_load((CORPUS / "sample-job.yaml").read_text())
    del body["metadata"]["generateName"]
    body["metadata"]["name"] = "too-wide"
    body["spec"]["parallelism"] = body["spec"]["completions"] = 10
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(body))
    wl = the_workload(custom, "too-wide")
    reserved = cond(wl, "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
        "default-flavor, 1 more needed"
    )
    assert kubectl("get", "job", "too-wide", "-o", "jsonpath={.spec.suspend}").stdout == "true"
    assert pods_of(core, "too-wide") == []


def test_a_job_without_a_queue_name_is_not_kueues(
    kubectl: Kubectl, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    body = yaml.safe_load((CORPUS / "sample-job.yaml").read_text())
    del body["metadata"]["generateName"]
    del body["metadata"]["labels"]
    body["metadata"]["name"] = "unqueued"
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(body))
    assert kubectl("get", "job", "unqueued", "-o", "jsonpath={.spec.suspend}").stdout == "false"
    assert custom.list_namespaced_custom_object(*KQ, "default", "workloads")["items"] == []
    assert [p.status.phase for p in pods_of(core, "unqueued")] == ["Running"] * 3


def test_the_elastic_job_sample_scales_through_workload_slices(
    kubectl: Kubectl, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    kubectl("apply", "-f", str(CORPUS / "single-clusterqueue-setup.yaml"))
    kubectl("apply", "-f", str(CORPUS / "sample-scalable-job.yaml"))
    job = json.loads(kubectl("get", "job", "sample-elastic-job", "-o", "json").stdout)
    gates = job["spec"]["template"]["spec"]["schedulingGates"]
    assert gates == [{"name": "kueue.x-k8s.io/elastic-job"}]
    first = the_workload(custom, "sample-elastic-job")
    assert cond(first, "Admitted")["status"] == "True"
    pods = pods_of(core, "sample-elastic-job")
    assert [(p.status.phase, p.spec.scheduling_gates) for p in pods] == [("Running", None)] * 3

    kubectl("patch", "job", "sample-elastic-job", "-p", '{"spec":{"parallelism":5}}')
    items = custom.list_namespaced_custom_object(*KQ, "default", "workloads")["items"]
    (second,) = [w for w in items if w["metadata"]["name"] != first["metadata"]["name"]]
    assert second["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"default/{first['metadata']['name']}"
    )
    assert second["spec"]["podSets"][0]["count"] == 5
    assert cond(second, "Admitted")["status"] == "True"
    old = next(w for w in items if w["metadata"]["name"] == first["metadata"]["name"])
    assert cond(old, "Finished")["reason"] == "WorkloadSliceReplaced"
    pods = pods_of(core, "sample-elastic-job")
    assert [(p.status.phase, p.spec.scheduling_gates) for p in pods] == [("Running", None)] * 5
    assert cq_cpu(custom) == "500m"

    # Scaling down shrinks the admitted slice in place; the Job controller deletes pods.
    kubectl("patch", "job", "sample-elastic-job", "-p", '{"spec":{"parallelism":2}}')
    items = custom.list_namespaced_custom_object(*KQ, "default", "workloads")["items"]
    assert len(items) == 2
    live = [w for w in items if not any(c["type"] == "Finished" for c in w["status"]["conditions"])]
    assert [w["metadata"]["name"] for w in live] == [second["metadata"]["name"]]
    assert live[0]["spec"]["podSets"][0]["count"] == 2
    assert len(pods_of(core, "sample-elastic-job")) == 2
    assert cq_cpu(custom) == "200m"
