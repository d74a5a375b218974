"""kubesim itself at 5,000 and 20,000 pods: LIST latency and write throughput.

The control plane's benchmarks run against kubesim, so a slow simulator would be counted as
the control plane's time (or hide it). This measures the simulator alone, in its own process,
through the official ``kubernetes`` client and ``kubectl get pods -A``: sequential RayCluster
and bare pod creates, and LISTs of every pod, every RayCluster and the reconciler's
FailedScheduling events. About 1,700 of the 20,000 pods wait with a FailedScheduling event
(GPU workers beyond the 8 H100 nodes). Names and shapes are fixed, so runs are comparable.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.support import gpu_fleet, kubesim_process, load_line, median

NAMESPACES = 20
WORKERS = 7  # per RayCluster: 1 head + 7 workers = 8 pods
BARE_PODS = 1000
FAILED = "involvedObject.kind=Pod,reason=FailedScheduling"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _container(name: str, gpu: int = 0) -> dict[str, Any]:
    res = {"cpu": "500m", "memory": "1Gi"}
    if gpu:
        res["nvidia.com/gpu"] = str(gpu)
    return {"name": name, "image": "rayproject/ray:2.40.0", "resources": {"requests": res}}


def raycluster(index: int) -> dict[str, Any]:
    """RayCluster ``rc-<index>``: every tenth one has GPU workers (most of which wait)."""
    gpu = 1 if index % 10 == 0 else 0
    worker_spec: dict[str, Any] = {"containers": [_container("ray-worker", gpu)]}
    if gpu:
        worker_spec["tolerations"] = [dict(GPU_TOLERATION)]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": f"rc-{index:05d}", "labels": {"bench": "kubesim"}},
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [_container("ray-head")]}},
            },
            "workerGroupSpecs": [
                {
                    "groupName": "w",
                    "replicas": WORKERS,
                    "minReplicas": 0,
                    "maxReplicas": WORKERS,
                    "rayStartParams": {},
                    "template": {"spec": worker_spec},
                }
            ],
        },
    }


def _pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bare-{index:05d}", "labels": {"bench": "kubesim"}},
        "spec": {"containers": [_container("main")]},
    }


def _timed(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """Median wall seconds of ``runs`` calls, and the last result."""
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return median(times), result


class Bench:
    """One kubesim process, the official client on it, and the figures gathered."""

    def __init__(self, kubeconfig: str, url: str) -> None:
        from kubernetes import client, config

        self.url = url
        self.kubeconfig = kubeconfig
        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent))
        self.home = tempfile.mkdtemp(prefix="kubesim-bench-kubectl-")
        self.clusters = 0
        self.bare = 0

    def namespaces(self) -> None:
        for i in range(NAMESPACES):
            self.core.create_namespace({"metadata": {"name": f"team{i:02d}"}})

    def create_rayclusters(self, count: int) -> float:
        """Create ``count`` more RayClusters, one at a time; seconds taken. Each returns once
        its head and seven workers are made server-side, scheduled and started."""
        started = time.perf_counter()
        for i in range(self.clusters, self.clusters + count):
            self.custom.create_namespaced_custom_object(
                "ray.io", "v1", f"team{i % NAMESPACES:02d}", "rayclusters", raycluster(i)
            )
        self.clusters += count
        return time.perf_counter() - started

    def create_pods(self, count: int) -> float:
        started = time.perf_counter()
        for i in range(self.bare, self.bare + count):
            self.core.create_namespaced_pod(f"team{i % NAMESPACES:02d}", _pod(i))
        self.bare += count
        return time.perf_counter() - started

    def raw(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a client list method without model deserialisation; the decoded JSON."""
        resp = fn(*args, _preload_content=False, **kwargs)
        return json.loads(resp.data)

    def fetch_pods(self, runs: int) -> tuple[float, int]:
        """LIST every pod over plain HTTP, bytes only: the simulator's time plus transfer,
        without any client decoding; the median seconds and the answer's size."""

        def fetch() -> int:
            with urllib.request.urlopen(f"{self.url}/api/v1/pods") as resp:
                return len(resp.read())

        return _timed(fetch, runs)

    def list_pods(self, runs: int) -> tuple[float, int]:
        """LIST every pod, the answer decoded as JSON as the control plane's gateway does."""
        secs, doc = _timed(lambda: self.raw(self.core.list_pod_for_all_namespaces), runs)
        return secs, len(doc["items"])

    def list_pod_models(self) -> float:
        """LIST every pod into the client's model objects: client-side deserialisation."""
        secs, _ = _timed(self.core.list_pod_for_all_namespaces, 1)
        return secs

    def list_rayclusters(self, runs: int) -> tuple[float, int]:
        secs, doc = _timed(
            lambda: self.custom.list_cluster_custom_object("ray.io", "v1", "rayclusters"), runs
        )
        return secs, len(doc["items"])

    def list_failed(self, runs: int) -> tuple[float, int]:
        secs, doc = _timed(
            lambda: self.raw(self.core.list_event_for_all_namespaces, field_selector=FAILED),
            runs,
        )
        return secs, len(doc["items"])

    def kubectl_get_pods(self, runs: int) -> tuple[float, int]:
        if self.kubectl is None:
            return float("nan"), 0
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HOME=self.home)
        # kubectl asks for a server-side Table in pages of 500.
        command = [self.kubectl, "get", "pods", "-A", "--no-headers"]

        def run() -> int:
            out = subprocess.run(command, env=env, capture_output=True, check=True, timeout=120)
            return out.stdout.count(b"\n")

        run()  # discovery and the OpenAPI cache, once
        return _timed(run, runs)


def run() -> str:
    fleet = gpu_fleet(h100_nodes=8, cpu_nodes=200, name="kubesim-bench")
    rows: list[str] = []
    writes: list[str] = []
    with kubesim_process(fleet) as sim:
        bench = Bench(sim.kubeconfig, sim.url)
        bench.namespaces()
        stages = [(5_000, 500), (20_000, 2_375)]  # (pods, RayClusters created in total)
        for pods, clusters in stages:
            new = clusters - bench.clusters
            secs = bench.create_rayclusters(new)
            writes.append(
                f"| RayCluster create (8 pods each), {bench.clusters - new:,} → "
                f"{bench.clusters:,} clusters | {new / secs:,.0f} clusters/s "
                f"({new * (WORKERS + 1) / secs:,.0f} pods/s) |"
            )
            if not bench.bare:
                secs = bench.create_pods(BARE_PODS)
                writes.append(f"| bare Pod create | {BARE_PODS / secs:,.0f} pods/s |")
            raw_secs, size = bench.fetch_pods(5)
            pod_secs, count = bench.list_pods(5)
            rc_secs, rc_count = bench.list_rayclusters(5)
            ev_secs, failed = bench.list_failed(5)
            kc_secs, kc_lines = bench.kubectl_get_pods(3)
            models = f"{bench.list_pod_models():.2f} s" if pods <= 5_000 else "not measured"
            rows.append(
                f"| {count:,} | {raw_secs:.2f} s ({size / 1e6:.0f} MB) | {pod_secs:.2f} s "
                f"| {models} | {kc_secs:.2f} s ({kc_lines:,} rows) "
                f"| {rc_secs:.3f} s ({rc_count:,}) | {ev_secs:.3f} s ({failed:,}) |"
            )
        bench.api.close()
    return "\n".join(
        [
            "## kubesim",
            "",
            "The simulator alone, in its own process: 200 CPU nodes and 8 H100 nodes, 20 "
            "namespaces, RayClusters of 1 head + 7 workers (one in ten asks for GPUs, most of "
            "whose workers wait with a FailedScheduling event) plus 1,000 bare pods. One "
            "sequential client. LIST figures are medians (5 runs; kubectl 3), wall time at the "
            "client: bytes only is the simulator's time and the transfer; the client columns add "
            "JSON decoding (raw) or the client's model objects.",
            "",
            "| pods | LIST pods (HTTP, bytes only) | LIST pods (client, raw JSON) "
            "| LIST pods (client models) | `kubectl get pods -A` | LIST RayClusters "
            "| LIST FailedScheduling events |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            "| writes | throughput |",
            "| --- | ---: |",
            *writes,
            "",
            "A RayCluster create returns once KubeRay, the scheduler and the kubelet have "
            "settled: its throughput includes creating, binding and starting its 8 pods and "
            "writing their events. The client's model objects cost client-side "
            "deserialisation, not simulator time; they are measured at 5,000 pods only. "
            + load_line(),
        ]
    )


if __name__ == "__main__":
    print(run())
