"""Ray's own client and Ray's own dashboard, through the product, against a real Ray head:
kubesim runs real Ray for bob's dev cluster (``real_ray=1``: a head and two single-GPU
workers as real Ray nodes), the web server runs as ``make run`` starts it, and the
product's Ray proxy relays to the head through the Kubernetes API's service proxy.

One kubesim and its real cluster serve the whole module (a real head takes seconds to
start): each test makes the database rows again and applies the same RayCluster, which
the running head keeps serving.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from ray.job_submission import JobStatus

from benchmarks.support import free_port
from clusters.engine import provisioning
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, Tunnel
from kubesim import KubeSim
from kubesim.operators.realray import CLIENT_SERVER_READY_SECONDS
from tests.clusters.engine.conftest import wait_for
from tests.clusters.live.conftest import head_ready
from tests.clusters.live.test_proxy_browser import _open_dashboard, bob_signed_in, ray_origin
from tests.clusters.live.test_ray_client import ROUTE, _client, _ray, _tail, _token, web
from tests.clusters.live.test_tunnels import GANGWAY, cli_env
from tests.frontend.conftest import make_ready

__all__ = ["bob_signed_in", "ray_origin", "web"]

# Real Ray heads share one xdist worker (`--dist loadgroup`): one at a time on two cores.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("real-ray")]

# A real head on a busy two-core machine takes up to a couple of minutes to answer.
START_TIMEOUT = 400.0
RESOURCES = "import ray; ray.init(); print('resources', ray.cluster_resources())"


@pytest.fixture(scope="module")
def real_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeSim]:
    root = tmp_path_factory.mktemp("procs")
    sim = KubeSim(fleet=None, port=0, startup_delay=0.0, procs_root=str(root), real_ray=1)
    sim.start()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def kubesim(real_sim: KubeSim, tmp_path: Path, settings: Any) -> KubeSim:
    """The module's kubesim, the test's settings pointed at it."""
    kubeconfig = tmp_path / "kubeconfig"
    real_sim.write_kubeconfig(str(kubeconfig))
    settings.KUBECONFIG = str(kubeconfig)
    return real_sim


def _head_state(sim: KubeSim, cluster: ClusterRequest) -> str:
    """Where a head that never turned Ready stood: its pod's phase and conditions, and
    each of its processes' state and the last lines it wrote."""
    pods = get_gateway().list(
        "v1",
        "Pod",
        namespace=cluster.namespace,
        label_selector=f"ray.io/cluster={cluster.name},ray.io/node-type=head",
    )
    said = []
    for pod in pods:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        said.append(f"pod {name} {status.get('phase')} {conditions}")
        for proc, run in sim.cluster.localprocs.processes(cluster.namespace, name).items():
            log = run.workdir / "output.log"
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            tail = "\n".join(lines[-15:]) or "no output"
            said.append(
                f"process {proc}: exit {run.popen.poll()}, ready {run.ready}, restarts "
                f"{run.restarts}, failing since {run.failing_since}; last lines:\n{tail}"
            )
    return "; ".join(said) or "no head pod"


@pytest.fixture
def live_cluster(
    kubesim: KubeSim, bob: Any, request_cluster: Any, monkeypatch: Any
) -> ClusterRequest:
    """bob's dev cluster with two single-GPU workers, ready, its Ray real."""
    from tests.frontend.browser import quiet_nudges

    quiet_nudges(monkeypatch)
    cluster = make_ready(request_cluster(bob, name="bob-live", workers=2))
    ClusterRequest.objects.filter(pk=cluster.pk).update(ready_at=timezone.now())
    cluster = ClusterRequest.objects.select_related("tenant", "owner", "flavor").get(pk=cluster.pk)
    provisioning.apply_cluster(cluster, get_gateway())
    wait_for(
        lambda: head_ready(cluster),
        timeout=START_TIMEOUT,
        what=lambda: f"the real head to answer ({_head_state(kubesim, cluster)})",
    )
    # Every worker a real Ray node too: the RayCluster is ready once all its pods are.
    wait_for(
        lambda: _rc_state(kubesim, cluster) == "ready",
        timeout=START_TIMEOUT,
        what=lambda: f"the workers to join: {_rc_state(kubesim, cluster)}",
    )
    realray = kubesim.cluster.realray
    assert realray is not None and realray.is_real(cluster.namespace, cluster.name)
    return cluster


def _rc_state(sim: KubeSim, cluster: ClusterRequest) -> str:
    rc = sim.get("rayclusters.ray.io", cluster.namespace, cluster.name)
    return str(((rc or {}).get("status") or {}).get("state") or "")


def test_ray_job_cli_submits_follows_lists_and_stops_on_a_real_head(
    web: str, bob: Any, kubesim: KubeSim, tmp_path: Path, live_cluster: ClusterRequest
) -> None:
    live_cluster.refresh_from_db()
    assert live_cluster.state == "ready", (live_cluster.state, live_cluster.state_reason)
    address = ["--address", f"{web}{ROUTE}"]
    headers = ["--headers", json.dumps({"Authorization": f"Token {_token(bob)}"})]
    project = tmp_path / "project"
    project.mkdir()
    (project / "helper.py").write_text("WORD = 'shipped with the working dir'\n")
    (project / "main.py").write_text("import helper\nprint('main says', helper.WORD)\n")

    submitted = _ray(
        "submit",
        *address,
        *headers,
        "--working-dir",
        str(project),
        "--",
        "python",
        "main.py",
        cwd=tmp_path,
    )
    output = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, output
    assert "main says shipped with the working dir" in output  # followed by default
    assert "succeeded" in output
    job_id = output.split("Job '", 1)[1].split("'", 1)[0]

    listed = _ray("list", *address, *headers, cwd=tmp_path)
    assert listed.returncode == 0 and job_id in listed.stdout, listed
    followed = _ray("logs", "--follow", job_id, *address, *headers, cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert "main says shipped with the working dir" in followed.stdout

    sleeper = "import time; print('sleeping', flush=True); time.sleep(600)"
    started = _ray(
        "submit", "--no-wait", *address, *headers, "--", "python", "-c", sleeper, cwd=tmp_path
    )
    assert started.returncode == 0, started.stderr
    long_id = (started.stdout + started.stderr).split("Job '", 1)[1].split("'", 1)[0]
    client = _client(web, bob)
    wait_for(lambda: client.get_job_status(long_id) == JobStatus.RUNNING, timeout=120)
    stopped = _ray("stop", long_id, *address, *headers, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: client.get_job_status(long_id) == JobStatus.STOPPED, timeout=60)


def test_the_jobs_sdk_tails_a_real_driver_that_sees_the_cluster_s_gpus(
    web: str, bob: Any, kubesim: KubeSim
) -> None:
    client = _client(web, bob)
    job_id = client.submit_job(entrypoint=f'python -c "{RESOURCES}"')
    followed = "".join(_tail(client, job_id))  # the WebSocket, to the real head
    # Two dev workers of one GPU each: Ray's scheduler sees two GPUs, the head none.
    assert "'GPU': 2.0" in followed, followed
    assert client.get_job_status(job_id) == JobStatus.SUCCEEDED
    assert job_id in [job.submission_id for job in client.list_jobs()]
    assert "'GPU': 2.0" in client.get_job_logs(job_id)
    tails = [r for r in kubesim.proxy_requests() if r["path"].endswith("/logs/tail")]
    assert tails and all(r["status"] == 101 for r in tails)


def test_a_job_on_the_real_cluster_runs_its_entrypoint_for_real(
    web: str, bob: Any, as_user: Any, kubesim: KubeSim, live_cluster: ClusterRequest
) -> None:
    api = as_user(bob)
    body = {"name": "gpus", "entrypoint": f'python -c "{RESOURCES}"', "cluster": "bob-live"}
    response = api.post("/api/v1/tenants/acme/jobs/", body, format="json")
    assert response.status_code == 201, response.content

    def ended() -> str:
        row = ClusterRequest.objects.unscoped().get(name="gpus")
        return row.state if row.state in ("succeeded", "failed", "stopped") else ""

    assert wait_for(ended, timeout=START_TIMEOUT, what="the job to end") == "succeeded"
    # The RayJob's submitter ran `ray job submit` and followed the real driver: its log is
    # the driver's real output, the cluster's two GPUs in it.
    logs = api.get("/api/v1/tenants/acme/jobs/gpus/logs/").json()
    assert "'GPU': 2.0" in logs["text"], logs
    jobs = {j.entrypoint: j for j in _client(web, bob).list_jobs()}
    assert jobs[f'python -c "{RESOURCES}"'].status == JobStatus.SUCCEEDED


# Ray Client's driver: the cluster's resources, and a task on a GPU worker.
RAY_CLIENT = (
    "import sys, ray\n"
    "ray.init(sys.argv[1])\n"
    "print('resources', ray.cluster_resources())\n"
    "@ray.remote(num_gpus=1)\n"
    "def where():\n"
    "    return ray.get_runtime_context().get_node_id()\n"
    "print('node', ray.get(where.remote()))\n"
)


def _client_server_logs(sim: KubeSim, cluster: ClusterRequest) -> str:
    """The head's Ray Client server logs (what a failed ``ray.init`` could not say)."""
    realray = sim.cluster.realray
    slot = realray.slots.get((cluster.namespace, cluster.name)) if realray else None
    if slot is None:
        return "no real head"
    logs = sorted(Path(slot.temp_dir).glob("session_latest/logs/ray_client_server*"))
    return "\n".join(f"{p.name}: {p.read_text(errors='replace')[-6000:]}" for p in logs)


def test_ray_client_connects_through_gangway_port_forward(
    web: str, bob: Any, kubesim: KubeSim, tmp_path: Path, live_cluster: ClusterRequest
) -> None:
    local = free_port()
    forward = subprocess.Popen(
        [GANGWAY, "port-forward", "bob-live", f"{local}:10001"],
        env=cli_env(web, bob, tmp_path),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert forward.stderr is not None
        assert f"127.0.0.1:{local} -> bob-live:10001" in forward.stderr.readline()
        driver = subprocess.run(
            [sys.executable, "-c", RAY_CLIENT, f"ray://127.0.0.1:{local}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            env={**os.environ, "PYTHONWARNINGS": "ignore", "RAY_USAGE_STATS_ENABLED": "0"},
        )
    finally:
        forward.terminate()
        forward.wait(timeout=30)
    out = driver.stdout
    if driver.returncode != 0:
        # Whole, on the test's captured output: an assertion message is cut short, and the
        # head's logs go with its temp dir when the module ends.
        print(driver.stderr, _client_server_logs(kubesim, live_cluster), sep="\n")
    assert driver.returncode == 0, (out, driver.stderr[-1500:])
    # The cluster's shape, as its head's scheduler sees it: two one-GPU workers.
    assert "'GPU': 2.0" in out, out
    # A one-GPU task was scheduled and ran on one of the cluster's nodes (the head has no
    # GPU, so a worker): Ray Client drives the cluster, not just reads it.
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert len(lines["node"]) == 56, out  # a Ray node id
    assert Tunnel.objects.filter(port=10001, purpose="port-forward").exists()
    # The head's Ray Client proxy served the driver from a port kubesim gave this head, not
    # Ray's 23000-24000 that every head on this machine would share.
    realray = kubesim.cluster.realray
    assert realray is not None
    slot = realray.slots[(live_cluster.namespace, live_cluster.name)]
    servers = Path(slot.temp_dir).glob("session_latest/logs/ray_client_server_*.err")
    ports = {int(p.stem.rsplit("_", 1)[1]) for p in servers}
    assert ports and ports <= set(slot.client_servers), (ports, slot.client_servers)
    # The proxy forks each client's server with gRPC's fork handlers off (a server forked
    # with them on may die of SIGSEGV before it logs: ray-project/ray#63202), and waits
    # for a slow server longer than Ray's 30 s.
    cmdline, environ = _client_proxy(slot.ports["client"])
    assert "GRPC_ENABLE_FORK_SUPPORT=false" in environ, cmdline
    assert f"CHECK_CHANNEL_TIMEOUT_S = {CLIENT_SERVER_READY_SECONDS}" in " ".join(cmdline)


def _client_proxy(port: int) -> tuple[list[str], list[str]]:
    """The command line and environment of the Ray Client proxy on ``port`` (/proc)."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().decode().split("\0")
            if "--mode=proxy" in cmdline and f"--port={port}" in cmdline:
                return cmdline, (proc / "environ").read_bytes().decode().split("\0")
        except OSError:  # gone, or not ours to read
            continue
    raise AssertionError(f"no Ray Client proxy on port {port}")


def test_the_log_panel_shows_the_real_heads_coloured_log_as_plain_text(
    bob: Any, as_user: Any, kubesim: KubeSim, live_cluster: ClusterRequest
) -> None:
    logs = f"/api/v1/tenants/acme/clusters/{live_cluster.name}/logs/"
    # ``ray start`` colours its words ("Local node IP" among them), escape codes and all:
    # the API answers the log as Kubernetes has it.
    raw = as_user(bob).get(logs, {"format": "text", "tail": 5000}).content.decode()
    assert "\x1b[" in raw and "Local node IP\x1b[39m" in raw, raw[-2000:]
    browser = Client()
    browser.force_login(bob)
    panel = browser.get(f"/t/acme/clusters/{live_cluster.name}/log/", {"tail": 1000})
    html = panel.content.decode()
    assert panel.status_code == 200 and "Local node IP: " in html, html[-2000:]
    assert "\x1b" not in html and "[39m" not in html


@pytest.mark.browser
def test_the_real_ray_dashboard_works_in_chromium_on_its_origin(
    bob_signed_in: Any, live_server: Any, kubesim: KubeSim, ray_origin: str, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    page = bob_signed_in
    answers: list[tuple[int, str]] = []
    page.context.on("response", lambda r: answers.append((r.status, r.url)))
    dashboard = _open_dashboard(page, live_server.url)
    assert dashboard.url == f"{ray_origin}/c/acme/bob-live/"
    # Ray's own single-page application renders the cluster: its nodes are the pods.
    dashboard.goto(f"{ray_origin}/c/acme/bob-live/#/cluster")
    alive = dashboard.get_by_text("ALIVE", exact=True)
    expect(alive.first).to_be_visible(timeout=120_000)
    dashboard.wait_for_load_state("networkidle")
    assert alive.count() >= 3  # the head's node and both workers'
    api = [(status, url) for status, url in answers if "/c/acme/bob-live/" in url]
    assert any("/nodes" in url for _, url in api), api
    # Ray answers its Grafana and Prometheus checks 500 when neither runs beside it (none
    # does here, nor in a cluster without them); every other call of the page succeeds.
    unmonitored = ("/api/grafana_health", "/api/prometheus_health")
    failed = [(s, u) for s, u in api if s >= 400 and not u.endswith(unmonitored)]
    assert failed == []
    out = Path(os.environ.get("GANGWAY_SCREENSHOTS_DIR") or tmp_path)
    dashboard.set_viewport_size({"width": 1280, "height": 720})
    dashboard.screenshot(path=str(out / "ray-dashboard.png"))
    assert (out / "ray-dashboard.png").stat().st_size > 10_000
