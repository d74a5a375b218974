"""Real Ray behind kubesim (``--real-ray``): a RayCluster's head and workers are real Ray
processes, reached through the API server's service proxy with Ray's own Jobs client;
clusters beyond N stay simulated; RayJobs run their entrypoint on the real head; the
processes end with the cluster and with kubesim; a RayService's Serve app runs on the real
head and answers through the serve service.

One kubesim and one real cluster serve the whole module (a real head takes seconds to
start); the tests run in file order and the last ones take the cluster down.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from ray.job_submission import JobStatus, JobSubmissionClient

from demo_serve.text_to_image import render
from kubesim import KubeSim
from kubesim.util import get_path
from tests.clusters.engine.conftest import wait_for
from tests.kubesim.kubesim_helpers import L4, raycluster

# Real Ray heads share one xdist worker (`--dist loadgroup`): one at a time on two cores.
pytestmark = pytest.mark.xdist_group("real-ray")

NS = "default"
# A real head on a busy two-core machine takes up to a couple of minutes to answer.
START_TIMEOUT = 400.0
RESOURCES = "import ray; ray.init(); print('resources', ray.cluster_resources())"
# The StableDiffusion sample's Serve config, its model the CPU stand-in in ``demo_serve``.
SERVE_CONFIG = """\
applications:
  - name: text_to_image
    import_path: demo_serve.text_to_image:entrypoint
    route_prefix: /
    deployments:
      - name: APIIngress
        num_replicas: 1
      - name: StableDiffusionV2
        ray_actor_options:
          num_gpus: 1
"""


@pytest.fixture(scope="module")
def rsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeSim]:
    root = tmp_path_factory.mktemp("procs")
    sim = KubeSim(startup_delay=0.0, procs_root=str(root), real_ray=1).start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def api(rsim: KubeSim, tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    path = rsim.write_kubeconfig(str(tmp_path_factory.mktemp("kc") / "kubeconfig"))
    kube = config.new_client_from_config(config_file=path)
    try:
        yield kube
    finally:
        kube.close()


def _state(api: client.ApiClient, name: str) -> str:
    rc = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", name
    )
    return str((rc.get("status") or {}).get("state") or "")


def _create(api: client.ApiClient, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", body
    )


@pytest.fixture(scope="module")
def real(rsim: KubeSim, api: client.ApiClient) -> str:
    """RayCluster ``real``: a head and two single-GPU L4 workers, ready."""
    _create(api, raycluster("real", workers=2, gpus=1, product=L4))
    wait_for(lambda: _state(api, "real") == "ready", timeout=START_TIMEOUT, what="the real cluster")
    return "real"


def _proxy(sim: KubeSim, name: str) -> str:
    return f"{sim.url}/api/v1/namespaces/{NS}/services/{name}-head-svc:8265/proxy"


def _jobs(sim: KubeSim, name: str) -> JobSubmissionClient:
    return JobSubmissionClient(_proxy(sim, name), headers={"Authorization": "Bearer kubesim"})


def _version(sim: KubeSim, name: str) -> str:
    request = urllib.request.Request(
        f"{_proxy(sim, name)}/api/version", headers={"Authorization": "Bearer kubesim"}
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return str(json.load(resp)["ray_version"])


def _tail(jobs: JobSubmissionClient, job_id: str) -> str:
    async def follow() -> str:
        return "".join([chunk async for chunk in jobs.tail_job_logs(job_id)])

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, follow()).result()


def _pods(api: client.ApiClient, cluster: str) -> list[Any]:
    return list(
        client.CoreV1Api(api)
        .list_namespaced_pod(NS, label_selector=f"ray.io/cluster={cluster}")
        .items
    )


def _pids(sim: KubeSim, cluster: str) -> list[int]:
    out = []
    for (ns, pod), procs in list(sim.cluster.localprocs.by_pod.items()):
        if ns == NS and pod.startswith(f"{cluster}-"):
            out += [run.popen.pid for run in procs.values()]
    return out


def _alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_head_is_ready_once_the_real_dashboard_answers(
    rsim: KubeSim, api: client.ApiClient, real: str
) -> None:
    pods = _pods(api, real)
    assert sorted(p.metadata.labels["ray.io/node-type"] for p in pods) == [
        "head",
        "worker",
        "worker",
    ]
    assert all(c.type != "Ready" or c.status == "True" for p in pods for c in p.status.conditions)
    assert _version(rsim, real) == "2.49.2"  # the installed Ray, not the image's tag


def test_ray_jobs_client_runs_on_the_real_head_and_sees_the_pods_gpus(
    rsim: KubeSim, real: str
) -> None:
    jobs = _jobs(rsim, real)
    job_id = jobs.submit_job(entrypoint=f'python -c "{RESOURCES}"')
    followed = _tail(jobs, job_id)  # the WebSocket, relayed as bytes by the proxy
    assert "'GPU': 2.0" in followed, followed
    assert jobs.get_job_status(job_id) == JobStatus.SUCCEEDED
    assert "'GPU': 2.0" in jobs.get_job_logs(job_id)
    tails = [r for r in rsim.proxy_requests() if r["path"].endswith("/logs/tail")]
    assert tails and all(r["status"] == 101 for r in tails)


def test_clusters_beyond_the_first_n_stay_simulated(
    rsim: KubeSim, api: client.ApiClient, real: str
) -> None:
    _create(api, raycluster("simulated", workers=1, gpus=1, product=L4))
    assert _state(api, "simulated") == "ready"  # at once: nothing real to wait for
    assert _pids(rsim, "simulated") == []
    # kubesim's dashboard emulation answers, with the Ray of the image's tag.
    assert _version(rsim, "simulated") == "2.40.0"
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", "simulated"
    )


def test_a_rayjob_on_a_real_cluster_runs_its_entrypoint(
    rsim: KubeSim, api: client.ApiClient, real: str
) -> None:
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "count-gpus", "namespace": NS},
        "spec": {
            "entrypoint": f'python -c "{RESOURCES}"',
            "clusterSelector": {"ray.io/cluster": real},
        },
    }
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", body)

    def finished() -> dict[str, Any] | None:
        rj = custom.get_namespaced_custom_object("ray.io", "v1", NS, "rayjobs", "count-gpus")
        st = rj.get("status") or {}
        return st if st.get("jobDeploymentStatus") in ("Complete", "Failed") else None

    status = wait_for(finished, timeout=START_TIMEOUT, what="the RayJob to finish")
    assert status["jobDeploymentStatus"] == "Complete", status
    assert status["jobStatus"] == "SUCCEEDED"
    # The driver ran on the real head: its logs are Ray's, and so is its job table.
    logs = _jobs(rsim, real).get_job_logs(status["jobId"])
    assert "'GPU': 2.0" in logs, logs
    (submitter,) = [
        p
        for p in client.CoreV1Api(api).list_namespaced_pod(NS).items
        if (p.metadata.labels or {}).get("ray.io/originated-from-cr-name") == "count-gpus"
    ]
    assert submitter.status.phase == "Succeeded"
    out = Path(rsim.cluster.localprocs.root, NS, submitter.metadata.name, "submitter")
    assert "'GPU': 2.0" in (out / "output.log").read_text()  # `ray job logs --follow`


def test_deleting_the_cluster_ends_its_processes_and_kubesim_stop_ends_the_rest(
    rsim: KubeSim, api: client.ApiClient, real: str
) -> None:
    pids = _pids(rsim, real)
    assert len(pids) == 3
    realray = rsim.cluster.realray
    assert realray is not None
    temp_dir = realray.slots[(NS, real)].temp_dir
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "ray.io", "v1", NS, "rayclusters", real
    )
    wait_for(lambda: not _pods(api, real), timeout=60, what="the pods to go")
    wait_for(lambda: not any(_alive(pid) for pid in pids), timeout=30, what="the processes to end")
    assert _pids(rsim, real) == []
    # The slot is free again, and the head's temp dir is gone with it.
    assert realray.is_real(NS, real) is False
    assert not Path(temp_dir).exists()

    # The freed slot goes to the next cluster (a RayService's), whose real head runs the
    # Serve app; stopping kubesim ends its processes. One test, so that however the tests
    # are spread over workers the slot is free here, and no third real head is started.
    rs = _text_to_image(api)
    assert rs["applicationStatuses"]["text_to_image"]["serveDeploymentStatuses"] == {
        "APIIngress": {"status": "HEALTHY"},
        "StableDiffusionV2": {"status": "HEALTHY"},
    }
    assert rs["numServeEndpoints"] == 2  # the head and the worker, as KubeRay counts them
    (cluster,) = [
        c.metadata.labels["ray.io/cluster"]
        for c in _pods(api, rs["rayClusterName"])
        if c.metadata.labels["ray.io/node-type"] == "head"
    ]
    assert realray.is_real(NS, cluster), "the freed slot went to the RayService's cluster"
    image = _imagine(rsim, "a lighthouse at dusk")
    assert image == render("a lighthouse at dusk", 16)  # the model's answer, through Serve
    assert _imagine(rsim, "a lighthouse at dusk") == image  # the same prompt, the same picture
    pids = _pids(rsim, cluster)
    temp_dir = realray.slots[(NS, cluster)].temp_dir
    rsim.stop()
    wait_for(lambda: not any(_alive(pid) for pid in pids), timeout=30, what="the processes to end")
    assert not Path(temp_dir).exists()


def _text_to_image(api: client.ApiClient) -> dict[str, Any]:
    """RayService ``text-to-image`` (the StableDiffusion sample's shape, with the CPU stand-in
    ``demo_serve``), created and Ready; its active service status."""
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "text-to-image", "namespace": NS},
        "spec": {
            "serveConfigV2": SERVE_CONFIG,
            "rayClusterConfig": raycluster("x", workers=1, gpus=1, product=L4)["spec"],
        },
    }
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayservices", body)

    def ready() -> dict[str, Any] | None:
        rs = custom.get_namespaced_custom_object(
            "ray.io", "v1", NS, "rayservices", body["metadata"]["name"]
        )
        st = rs.get("status") or {}
        conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
        apps = get_path(st, "activeServiceStatus", "applicationStatuses", default={})
        # KubeRay's Ready stays True while Serve redeploys a replica (a health check
        # missed on a busy machine): wait for both, as a user watching it would.
        running = apps.get("text_to_image", {}).get("status") == "RUNNING"
        return st if conds.get("Ready") == "True" and running else None

    st = wait_for(ready, timeout=START_TIMEOUT, what="the RayService Ready and RUNNING")
    assert st["serviceStatus"] == "Running"
    return dict(st["activeServiceStatus"], numServeEndpoints=st["numServeEndpoints"])


def _imagine(sim: KubeSim, prompt: str) -> bytes:
    """``GET /imagine`` through the API server's proxy to the serve service."""
    query = urllib.parse.urlencode({"prompt": prompt, "img_size": 16})
    request = urllib.request.Request(
        f"{sim.url}/api/v1/namespaces/{NS}/services/text-to-image-serve-svc:8000/proxy/imagine"
        f"?{query}",
        headers={"Authorization": "Bearer kubesim"},
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        assert resp.headers["Content-Type"] == "image/png"
        return bytes(resp.read())
