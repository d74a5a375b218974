"""Ray Client (``ray://``) against two real heads in one kubesim at the same time: each
head's client proxy starts its per-client servers on ports of its own, so two drivers
connecting at once each drive their own cluster. (With Ray's fixed 23000-24000 range both
heads took 23000, and gRPC's SO_REUSEPORT let one driver's calls reach the other head.)"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kubernetes import client, config

from kubesim import KubeSim
from kubesim.util import get_path
from tests.clusters.engine.conftest import wait_for
from tests.kubesim.kubesim_helpers import raycluster

# Real Ray heads share one xdist worker (`--dist loadgroup`): one at a time on two cores.
pytestmark = pytest.mark.xdist_group("real-ray")

NS = "default"
# A real head on a busy two-core machine takes up to a couple of minutes to answer.
START_TIMEOUT = 400.0
# The driver: its cluster's nodes, and the node a task ran on.
DRIVER = (
    "import sys, ray\n"
    "ray.init(sys.argv[1])\n"
    "print('nodes', sorted(n['NodeID'] for n in ray.nodes()))\n"
    "@ray.remote\n"
    "def where():\n"
    "    return ray.get_runtime_context().get_node_id()\n"
    "print('ran on', ray.get(where.remote()))\n"
)


@pytest.fixture(scope="module")
def two_heads(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeSim]:
    root = tmp_path_factory.mktemp("procs")
    sim = KubeSim(startup_delay=0.0, procs_root=str(root), real_ray=2).start()
    kubeconfig = sim.write_kubeconfig(str(tmp_path_factory.mktemp("kc") / "kubeconfig"))
    try:
        with config.new_client_from_config(config_file=kubeconfig) as api:
            for name in ("alpha", "beta"):
                client.CustomObjectsApi(api).create_namespaced_custom_object(
                    "ray.io", "v1", NS, "rayclusters", raycluster(name, workers=0)
                )
        for name in ("alpha", "beta"):
            wait_for(
                lambda name=name: _state(sim, name) == "ready",
                timeout=START_TIMEOUT,
                what=f"the real head of {name}",
            )
        yield sim
    finally:
        sim.stop()


def _state(sim: KubeSim, name: str) -> str:
    return str(get_path(sim.get("rayclusters.ray.io", NS, name), "status", "state") or "")


def _client_address(sim: KubeSim, name: str) -> str:
    head = get_path(sim.get("rayclusters.ray.io", NS, name), "status", "head", "podName")
    host, port = sim.cluster.localprocs.address(NS, head, 10001)
    return f"ray://{host}:{port}"


def _drive(address: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, address],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "RAY_USAGE_STATS_ENABLED": "0"},
    )


def _said(out: str, what: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(what))[len(what) + 1 :]


def test_two_drivers_at_once_each_drive_their_own_head(two_heads: KubeSim, tmp_path: Path) -> None:
    names = ("alpha", "beta")
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda n: _drive(_client_address(two_heads, n), tmp_path), names))
    for run in runs:
        assert run.returncode == 0, (run.stdout, run.stderr[-3000:])
    nodes = {name: _said(run.stdout, "nodes") for name, run in zip(names, runs, strict=True)}
    ran = {name: _said(run.stdout, "ran on") for name, run in zip(names, runs, strict=True)}
    # One node each (a head without workers), not the same one: two clusters.
    assert nodes["alpha"] != nodes["beta"], nodes
    for name in names:
        assert nodes[name] == repr([ran[name]]), (nodes, ran)
    # Each proxy started its driver's server on a port kubesim gave that head.
    realray = two_heads.cluster.realray
    assert realray is not None
    for name in names:
        slot = realray.slots[(NS, name)]
        logs = Path(slot.temp_dir).glob("session_latest/logs/ray_client_server_*.err")
        ports = {int(p.stem.rsplit("_", 1)[1]) for p in logs}
        assert ports and ports <= set(slot.client_servers), (name, ports, slot.client_servers)
