"""The cost of kubesim's real Ray (``--real-ray``): how long a real head takes from the
RayCluster's create to its pod being Ready (the real dashboard answering), how long a
worker then takes to join, and what each holds in memory once idle: resident memory
summed over its process group (what kubesim's memory bound reads; shared pages counted
once per process) and proportional set size (shared pages split among their users)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from kubesim import KubeSim
from kubesim.localproc import group_rss

NS = "default"
SETTLE_SECONDS = 10.0


def _cluster() -> dict[str, Any]:
    def container(name: str, cpu: str, memory: str, gpu: int = 0) -> dict[str, Any]:
        res = {"cpu": cpu, "memory": memory} | ({"nvidia.com/gpu": str(gpu)} if gpu else {})
        return {"name": name, "image": "rayproject/ray:2.49.2", "resources": {"limits": res}}

    worker_spec = {
        "containers": [container("ray-worker", "16", "64Gi", gpu=1)],
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "bench", "namespace": NS},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {"num-gpus": "0"},
                "template": {"spec": {"containers": [container("ray-head", "2", "8Gi")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": 1,
                    "minReplicas": 0,
                    "maxReplicas": 1,
                    "rayStartParams": {"num-gpus": "1"},
                    "template": {"spec": worker_spec},
                }
            ],
        },
    }


def _ready(sim: KubeSim, node_type: str) -> bool:
    with sim.cluster.lock:
        pods = [
            p
            for p in sim.cluster.store.iter("pods", NS)
            if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == node_type
        ]
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for p in pods
        for c in (p.get("status") or {}).get("conditions") or []
    )


def _wait(sim: KubeSim, node_type: str, timeout: float = 600.0) -> float:
    start = time.monotonic()
    while not _ready(sim, node_type):
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"the {node_type} never became Ready")
        time.sleep(0.2)
    return time.monotonic() - start


def group_pss(pgid: int) -> int:
    """Proportional set size of the process group ``pgid`` (bytes, from /proc)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:
                continue
            for line in Path(entry.path, "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue
    return total


def run() -> str:
    with tempfile.TemporaryDirectory() as root:
        sim = KubeSim(startup_delay=0.0, procs_root=root, real_ray=1).start()
        try:
            load_before = os.getloadavg()[0]
            with sim.cluster.lock:
                sim.cluster.create_object(sim.cluster.rt("rayclusters.ray.io"), _cluster())
                sim.cluster.settle()
            head_s = _wait(sim, "head")
            worker_s = _wait(sim, "worker")
            time.sleep(SETTLE_SECONDS)
            memory: dict[str, tuple[int, int]] = {}
            for (_, pod), procs in sim.cluster.localprocs.by_pod.items():
                for run_ in procs.values():
                    pid = run_.popen.pid
                    kind = "head" if "-head-" in pod else "worker"
                    memory[kind] = (group_rss(pid), group_pss(pid))
        finally:
            sim.stop()
    load_after = os.getloadavg()[0]
    mb = 1e6
    rows = [
        f"| head | {head_s:.1f} s (create → Ready) | {memory['head'][0] / mb:,.0f} MB "
        f"| {memory['head'][1] / mb:,.0f} MB |",
        f"| worker (1 GPU) | {worker_s:.1f} s (head Ready → worker Ready) "
        f"| {memory['worker'][0] / mb:,.0f} MB | {memory['worker'][1] / mb:,.0f} MB |",
    ]
    return "\n".join(
        [
            "## Real Ray in kubesim (`--real-ray`)",
            "",
            "One RayCluster with real Ray (ray 2.49.2 from PyPI): a head and one single-GPU "
            "worker, started by kubesim's launcher as `make run` starts them. Start-up is "
            "wall time until the pod is Ready (the real dashboard's `gcs_healthz`, the "
            "worker's raylet health); memory is read once both have been idle "
            f"{SETTLE_SECONDS:.0f} s. Summed RSS counts shared pages once per process (it is "
            "what kubesim's memory bound reads: 4 GiB for a head, 2 GiB for a worker); PSS "
            "shares them out.",
            "",
            "| node | start-up | summed RSS | PSS |",
            "| --- | ---: | ---: | ---: |",
            *rows,
            "",
            f"Load average (1 min): {load_before:.1f} before, {load_after:.1f} after, on 2 CPUs; "
            "start-up grows with the load (a head's nine dashboard processes start at once).",
        ]
    )
