"""The RayJob emulation (KubeRay's RayJob controller, the batch/v1 Job controller and the
simulated Ray driver), driven over HTTP with the official client and kubectl. Time is a
ManualClock: ``advance`` moves it and runs the ticker's work at once."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import rayjob

from kubesim import KubeSim
from kubesim.clock import ManualClock
from tests.kubesim import manual_clock

# The simulator on a clock moved by hand (overrides conftest's real-clock ``sim``).
clock = manual_clock.clock
sim = manual_clock.sim
advance = manual_clock.advance

NS = "default"


@pytest.fixture
def batch(kube_api: client.ApiClient) -> client.BatchV1Api:
    """BatchV1Api on the simulator."""
    return client.BatchV1Api(kube_api)


def create(custom: client.CustomObjectsApi, body: dict[str, Any]) -> None:
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", body)


def get_rj(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    result: dict[str, Any] = custom.get_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", name
    )
    return result


def status(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    return dict(get_rj(custom, name).get("status") or {})


def rayclusters(custom: client.CustomObjectsApi) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = custom.list_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters"
    )["items"]
    return items


def submitter_pods(core: client.CoreV1Api, name: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(NS, label_selector=f"batch.kubernetes.io/job-name={name}")
    return sorted(pods.items, key=lambda p: p.metadata.creation_timestamp)


def test_rayjob_runs_to_completion(
    sim: KubeSim,
    clock: ManualClock,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
) -> None:
    create(custom, rayjob("train", annotations={"kubesim.io/job-run-seconds": "5"}))
    rj = get_rj(custom, "train")
    st = rj["status"]
    assert rj["metadata"]["finalizers"] == ["ray.io/rayjob-finalizer"]
    assert re.fullmatch(r"train-[a-z0-9]{5}", st["jobId"])
    assert re.fullmatch(r"train-[a-z0-9]{5}", st["rayClusterName"])
    cname = st["rayClusterName"]
    assert st["dashboardURL"] == f"{cname}-head-svc.default.svc.cluster.local:8265"
    # The submitter ran at once (startup_delay 0): the Ray job is submitted, PENDING.
    assert st["jobDeploymentStatus"] == "Running"
    assert st["jobStatus"] == "PENDING"
    assert st["startTime"] and "endTime" not in st
    assert st["observedGeneration"] == 1
    assert st["rayClusterStatus"]["state"] == "ready"

    (rc,) = rayclusters(custom)
    assert rc["metadata"]["name"] == cname
    owner = rc["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayJob", "train", True)
    assert rc["metadata"]["labels"]["ray.io/originated-from-crd"] == "RayJob"
    assert rc["metadata"]["labels"]["ray.io/originated-from-cr-name"] == "train"
    assert rc["metadata"]["labels"]["ray.io/job-submission-mode"] == "K8sJobMode"
    assert rc["metadata"]["annotations"]["kubesim.io/job-run-seconds"] == "5"

    job = batch.read_namespaced_job("train", NS)
    assert job.metadata.owner_references[0].kind == "RayJob"
    assert job.spec.backoff_limit == 2
    assert job.spec.selector.match_labels == {
        "batch.kubernetes.io/controller-uid": job.metadata.uid
    }
    (pod,) = submitter_pods(core, "train")
    labels = pod.metadata.labels
    assert labels["job-name"] == "train"
    assert labels["controller-uid"] == labels["batch.kubernetes.io/controller-uid"]
    assert labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
    assert labels["ray.io/originated-from-crd"] == "RayJob"
    assert pod.metadata.owner_references[0].kind == "Job"
    assert pod.spec.restart_policy == "Never"
    (c,) = pod.spec.containers
    assert c.name == "ray-job-submitter"
    assert c.image == "rayproject/ray:2.40.0"  # the head's image
    assert c.resources.requests == {"cpu": "500m", "memory": "200Mi"}
    assert c.resources.limits == {"cpu": "1", "memory": "1Gi"}
    script = c.args[0]
    url = f"http://{cname}-head-svc.default.svc.cluster.local:8265"
    assert f"ray job submit --address {url} --no-wait --submission-id {st['jobId']}" in script
    assert script.index("-- python train.py ;") > script.index("ray job submit")
    assert script.endswith(f"ray job logs --address {url} --follow {st['jobId']}")
    env = {e.name: e.value for e in c.env}
    assert env["RAY_JOB_SUBMISSION_ID"] == st["jobId"]
    assert env["RAY_DASHBOARD_ADDRESS"] == st["dashboardURL"]
    assert pod.status.phase == "Running" and pod.spec.node_name
    assert batch.read_namespaced_job("train", NS).status.active == 1

    advance(sim, clock, 1)
    st = status(custom, "train")
    assert (st["jobStatus"], st["jobDeploymentStatus"]) == ("RUNNING", "Running")
    assert st["message"] == "Job is currently running."
    assert "startTime" in st["rayJobInfo"]

    advance(sim, clock, 5)
    st = status(custom, "train")
    assert (st["jobStatus"], st["jobDeploymentStatus"]) == ("SUCCEEDED", "Complete")
    assert st["message"] == "Job finished successfully."
    assert (st["succeeded"], st["failed"]) == (1, 0)
    assert st["endTime"] and st["rayJobInfo"]["endTime"]
    assert "reason" not in st
    (pod,) = submitter_pods(core, "train")
    assert pod.status.phase == "Succeeded"
    term = pod.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (0, "Completed")
    job = batch.read_namespaced_job("train", NS)
    assert job.status.succeeded == 1 and not job.status.active
    assert job.status.completion_time is not None
    conds = {c.type: c.status for c in job.status.conditions}
    assert conds == {"SuccessCriteriaMet": "True", "Complete": "True"}
    # Without shutdownAfterJobFinishes the RayCluster stays.
    assert len(rayclusters(custom)) == 1
    events = core.list_namespaced_event(
        NS, field_selector="involvedObject.kind=RayJob,involvedObject.name=train"
    )
    reasons = {e.reason for e in events.items}
    assert {"CreatedRayCluster", "CreatedRayJobSubmitter", "CreatedService"} <= reasons
    # KubeRay's RayJob-level head service points at the current RayCluster's head.
    svc = core.read_namespaced_service("train-head-svc", NS)
    assert svc.metadata.owner_references[0].kind == "RayJob"
    assert svc.spec.selector["ray.io/cluster"] == cname
    assert {p.name for p in svc.spec.ports} >= {"dashboard", "client", "gcs-server"}


def test_failed_outcome_with_message_after_submitter_retries(
    sim: KubeSim,
    clock: ManualClock,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
) -> None:
    ann = {
        "kubesim.io/job-outcome": "failed",
        "kubesim.io/job-message": "RuntimeError: CUDA out of memory",
        "kubesim.io/job-run-seconds": "3",
    }
    create(custom, rayjob("oom", annotations=ann))
    advance(sim, clock, 4)  # 1 s PENDING + 3 s RUNNING: the driver failed
    st = status(custom, "oom")
    # The Ray job failed, but KubeRay waits for the submitter Job to finish.
    assert (st["jobStatus"], st["jobDeploymentStatus"]) == ("FAILED", "Running")
    (pod,) = submitter_pods(core, "oom")
    assert pod.status.phase == "Failed"
    term = pod.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (1, "Error")
    # The Job controller retries after its pod-failure backoff (10 s, then 20 s).
    advance(sim, clock, 9)
    assert len(submitter_pods(core, "oom")) == 1
    advance(sim, clock, 1)
    assert len(submitter_pods(core, "oom")) == 2
    advance(sim, clock, 20)
    assert [p.status.phase for p in submitter_pods(core, "oom")] == ["Failed"] * 3
    job = batch.read_namespaced_job("oom", NS)
    assert job.status.failed == 3
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert (failed.reason, failed.message) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    st = status(custom, "oom")
    assert (st["jobStatus"], st["jobDeploymentStatus"]) == ("FAILED", "Failed")
    assert st["reason"] == "AppFailed"
    assert st["message"].startswith("Job entrypoint command failed with exit code 1")
    assert st["message"].endswith("RuntimeError: CUDA out of memory")
    assert (st["succeeded"], st["failed"]) == (0, 1)
    assert st["endTime"]


def test_active_deadline_exceeded(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    create(
        custom,
        rayjob("slow", activeDeadlineSeconds=30, annotations={"kubesim.io/job-run-seconds": "600"}),
    )
    advance(sim, clock, 28)
    assert status(custom, "slow")["jobDeploymentStatus"] == "Running"
    advance(sim, clock, 3)
    st = status(custom, "slow")
    assert st["jobDeploymentStatus"] == "Failed"
    assert st["reason"] == "DeadlineExceeded"
    assert st["message"] == (
        f"The RayJob has passed the activeDeadlineSeconds. StartTime: {st['startTime']}. "
        "ActiveDeadlineSeconds: 30"
    )
    assert st["failed"] == 1
    # KubeRay does not stop the Ray job: its status stays as last seen.
    assert st["jobStatus"] == "RUNNING"


def test_shutdown_after_job_finishes_waits_for_the_ttl(
    sim: KubeSim,
    clock: ManualClock,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
) -> None:
    create(
        custom,
        rayjob(
            "ttl",
            shutdownAfterJobFinishes=True,
            ttlSecondsAfterFinished=10,
            annotations={"kubesim.io/job-run-seconds": "2"},
        ),
    )
    cname = status(custom, "ttl")["rayClusterName"]
    advance(sim, clock, 3)
    assert status(custom, "ttl")["jobDeploymentStatus"] == "Complete"
    advance(sim, clock, 9)
    assert [rc["metadata"]["name"] for rc in rayclusters(custom)] == [cname]
    advance(sim, clock, 1.5)
    assert rayclusters(custom) == []
    assert core.list_namespaced_pod(NS, label_selector=f"ray.io/cluster={cname}").items == []
    # The submitter Job stays, with its pod, for the driver logs.
    assert batch.read_namespaced_job("ttl", NS).status.succeeded == 1
    assert submitter_pods(core, "ttl")[0].status.phase == "Succeeded"
    st = status(custom, "ttl")
    assert (st["jobDeploymentStatus"], st["jobStatus"]) == ("Complete", "SUCCEEDED")


def test_shutdown_with_zero_ttl_is_immediate(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    create(
        custom,
        rayjob(
            "now", shutdownAfterJobFinishes=True, annotations={"kubesim.io/job-run-seconds": "1"}
        ),
    )
    advance(sim, clock, 2)
    assert status(custom, "now")["jobDeploymentStatus"] == "Complete"
    assert rayclusters(custom) == []


def test_created_suspended_then_resumed_then_suspended(
    sim: KubeSim,
    clock: ManualClock,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
) -> None:
    create(custom, rayjob("held", suspend=True, shutdownAfterJobFinishes=True))
    st = status(custom, "held")
    assert st["jobDeploymentStatus"] == "Suspended"
    # jobStatus "" (KubeRay's JobStatusNew) is omitted, as its omitempty JSON tag does.
    assert "jobStatus" not in st
    assert "jobId" not in st and "rayClusterName" not in st
    assert rayclusters(custom) == []
    assert core.list_namespaced_pod(NS).items == []
    assert batch.list_namespaced_job(NS).items == []

    custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", "held", {"spec": {"suspend": False}}
    )
    st = status(custom, "held")
    assert st["jobDeploymentStatus"] == "Running"
    first_id = st["jobId"]
    assert len(rayclusters(custom)) == 1
    assert len(submitter_pods(core, "held")) == 1

    # Suspending a running job tears its cluster and submitter down.
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", "held", {"spec": {"suspend": True}}
    )
    st = status(custom, "held")
    assert st["jobDeploymentStatus"] == "Suspended"
    assert "jobStatus" not in st
    for gone in ("jobId", "rayClusterName", "dashboardURL", "message", "rayClusterStatus"):
        assert gone not in st
    assert rayclusters(custom) == []
    assert batch.list_namespaced_job(NS).items == []
    assert core.list_namespaced_pod(NS).items == []

    # Resuming starts over with new names.
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", "held", {"spec": {"suspend": False}}
    )
    st = status(custom, "held")
    assert st["jobDeploymentStatus"] == "Running" and st["jobId"] != first_id
    advance(sim, clock, 7)
    assert status(custom, "held")["jobDeploymentStatus"] == "Complete"


def test_suspend_is_ignored_once_complete(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi
) -> None:
    create(custom, rayjob("done", shutdownAfterJobFinishes=True, ttlSecondsAfterFinished=60))
    advance(sim, clock, 7)
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", "done", {"spec": {"suspend": True}}
    )
    assert status(custom, "done")["jobDeploymentStatus"] == "Complete"


def test_suspend_without_shutdown_is_a_validation_failure(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    create(custom, rayjob("bad", suspend=True))
    st = status(custom, "bad")
    assert st["jobDeploymentStatus"] == "ValidationFailed"
    assert st["reason"] == "ValidationFailed"
    assert st["message"] == (
        "The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is "
        "not allowed to be suspended"
    )
    assert rayclusters(custom) == []


def test_deleting_the_rayjob_cascades(
    sim: KubeSim,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    batch: client.BatchV1Api,
) -> None:
    create(custom, rayjob("gone"))
    assert len(core.list_namespaced_pod(NS).items) == 3  # head, worker, submitter
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", "gone")
    with pytest.raises(ApiException) as exc:
        get_rj(custom, "gone")
    assert exc.value.status == 404
    assert rayclusters(custom) == []
    assert batch.list_namespaced_job(NS).items == []
    assert core.list_namespaced_pod(NS).items == []
    assert core.list_namespaced_service(NS).items == []


def test_submitter_pod_template_and_job_id_from_spec(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    template = {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "submit",
                    "image": "example/submitter:1",
                    "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}},
                }
            ],
        },
    }
    create(custom, rayjob("custom", jobId="my-run-1", submitterPodTemplate=template))
    st = status(custom, "custom")
    assert st["jobId"] == "my-run-1"
    (pod,) = submitter_pods(core, "custom")
    assert pod.metadata.labels["team"] == "ml"
    (c,) = pod.spec.containers
    assert (c.name, c.image) == ("submit", "example/submitter:1")
    assert "--submission-id my-run-1" in c.args[0]
    assert st["jobStatus"] == "PENDING"


def test_submitter_pod_counts_against_quota_until_it_ends(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    core.create_namespaced_resource_quota(
        NS,
        {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "10", "requests.cpu": "100"}}},
    )
    create(custom, rayjob("quota", shutdownAfterJobFinishes=True))
    used = core.read_namespaced_resource_quota("q", NS).status.used
    assert used["pods"] == "3"
    assert used["requests.cpu"] == "18500m"  # head 2 + worker 16 + submitter 0.5
    advance(sim, clock, 7)
    assert status(custom, "quota")["jobDeploymentStatus"] == "Complete"
    used = core.read_namespaced_resource_quota("q", NS).status.used
    assert (used["pods"], used["requests.cpu"]) == ("0", "0")


def test_defaults_from_the_python_setter_and_the_fleet(clock: ManualClock, tmp_path: Any) -> None:
    fleet = {
        "name": "t",
        "pools": [
            {
                "name": "cpu",
                "count": 2,
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            },
            {
                "name": "h100",
                "count": 1,
                "allocatable": {
                    "cpu": "64",
                    "memory": "256Gi",
                    "nvidia.com/gpu": "8",
                    "pods": "110",
                },
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            },
        ],
        "rayjobs": {"runSeconds": 2, "outcome": "failed", "message": "fleet says no"},
    }
    with KubeSim(fleet=fleet, clock=clock) as s:
        rt = s.cluster.rt("rayjobs.ray.io")
        with s.cluster.lock:
            s.cluster.create_object(rt, rayjob("a", submitterConfig={"backoffLimit": 0}))
            s.cluster.settle()
        advance(s, clock, 3)
        st = s.get("rayjobs.ray.io", NS, "a")["status"]  # type: ignore[index]
        assert (st["jobStatus"], st["jobDeploymentStatus"]) == ("FAILED", "Failed")
        assert st["message"].endswith("fleet says no")

        s.set_rayjob_defaults(run_seconds=1, outcome="succeeded", message="")
        with s.cluster.lock:
            s.cluster.create_object(rt, rayjob("b"))
            s.cluster.settle()
        advance(s, clock, 2)
        st = s.get("rayjobs.ray.io", NS, "b")["status"]  # type: ignore[index]
        assert (st["jobStatus"], st["jobDeploymentStatus"]) == ("SUCCEEDED", "Complete")
        with pytest.raises(ValueError):
            s.set_rayjob_defaults(outcome="maybe")
        with pytest.raises(ValueError):
            s.set_rayjob_defaults(run_seconds=-1)


def test_with_a_startup_delay_on_the_real_clock() -> None:
    with KubeSim(startup_delay=0.2) as s:
        s.set_rayjob_defaults(run_seconds=0.5, pending_seconds=0.1)
        rt = s.cluster.rt("rayjobs.ray.io")
        with s.cluster.lock:
            s.cluster.create_object(rt, rayjob("slowstart"))
            s.cluster.settle()
            st = s.cluster.store.get("rayjobs.ray.io", NS, "slowstart")["status"]  # type: ignore[index]
            # The cluster's pods are still ContainerCreating: the job waits for it.
            assert st["jobDeploymentStatus"] == "Initializing"
            assert st["rayClusterStatus"].get("state") != "ready"
        deadline = time.monotonic() + 15
        seen = set()
        while time.monotonic() < deadline:
            st = s.get("rayjobs.ray.io", NS, "slowstart")["status"]  # type: ignore[index]
            seen.add(st["jobDeploymentStatus"])
            if st["jobDeploymentStatus"] == "Complete":
                break
            time.sleep(0.05)
        assert st["jobDeploymentStatus"] == "Complete", st
        assert {"Initializing", "Running", "Complete"} <= seen


def test_discovery_and_kubectl(
    sim: KubeSim,
    clock: ManualClock,
    custom: client.CustomObjectsApi,
    kubectl: Callable[..., Any],
) -> None:
    with urllib.request.urlopen(sim.url + "/apis/batch/v1") as resp:
        names = {r["name"] for r in json.load(resp)["resources"]}
    assert {"jobs", "jobs/status"} <= names
    with urllib.request.urlopen(sim.url + "/api/v1") as resp:
        core_names = {r["name"]: r for r in json.load(resp)["resources"]}
    assert core_names["pods/log"]["verbs"] == ["get"]

    create(custom, rayjob("cli", annotations={"kubesim.io/job-run-seconds": "1"}))
    advance(sim, clock, 2)
    out = kubectl("get", "jobs").stdout
    assert re.search(r"^cli\s+Complete\s+1/1\s+\S+\s+\S+$", out, re.M), out
    out = kubectl("get", "rayjobs").stdout
    assert re.search(r"^cli\s+SUCCEEDED\s+Complete\s+cli-\w{5}\s", out, re.M), out
    doc = json.loads(kubectl("get", "job", "cli", "-o", "json").stdout)
    assert doc["status"]["succeeded"] == 1
    out = kubectl("get", "jobs", "--field-selector", "status.successful=1", "-o", "name").stdout
    assert out.strip() == "job.batch/cli"
    # A finished pod prints its container's terminated reason, as kubectl's printer does.
    out = kubectl("get", "pods", "-l", "job-name=cli").stdout
    assert re.search(r"^cli-\w{5}\s+0/1\s+Completed\s+0\s", out, re.M), out
    # kubectl create job sends protobuf; the pod then runs until deleted.
    kubectl("create", "job", "hello", "--image=busybox")
    out = kubectl("get", "jobs", "hello").stdout
    assert re.search(r"^hello\s+Running\s+0/1\s", out, re.M), out
    assert "kubesim: container hello started" in kubectl("logs", "job/hello").stdout


def test_a_name_too_long_for_its_raycluster_is_a_validation_failure(
    sim: KubeSim, custom: client.CustomObjectsApi
) -> None:
    name = "a" * 48
    create(custom, rayjob(name))
    st = status(custom, name)
    assert st["jobDeploymentStatus"] == "ValidationFailed"
    assert st["message"] == (
        "The RayJob metadata is invalid: RayJob name should be no more than 47 characters"
    )
    assert rayclusters(custom) == []


def test_http_mode_submits_without_a_submitter(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, batch: client.BatchV1Api
) -> None:
    create(custom, rayjob("http", submissionMode="HTTPMode"))
    st = status(custom, "http")
    assert (st["jobDeploymentStatus"], st["jobStatus"]) == ("Running", "PENDING")
    assert batch.list_namespaced_job(NS).items == []
    advance(sim, clock, 7)
    st = status(custom, "http")
    assert (st["jobDeploymentStatus"], st["jobStatus"]) == ("Complete", "SUCCEEDED")


def test_interactive_mode_waits_for_a_job_id(
    sim: KubeSim, custom: client.CustomObjectsApi, batch: client.BatchV1Api
) -> None:
    create(custom, rayjob("chat", submissionMode="InteractiveMode"))
    st = status(custom, "chat")
    assert st["jobDeploymentStatus"] == "Waiting"
    assert "jobId" not in st and st["dashboardURL"]
    assert batch.list_namespaced_job(NS).items == []
    custom.patch_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", "chat", {"spec": {"jobId": "by-hand"}}
    )
    st = status(custom, "chat")
    assert (st["jobDeploymentStatus"], st["jobId"]) == ("Running", "by-hand")


def test_losing_the_raycluster_fails_the_following_submitter(
    sim: KubeSim,
    clock: ManualClock,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
) -> None:
    create(custom, rayjob("lost", annotations={"kubesim.io/job-run-seconds": "100"}))
    advance(sim, clock, 2)
    cname = status(custom, "lost")["rayClusterName"]
    custom.delete_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", cname)
    (pod,) = submitter_pods(core, "lost")
    term = pod.status.container_statuses[0].state.terminated
    assert (pod.status.phase, term.exit_code) == ("Failed", 1)
    text = core.read_namespaced_pod_log(pod.metadata.name, NS, _preload_content=False).data
    assert b"the connection was lost" in text
    # As KubeRay does, the RayCluster is created again under the same name.
    assert [rc["metadata"]["name"] for rc in rayclusters(custom)] == [cname]
