"""MultiKueue across three kubesims (a manager, two workers) over loopback HTTP: the
manager is set up with kubectl as Kueue's "Setup MultiKueue" page tells an admin (the
kubeconfig Secrets, MultiKueueClusters, MultiKueueConfig, the AdmissionCheck), the workers
with the official client (the same namespace and LocalQueue). Real clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import raycluster, rayjob

from kubesim import KubeSim
from kubesim.__main__ import parse_args
from kubesim.operators.kueue import mkworkloads
from kubesim.operators.kueue.mkconfig import INCREMENTAL, parse_settings
from tests.kubesim.conftest import kubectl_runner

KQ = ("kueue.x-k8s.io", "v1beta2")
NS = "team"
L4 = "NVIDIA-L4"
CORPUS = Path(__file__).parent / "corpus" / "kueue-v0.19.2"
Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def api_for(sim: KubeSim) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = sim.url
    return client.ApiClient(cfg)


def setup_queues(sim: KubeSim, gpus: int, check: str = "") -> None:
    """Flavors, a ClusterQueue (``gpus`` L4s; with admission check ``check``) and the
    LocalQueue ``lq`` in namespace ``team``, with the official client."""
    api = api_for(sim)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    for name, labels in (("l4", {"nvidia.com/gpu.product": L4}), ("cpu", {})):
        custom.create_cluster_custom_object(
            *KQ,
            "resourceflavors",
            {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels}},
        )
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "cpu",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "100"},
                            {"name": "memory", "nominalQuota": "1Ti"},
                        ],
                    }
                ],
            },
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "l4", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}
                ],
            },
        ],
    }
    if check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    custom.create_cluster_custom_object(
        *KQ, "clusterqueues", {"kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}
    )
    core.create_namespace({"metadata": {"name": NS}})
    custom.create_namespaced_custom_object(
        *KQ,
        NS,
        "localqueues",
        {"kind": "LocalQueue", "metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}},
    )
    api.close()


def manager_objects(workers: list[str]) -> str:
    """The manager's MultiKueue objects as an admin writes them (one Secret per worker,
    named ``<worker>-secret``, is created apart)."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "mk"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "MultiKueueConfig",
                    "name": "fleet",
                },
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": "fleet"},
            "spec": {"clusters": workers},
        },
    ]
    for name in workers:
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "MultiKueueCluster",
                "metadata": {"name": name},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{name}-secret"}
                    }
                },
            }
        )
    return yaml.safe_dump_all(docs)


def make_kubectl(sim: KubeSim, tmp_path: Path) -> Kubectl:
    """kubectl on ``sim`` (the manager)."""
    return kubectl_runner(sim.write_kubeconfig(str(tmp_path / "manager-kubeconfig")), tmp_path)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def get(sim: KubeSim, plural: str, name: str, group: tuple[str, str] = KQ) -> Any:
    api = api_for(sim)
    try:
        if plural in ("multikueueclusters", "admissionchecks"):
            return client.CustomObjectsApi(api).get_cluster_custom_object(*group, plural, name)
        return client.CustomObjectsApi(api).get_namespaced_custom_object(*group, NS, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    finally:
        api.close()


def workloads(sim: KubeSim) -> list[dict[str, Any]]:
    api = api_for(sim)
    try:
        items: list[dict[str, Any]] = client.CustomObjectsApi(api).list_namespaced_custom_object(
            *KQ, NS, "workloads"
        )["items"]
        return items
    finally:
        api.close()


def active(obj: dict[str, Any] | None) -> tuple[str, str, str] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == "Active":
            return c["status"], c["reason"], c["message"]
    return None


def check_state(wl: dict[str, Any]) -> tuple[str, str]:
    for st in (wl.get("status") or {}).get("admissionChecks") or []:
        if st["name"] == "mk":
            return st["state"], st["message"]
    return "", ""


def submit(sim: KubeSim, name: str, run_seconds: int, queue: str = "lq", **spec: Any) -> None:
    """A queued RayJob of one L4 worker in LocalQueue ``queue`` on ``sim`` (``spec``: more
    RayJob fields)."""
    job = rayjob(
        name,
        NS,
        workers=1,
        gpus=1,
        labels={"kueue.x-k8s.io/queue-name": queue},
        annotations={"kubesim.io/job-run-seconds": str(run_seconds)},
        shutdownAfterJobFinishes=True,
        **spec,
    )
    for template in [job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]] + [
        g["template"] for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    ]:
        template["spec"].pop("nodeSelector", None)  # the flavor's labels place the pods
    api = api_for(sim)
    client.CustomObjectsApi(api).create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", job)
    api.close()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[KubeSim, KubeSim, KubeSim, Kubectl]]:
    """A manager (workerLostTimeout 5 s) and two workers, the manager set up with kubectl."""
    manager = KubeSim(kueue=True, multikueue={"workerLostTimeout": "5s", "gcInterval": "1s"})
    w1, w2 = KubeSim(kueue=True), KubeSim(kueue=True)
    for s in (manager, w1, w2):
        s.start()
    try:
        yield manager, w1, w2, make_kubectl(manager, tmp_path)
    finally:
        for s in (manager, w1, w2):
            s.stop()


def connect(
    manager: KubeSim, workers: dict[str, KubeSim], kubectl: Kubectl, tmp_path: Path
) -> None:
    """The admin's steps on the manager: a kubeconfig Secret per worker in kueue-system
    (the worker's own kubeconfig file), then the MultiKueue objects."""
    for name, worker in workers.items():
        path = worker.write_kubeconfig(str(tmp_path / f"{name}.kubeconfig"))
        kubectl(
            "create", "secret", "generic", f"{name}-secret", "-n", "kueue-system",
            f"--from-file=kubeconfig={path}",
        )  # fmt: skip
    manifest = tmp_path / "multikueue.yaml"
    manifest.write_text(manager_objects(list(workers)))
    kubectl("apply", "-f", str(manifest))


def test_rayjob_runs_on_the_worker_that_admits_and_is_cleaned_up(
    fleet: tuple[KubeSim, KubeSim, KubeSim, Kubectl], tmp_path: Path
) -> None:
    manager, w1, w2, kubectl = fleet
    setup_queues(manager, gpus=4, check="mk")
    setup_queues(w1, gpus=0)  # no room for the L4 flavor
    setup_queues(w2, gpus=4)
    connect(manager, {"worker1": w1, "worker2": w2}, kubectl, tmp_path)
    for name in ("worker1", "worker2"):
        assert wait_for(
            f"{name} Active",
            lambda n=name: active(get(manager, "multikueueclusters", n)),  # type: ignore[misc]
        ) == ("True", "Active", "Connected")
    assert wait_for("the check Active", lambda: active(get(manager, "admissionchecks", "mk"))) == (
        "True",
        "Active",
        "The admission check is active",
    )
    out = kubectl("get", "multikueueclusters").stdout
    assert "worker1" in out and "True" in out

    submit(manager, "long", run_seconds=600)
    rj = get(manager, "rayjobs", "long", ("ray.io", "v1"))
    assert rj["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # Kueue's webhook default
    # Worker 1 holds a copy of the Workload it cannot admit until worker 2 admits it.
    local = wait_for(
        "the check Ready",
        lambda: next(
            (w for w in workloads(manager) if check_state(w)[0] == "Ready"),
            None,
        ),
    )
    assert check_state(local) == ("Ready", 'The workload was admitted on "worker2"')
    assert local["status"]["clusterName"] == "worker2"
    assert "nominatedClusterNames" not in local["status"]
    wl_name = local["metadata"]["name"]
    remote = get(w2, "workloads", wl_name)
    assert remote["metadata"]["labels"]["kueue.x-k8s.io/multikueue-origin"] == "multikueue"
    wait_for("worker1's copy deleted", lambda: get(w1, "workloads", wl_name) is None)
    # The job runs on worker 2 only: its copy is KubeRay's, the manager's is not.
    copy = wait_for("the job on worker 2", lambda: get(w2, "rayjobs", "long", ("ray.io", "v1")))
    assert "managedBy" not in copy["spec"]
    assert copy["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] == wl_name
    assert get(w1, "rayjobs", "long", ("ray.io", "v1")) is None
    wait_for(
        "the status synced back",
        lambda: (
            (get(manager, "rayjobs", "long", ("ray.io", "v1")).get("status") or {}).get("jobStatus")
            == "RUNNING"
        ),
    )
    with manager.cluster.lock:
        assert manager.store.count("pods") == 0  # the manager never runs the job's pods
    assert get(manager, "rayclusters", "long", ("ray.io", "v1")) is None

    # A short job finishes on worker 2: its status and Finished come back, copies go.
    submit(manager, "short", run_seconds=1)
    done = wait_for(
        "short finished",
        lambda: (
            (get(manager, "rayjobs", "short", ("ray.io", "v1")).get("status") or {}).get(
                "jobDeploymentStatus"
            )
            == "Complete"
        ),
    )
    assert done
    short_wl = next(
        w for w in workloads(manager) if w["metadata"]["ownerReferences"][0]["name"] == "short"
    )
    wait_for(
        "short's Workload finished",
        lambda: any(
            c["type"] == "Finished" and c["status"] == "True"
            for c in get(manager, "workloads", short_wl["metadata"]["name"])["status"]["conditions"]
        ),
    )
    wait_for(
        "short's copies deleted", lambda: get(w2, "rayjobs", "short", ("ray.io", "v1")) is None
    )
    wait_for(
        "short's Workload copy deleted",
        lambda: get(w2, "workloads", short_wl["metadata"]["name"]) is None,
    )

    # Deleting the job on the manager deletes the worker's copies.
    kubectl("delete", "rayjob", "long", "-n", NS)
    wait_for("the job copy deleted", lambda: get(w2, "rayjobs", "long", ("ray.io", "v1")) is None)
    wait_for("the Workload copy deleted", lambda: get(w2, "workloads", wl_name) is None)


def test_cluster_with_a_bad_kubeconfig_is_inactive(fleet: Any, tmp_path: Path) -> None:
    """Kueue's own sample (one worker, ``worker1-secret``): no Secret, then one whose
    kubeconfig is refused, then one for a worker that does not answer."""
    manager, w1, _, kubectl = fleet
    kubectl("apply", "-f", str(CORPUS / "multikueue_multikueue-setup.yaml"))
    name = "multikueue-test-worker1"
    assert wait_for("Active", lambda: active(get(manager, "multikueueclusters", name))) == (
        "False",
        "BadKubeConfig",
        'load client config failed: secrets "worker1-secret" not found',
    )
    assert wait_for(
        "the check", lambda: active(get(manager, "admissionchecks", "sample-multikueue"))
    )[:2] == ("False", "NoUsableClusters")
    kubeconfig = w1.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    path = tmp_path / "bad.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    kubectl(
        "create", "secret", "generic", "worker1-secret", "-n", "kueue-system",
        f"--from-file=kubeconfig={path}",
    )  # fmt: skip
    assert wait_for(
        "refused",
        lambda: (
            (a := active(get(manager, "multikueueclusters", name)))
            and a[1] != "BadKubeConfig"
            and a
        ),
    ) == (
        "False",
        "InsecureKubeConfig",
        "load client config failed: insecure TLS verification is not allowed for cluster kubesim",
    )
    # A kubeconfig for a server that does not answer.
    kubeconfig = w1.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"
    path.write_text(yaml.safe_dump(kubeconfig))
    kubectl("delete", "secret", "worker1-secret", "-n", "kueue-system")
    kubectl(
        "create", "secret", "generic", "worker1-secret", "-n", "kueue-system",
        f"--from-file=kubeconfig={path}",
    )  # fmt: skip
    status, _reason, message = wait_for(
        "unreachable",
        lambda: (
            (a := active(get(manager, "multikueueclusters", name)))
            and a[1] == "ClientConnectionFailed"
            and a
        ),
    )
    assert status == "False" and "127.0.0.1:9" in message
    # Workloads behind the inactive check wait, as in a ClusterQueue Kueue marks inactive.
    cq = kubectl("get", "clusterqueue", "cluster-queue", "-o", "yaml").stdout
    assert "AdmissionCheckInactive" in cq


def test_lost_worker_workload_is_dispatched_again(
    fleet: tuple[KubeSim, KubeSim, KubeSim, Kubectl], tmp_path: Path
) -> None:
    manager, w1, w2, kubectl = fleet
    setup_queues(manager, gpus=4, check="mk")
    setup_queues(w1, gpus=4)
    setup_queues(w2, gpus=4)
    workers = {"worker1": w1, "worker2": w2}
    connect(manager, workers, kubectl, tmp_path)
    wait_for(
        "the check Active",
        lambda: (active(get(manager, "admissionchecks", "mk")) or ("",))[0] == "True",
    )
    submit(manager, "job", run_seconds=600)
    first = wait_for(
        "admitted",
        lambda: next((w for w in workloads(manager) if w["status"].get("clusterName")), None),
    )
    wl_name, winner = first["metadata"]["name"], first["status"]["clusterName"]
    other = "worker2" if winner == "worker1" else "worker1"
    wait_for("the other copy deleted", lambda: get(workers[other], "workloads", wl_name) is None)

    workers[winner].stop()
    lost_at = time.monotonic()
    wait_for(
        "the worker inactive",
        lambda: (
            (active(get(manager, "multikueueclusters", winner)) or ("",))[1]
            == "ClientConnectionFailed"
        ),
    )
    # Within workerLostTimeout the Workload stays where it was.
    assert check_state(get(manager, "workloads", wl_name))[0] == "Ready"
    again = wait_for(
        "dispatched again",
        lambda: (
            (w := get(manager, "workloads", wl_name))
            and w["status"].get("clusterName") == other
            and w
        ),
        timeout=30,
    )
    assert time.monotonic() - lost_at >= 5.0
    assert check_state(again) == ("Ready", f'The workload was admitted on "{other}"')
    evicted = next(c for c in again["status"]["conditions"] if c["type"] == "Evicted")
    assert evicted["reason"] == "QuotaReserved"  # evicted once (AdmissionCheck), readmitted
    assert wait_for(
        "the job on the other worker",
        lambda: get(workers[other], "rayjobs", "job", ("ray.io", "v1")),
    )

    # The lost worker comes back: its stale copies are deleted.
    workers[winner].restart()
    wait_for(
        "stale copy deleted", lambda: get(workers[winner], "workloads", wl_name) is None, timeout=30
    )
    wait_for(
        "stale job deleted",
        lambda: get(workers[winner], "rayjobs", "job", ("ray.io", "v1")) is None,
    )


def test_incremental_dispatcher_nominates_in_order_and_a_raycluster_runs_remotely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Incremental dispatcher, one cluster per round (Kueue's step is 3, its round 5
    minutes: shortened here): worker1 first, which cannot admit; then worker2 too."""
    monkeypatch.setattr(mkworkloads, "INCREMENTAL_STEP", 1)
    monkeypatch.setattr(mkworkloads, "INCREMENTAL_ROUND_SECONDS", 2.0)
    manager = KubeSim(kueue=True, multikueue={"dispatcherName": INCREMENTAL}).start()
    w1, w2 = KubeSim(kueue=True).start(), KubeSim(kueue=True).start()
    try:
        kubectl = make_kubectl(manager, tmp_path)
        setup_queues(manager, gpus=4, check="mk")
        setup_queues(w1, gpus=0)
        setup_queues(w2, gpus=4)
        connect(manager, {"worker1": w1, "worker2": w2}, kubectl, tmp_path)
        wait_for(
            "the check Active",
            lambda: (active(get(manager, "admissionchecks", "mk")) or ("",))[0] == "True",
        )
        rc = raycluster("rc", NS, workers=1, gpus=1, labels={"kueue.x-k8s.io/queue-name": "lq"})
        rc["spec"]["workerGroupSpecs"][0]["template"]["spec"].pop("nodeSelector")
        api = api_for(manager)
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "ray.io", "v1", NS, "rayclusters", rc
        )
        api.close()
        first = wait_for(
            "first round",
            lambda: next(
                (w for w in workloads(manager) if w["status"].get("nominatedClusterNames")), None
            ),
        )
        assert first["status"]["nominatedClusterNames"] == ["worker1"]
        wl_name = first["metadata"]["name"]
        assert wait_for("copy on worker1", lambda: get(w1, "workloads", wl_name))
        assert get(w2, "workloads", wl_name) is None
        done = wait_for(
            "admitted on worker2",
            lambda: (
                (w := get(manager, "workloads", wl_name)) and w["status"].get("clusterName") and w
            ),
        )
        assert done["status"]["clusterName"] == "worker2"
        wait_for("worker1's copy deleted", lambda: get(w1, "workloads", wl_name) is None)
        remote = wait_for(
            "the RayCluster on worker2", lambda: get(w2, "rayclusters", "rc", ("ray.io", "v1"))
        )
        assert "managedBy" not in remote["spec"]
        wait_for(
            "its state synced back",
            lambda: (
                (get(manager, "rayclusters", "rc", ("ray.io", "v1")).get("status") or {}).get(
                    "state"
                )
                == "ready"
            ),
        )
        with manager.cluster.lock:
            assert manager.store.count("pods") == 0
        with w2.cluster.lock:
            assert w2.store.count("pods") == 2  # head and one worker, on worker2

        # Kueue's webhook takes a job from KubeRay when its queue runs MultiKueue...
        submit(manager, "taken", run_seconds=60, managedBy="ray.io/kuberay-operator")
        taken = get(manager, "rayjobs", "taken", ("ray.io", "v1"))
        assert taken["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        # ...but not when its LocalQueue did not exist yet: KubeRay keeps it, and it cannot
        # be dispatched (the check is Rejected).
        submit(manager, "mine", run_seconds=60, managedBy="ray.io/kuberay-operator", queue="late")
        mine = get(manager, "rayjobs", "mine", ("ray.io", "v1"))
        assert mine["spec"]["managedBy"] == "ray.io/kuberay-operator"
        api = api_for(manager)
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            *KQ,
            NS,
            "localqueues",
            {"kind": "LocalQueue", "metadata": {"name": "late"}, "spec": {"clusterQueue": "cq"}},
        )
        api.close()
        rejected = wait_for(
            "deactivated",
            lambda: next(
                (
                    w
                    for w in workloads(manager)
                    if w["metadata"]["ownerReferences"][0]["name"] == "mine"
                    and w["spec"].get("active") is False
                ),
                None,
            ),
        )
        evicted = next(c for c in rejected["status"]["conditions"] if c["type"] == "Evicted")
        assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
        assert check_state(rejected) == (
            "Pending",
            "Reset to Pending after eviction. Previously: Rejected",
        )
        api = api_for(manager)
        events = client.CoreV1Api(api).list_namespaced_event(NS).items
        api.close()
        assert (
            "The owner is not managed by Kueue: Expecting spec.managedBy to be "
            '"kueue.x-k8s.io/multikueue" not "ray.io/kuberay-operator", Previously: "Pending"'
        ) in [e.message for e in events if e.reason == "MultiKueue"]
    finally:
        for s in (manager, w1, w2):
            s.stop()


def test_settings_and_the_command_line_flag() -> None:
    assert parse_settings(None).worker_lost_timeout == 900.0  # Kueue's 15 min
    settings = parse_settings({"workerLostTimeout": "1m30s", "gcInterval": 5})
    assert (settings.worker_lost_timeout, settings.gc_interval) == (90.0, 5.0)
    for bad in ({"workerLostTimeout": "soon"}, {"unknown": 1}, {"dispatcherName": "x"}):
        with pytest.raises(ValueError):
            parse_settings(bad)
    args = parse_args(["--multikueue-config", '{"workerLostTimeout": "30s"}'])
    assert args.multikueue_config == {"workerLostTimeout": "30s"}
    with pytest.raises(SystemExit):
        parse_args(["--multikueue-config", '{"workerLostTimeout": "never"}'])


def test_processes_reach_each_other_with_the_kubeconfig_out_file(tmp_path: Path) -> None:
    """A worker and a manager as ``python -m kubesim`` processes: the Secret holds the
    worker's ``--kubeconfig-out`` file, and the manager connects to it."""
    repo = Path(__file__).resolve().parents[2]
    procs = []
    try:
        for name, extra in (
            ("worker", []),
            ("manager", ["--multikueue-config", '{"workerLostTimeout": "5s"}']),
        ):
            command = [sys.executable, "-m", "kubesim", "--port", "0", "--kueue", *extra]
            command += ["--kubeconfig-out", str(tmp_path / f"{name}.kubeconfig")]
            env = dict(os.environ, PYTHONPATH=str(repo))
            procs.append(
                subprocess.Popen(
                    command,
                    cwd=repo,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    env=env,
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            assert "kubesim listening on" in proc.stdout.readline()
        kubectl = kubectl_runner(str(tmp_path / "manager.kubeconfig"), tmp_path)
        kubectl(
            "create", "secret", "generic", "worker-secret", "-n", "kueue-system",
            f"--from-file=kubeconfig={tmp_path / 'worker.kubeconfig'}",
        )  # fmt: skip
        manifest = tmp_path / "mk.yaml"
        manifest.write_text(manager_objects(["worker"]))
        kubectl("apply", "-f", str(manifest))
        jsonpath = '{.status.conditions[?(@.type=="Active")].reason}'
        wait_for(
            "connected",
            lambda: (
                kubectl("get", "mkc", "worker", "-o", f"jsonpath={jsonpath}").stdout == "Active"
            ),
        )
        procs[0].send_signal(signal.SIGTERM)
        procs[0].wait(timeout=20)
        wait_for(
            "lost",
            lambda: (
                kubectl("get", "mkc", "worker", "-o", f"jsonpath={jsonpath}").stdout
                == "ClientConnectionFailed"
            ),
        )
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=20)


def test_a_copy_starts_when_its_prebuilt_workload_comes_after_it_and_again_when_made_anew() -> None:
    """Kueue retries a job whose prebuilt Workload is missing (ErrPrebuiltWorkloadNotFound)
    and reconciles it on every change of that Workload: a worker's copy that arrived first
    starts once its Workload is created and admitted, stops when the Workload is deleted
    and starts again when MultiKueue makes it anew (as after a retry)."""
    source, worker = KubeSim(kueue=True).start(), KubeSim(kueue=True).start()
    try:
        setup_queues(source, gpus=0)
        setup_queues(worker, gpus=4)
        body = raycluster("rc", NS, product=L4, labels={"kueue.x-k8s.io/queue-name": "lq"})
        custom = client.CustomObjectsApi(api_for(source))
        custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", body)
        made = wait_for("the source's Workload", lambda: workloads(source))[0]
        name = made["metadata"]["name"]
        labels = {
            k: v for k, v in made["metadata"]["labels"].items() if k != "kueue.x-k8s.io/job-uid"
        }
        labels["kueue.x-k8s.io/multikueue-origin"] = "multikueue"
        clone = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": made["spec"],
        }
        copy_labels = {
            "kueue.x-k8s.io/queue-name": "lq",
            "kueue.x-k8s.io/prebuilt-workload-name": name,
            "kueue.x-k8s.io/multikueue-origin": "multikueue",
        }
        on_worker = client.CustomObjectsApi(api_for(worker))
        on_worker.create_namespaced_custom_object(
            "ray.io", "v1", NS, "rayclusters", raycluster("rc", NS, product=L4, labels=copy_labels)
        )

        def suspended() -> bool:
            return bool(get(worker, "rayclusters", "rc", ("ray.io", "v1"))["spec"].get("suspend"))

        assert wait_for("the copy suspended without its Workload", suspended)
        assert workloads(worker) == []  # Kueue makes none for a copy: it waits for MultiKueue's
        for attempt in ("created", "created anew"):
            on_worker.create_namespaced_custom_object(*KQ, NS, "workloads", clone)
            wait_for(f"the copy started once its Workload was {attempt}", lambda: not suspended())
            owners = get(worker, "workloads", name)["metadata"]["ownerReferences"]
            assert [(o["kind"], o["name"]) for o in owners] == [("RayCluster", "rc")]
            on_worker.delete_namespaced_custom_object(*KQ, NS, "workloads", name)
            assert wait_for("the copy stopped without its Workload", suspended)
    finally:
        source.stop()
        worker.stop()
