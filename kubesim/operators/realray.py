"""Real Ray behind the pods of the first N RayClusters (``--real-ray N``).

A launcher for :mod:`kubesim.localproc`: the head pod of a RayCluster that gets one of the
N slots runs ``ray start --head`` (the ``ray`` package kubesim runs with, with its
container's ``env``) on loopback ports of its own, mapped to the head service's ports
(GCS, dashboard, client, serve, metrics);
its worker pods run ``ray start --address`` against that head and advertise the GPUs the
pod was given as logical resources (``--num-gpus``), its CPUs and memory likewise, so
``ray.cluster_resources()`` shows the cluster's shape. A RayJob submitter pod of such a
cluster runs its own command (``ray job submit``, ``ray job logs --follow``) against the
real head, and its exit ends the pod. A slot is held while the RayCluster lives; clusters
beyond N stay simulated. GPUs are logical only: nothing here has one.
"""

from __future__ import annotations

import glob
import itertools
import json
import math
import os
import shlex
import shutil
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kubesim.localproc import ProcessSpec, free_port
from kubesim.operators.raydashboard import ray_ports
from kubesim.operators.rayruntime import DriverRun
from kubesim.quantity import QuantityError, parse
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

RC = "rayclusters.ray.io"
GPU = "nvidia.com/gpu"
SERVE_PORT = 8000
METRICS_PORT = 8080
AGENT_PORT = 52365  # KubeRay's dashboard agent port, which its worker probe reads
# KubeRay's injected readiness probes fail a Ray pod after 20 failures 3 s apart
# (its DefaultReadinessProbeFailureThreshold and -PeriodSeconds).
KUBERAY_UNREADY_AFTER_SECONDS = 20 * 3.0
# Summed RSS of a process group counts shared pages once per process, so the bounds are
# well above what the processes use alone (docs/benchmarks.md has the measures).
HEAD_MEMORY_BYTES = 4 << 30
WORKER_MEMORY_BYTES = 2 << 30
OBJECT_STORE_BYTES = 100_000_000
# Workers are started when tasks ask for them, never ahead: a node with 16 logical CPUs
# would otherwise start 16 Python processes at the first driver.
RAY_ENV = {
    # Drivers and tasks run the Python (and ``ray``) kubesim runs with.
    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
    "PYTHONUNBUFFERED": "1",
    # The folder holding kubesim (the repository root) first: Serve applications shipped
    # beside it (``demo_serve``) import on the real heads without a runtime_env.
    "PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")) if p
    ),
    # The dashboard's nine module processes get 30 s to start, too few on a busy machine.
    "RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT": "300",
}
# Exit 0 once the URL answers (a worker's wait for its head).
WAIT_HTTP = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)"
# Ray Client's proxy (the head's client port) starts a server per connected client on the
# first free port of 23000-24000: the same ports on every head, as each pod has a network
# namespace of its own. Here every head shares one loopback, and gRPC listens with
# SO_REUSEPORT: two heads' proxies starting servers at once (two test sessions on one
# machine, each with its real head) both took 23000, and a client's calls reached the
# other head's server ("Maybe you called ray.init twice", or another cluster). So each
# real head's proxy runs with loopback ports kubesim allocated for it, named in this
# variable, instead of that range.
CLIENT_PORTS_ENV = "KUBESIM_RAY_CLIENT_SERVER_PORTS"
CLIENT_SERVERS = 8  # clients connected at once to one head
# Two more changes to the proxy, both for a loaded machine:
# - The proxy forks each client's server while its own gRPC threads are busy; gRPC's fork
#   handlers then leave the child in a state where it may die of SIGSEGV before its first
#   line of log ("Starting Ray client server failed", an empty .err: ray-project/ray#63202,
#   open upstream). The server is exec'd at once and needs nothing of gRPC's state across
#   the fork, so the proxy (and the servers it starts) run with gRPC's fork support off.
# - The proxy gives a new server 30 s to answer on its channel; on a busy two-core machine
#   importing Ray alone takes longer, so it gets CLIENT_SERVER_READY_SECONDS.
CLIENT_SERVER_READY_SECONDS = 300
PROXY_ENV = {"GRPC_ENABLE_FORK_SUPPORT": "false"}
OWN_PORTS_PROXY = (
    "import os\n"
    "import ray.util.client.server.proxier as proxier\n"
    "from ray.util.client.server.server import main\n"
    f"ports = [int(p) for p in os.environ[{CLIENT_PORTS_ENV!r}].split(',')]\n"
    f"proxier.CHECK_CHANNEL_TIMEOUT_S = {CLIENT_SERVER_READY_SECONDS}\n"
    "made = proxier.ProxyManager.__init__\n"
    "def own_ports(self, *args, **kwargs):\n"
    "    made(self, *args, **kwargs)\n"
    "    self._free_ports = list(ports)\n"
    "proxier.ProxyManager.__init__ = own_ports\n"
    "main()\n"
)
# ``ray start`` gives the dashboard 20 s to come up, polling 200 times; on a busy two-core
# machine its nine module processes take longer. The same ``ray start``, run with that
# module's sleeps six times as long, and (with CLIENT_PORTS_ENV set) its Ray Client proxy
# started as OWN_PORTS_PROXY with PROXY_ENV, its arguments unchanged.
PATIENT_RAY = (
    "import os, sys, time\n"
    "import ray._private.services as services\n"
    "class Patient:\n"
    "    def __getattr__(self, name): return getattr(time, name)\n"
    "    def sleep(self, seconds): time.sleep(seconds * 6)\n"
    "services.time = Patient()\n"
    "start_process = services.start_ray_process\n"
    "def start_ray_process(command, *args, **kwargs):\n"
    "    module = 'ray.util.client.server'\n"
    f"    if os.environ.get({CLIENT_PORTS_ENV!r}) and '--mode=proxy' in command:\n"
    "        command = [command[0], '-c', PROXY, *command[command.index(module) + 1 :]]\n"
    f"        kwargs['env_updates'] = {{**(kwargs.get('env_updates') or {{}}), **{PROXY_ENV!r}}}\n"
    "    return start_process(command, *args, **kwargs)\n"
    "services.start_ray_process = start_ray_process\n"
    f"PROXY = {OWN_PORTS_PROXY!r}\n"
    "from ray.scripts.scripts import main\n"
    "sys.exit(main())\n"
)


_SIMULATORS = itertools.count(1)


@dataclass
class Slot:
    """A RayCluster that runs real Ray: its head's loopback ports and temp dir."""

    uid: str
    ports: dict[str, int]
    temp_dir: str
    client_servers: list[int]  # its Ray Client proxy's ports for servers (CLIENT_PORTS_ENV)


def ray_start(*args: str) -> list[str]:
    """``ray start ARGS`` with the patient dashboard wait (:data:`PATIENT_RAY`)."""
    return [sys.executable, "-c", PATIENT_RAY, "start", *args]


def _quantity(value: Any) -> float:
    try:
        return float(parse(value))
    except QuantityError:
        return 0.0


class RealRay:
    """The launcher and the real heads' Jobs API, for the first ``heads`` RayClusters."""

    def __init__(self, cluster: ClusterView, heads: int) -> None:
        if heads < 0:
            raise ValueError("real_ray must not be negative")
        self.cluster = cluster
        self.heads = heads
        # Only RayClusters in these namespaces get a slot (None: any), so that a test's
        # other tenants' clusters stay simulated and leave the slots to the ones it runs.
        self.namespaces: set[str] | None = None
        self.slots: dict[tuple[str, str], Slot] = {}
        # Short (Ray's socket paths must fit 107 bytes) and this simulator's own.
        self._temp_prefix = f"/tmp/ks-ray-{os.getpid()}-{next(_SIMULATORS)}-"
        self._counter = 0
        self._last: dict[tuple[str, str, str], DriverRun] = {}

    # -- slots ----------------------------------------------------------------------

    def _prune(self) -> None:
        """Free the slots of RayClusters that are gone (or were made again)."""
        for key, slot in list(self.slots.items()):
            rc = self.cluster.store.get(RC, *key)
            if rc is None or rc["metadata"].get("uid") != slot.uid:
                del self.slots[key]
                shutil.rmtree(slot.temp_dir, ignore_errors=True)
                self._last = {k: v for k, v in self._last.items() if k[:2] != key}

    def slot(self, ns: str, name: str, take: bool = False) -> Slot | None:
        """The cluster's slot; with ``take`` a free one is given to it."""
        self._prune()
        rc = self.cluster.store.get(RC, ns, name)
        if rc is None:
            return None
        found = self.slots.get((ns, name))
        allowed = self.namespaces is None or ns in self.namespaces
        if found is None and take and allowed and len(self.slots) < self.heads:
            self._counter += 1
            names = ["gcs", "dashboard", "client", "serve", "metrics", "agent"]
            names += ["agent_grpc", "node_manager", "object_manager", "runtime_env", "dash_metrics"]
            found = Slot(
                rc["metadata"].get("uid", ""),
                {n: free_port() for n in names},
                f"{self._temp_prefix}{self._counter}",
                [free_port() for _ in range(CLIENT_SERVERS)],
            )
            self.slots[(ns, name)] = found
        return found

    def is_real(self, ns: str, name: str) -> bool:
        """Whether RayCluster ``ns/name`` runs real Ray."""
        return (ns, name) in self.slots and self.slot(ns, name) is not None

    def claim(self, ns: str, name: str) -> bool:
        """Whether RayCluster ``ns/name`` runs (or will run) real Ray: a free slot is taken
        now, as its head pod's start would take it, unless that head already runs
        simulated. For controllers that must not act on a simulated head for a moment."""
        if self.is_real(ns, name):
            return True
        return not self._head_simulated(ns, name) and self.slot(ns, name, take=True) is not None

    def dashboard(self, ns: str, name: str) -> str | None:
        """``http://127.0.0.1:<port>`` of the cluster's real dashboard, when it has one."""
        slot = self.slot(ns, name)
        return f"http://127.0.0.1:{slot.ports['dashboard']}" if slot else None

    def close(self) -> None:
        """Forget every slot and remove the temp dirs (the processes are gone by now)."""
        self.slots.clear()
        for temp_dir in glob.glob(f"{self._temp_prefix}*"):
            shutil.rmtree(temp_dir, ignore_errors=True)

    # -- the launcher ---------------------------------------------------------------

    def launch(self, cluster: ClusterView, pod: Obj) -> list[ProcessSpec]:
        """What a Running pod runs for real (nothing for pods of simulated clusters)."""
        labels = pod["metadata"].get("labels") or {}
        ns = pod["metadata"]["namespace"]
        node_type = labels.get("ray.io/node-type")
        if node_type in ("head", "worker"):
            name = labels.get("ray.io/cluster", "")
            # Pods that start in one pass are launched in any order: a worker may take
            # the slot for its head, unless that head already runs simulated.
            take = node_type == "head" or not self._head_simulated(ns, name)
            slot = self.slot(ns, name, take=take)
            if slot is None:
                return []
            rc = self.cluster.store.get(RC, ns, labels["ray.io/cluster"])
            if node_type == "head":
                return [self._head(rc, pod, slot)]
            return [self._worker(rc, pod, slot)]
        if labels.get("ray.io/originated-from-crd") == "RayJob":
            return self._submitter(pod)
        return []

    def _head_simulated(self, ns: str, name: str) -> bool:
        rc = self.cluster.store.get(RC, ns, name)
        head = get_path(rc, "status", "head", "podName")
        pod = self.cluster.store.get("pods", ns, head) if head else None
        if pod is None or get_path(pod, "status", "phase") != "Running":
            return False
        return not self.cluster.localprocs.launched((ns, head))

    def _resources(self, pod: Obj, params: dict[str, Any]) -> list[str]:
        """``--num-cpus``, ``--num-gpus``, ``--memory``: the pod's, as KubeRay derives them."""
        limits: dict[str, Any] = {}
        for c in get_path(pod, "spec", "containers", default=[])[:1]:
            res = c.get("resources") or {}
            limits = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        cpus = params.get("num-cpus") or max(1, math.ceil(_quantity(limits.get("cpu", 1))))
        gpus = params.get("num-gpus") or int(_quantity(limits.get(GPU, 0)))
        memory = int(_quantity(limits.get("memory", 0))) or 1 << 30
        return [f"--num-cpus={cpus}", f"--num-gpus={gpus}", f"--memory={memory}"]

    def _common(self) -> list[str]:
        # Workers use their head's temp dir (Ray ignores theirs).
        return [
            "--block",
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--min-worker-port=0",
            "--max-worker-port=0",
        ]

    def _head(self, rc: Obj | None, pod: Obj, slot: Slot) -> ProcessSpec:
        params = get_path(rc, "spec", "headGroupSpec", "rayStartParams", default={}) or {}
        p = slot.ports
        argv = ray_start(
            "--head",
            f"--temp-dir={slot.temp_dir}",
            *self._common(),
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--port={p['gcs']}",
            f"--dashboard-port={p['dashboard']}",
            f"--ray-client-server-port={p['client']}",
            f"--dashboard-agent-listen-port={p['agent']}",
            f"--dashboard-agent-grpc-port={p['agent_grpc']}",
            f"--metrics-export-port={p['metrics']}",
            f"--node-manager-port={p['node_manager']}",
            f"--object-manager-port={p['object_manager']}",
            f"--runtime-env-agent-port={p['runtime_env']}",
            *self._resources(pod, params),
        )
        named = ray_ports(rc)
        return ProcessSpec(
            "ray-head",
            argv,
            env={
                **_container_env(pod),
                **RAY_ENV,
                "RAY_SERVE_DEFAULT_HTTP_PORT": str(p["serve"]),
                # The dashboard's own metrics port is fixed (44227) unless set: one per head.
                "DASHBOARD_METRIC_PORT": str(p["dash_metrics"]),
                CLIENT_PORTS_ENV: ",".join(map(str, slot.client_servers)),
            },
            ports={
                named["gcs"]: p["gcs"],
                named["dashboard"]: p["dashboard"],
                named["client"]: p["client"],
                SERVE_PORT: p["serve"],
                METRICS_PORT: p["metrics"],
                AGENT_PORT: p["agent"],
            },
            memory_bytes=HEAD_MEMORY_BYTES,
            ready_port=named["dashboard"],
            ready_path="/api/gcs_healthz",
            unready_after_seconds=KUBERAY_UNREADY_AFTER_SECONDS,
        )

    def _worker(self, rc: Obj | None, pod: Obj, slot: Slot) -> ProcessSpec:
        group = (pod["metadata"].get("labels") or {}).get("ray.io/group", "")
        params: dict[str, Any] = {}
        for g in get_path(rc, "spec", "workerGroupSpecs", default=[]) or []:
            if g.get("groupName") == group:
                params = g.get("rayStartParams") or {}
        p = {n: free_port() for n in ("agent", "agent_grpc", "metrics", "nm", "om", "rt")}
        start = ray_start(
            f"--address=127.0.0.1:{slot.ports['gcs']}",
            *self._common(),
            f"--dashboard-agent-listen-port={p['agent']}",
            f"--dashboard-agent-grpc-port={p['agent_grpc']}",
            f"--metrics-export-port={p['metrics']}",
            f"--node-manager-port={p['nm']}",
            f"--object-manager-port={p['om']}",
            f"--runtime-env-agent-port={p['rt']}",
            *self._resources(pod, params),
        )
        # KubeRay's workers wait for the head (its wait-gcs-ready init container); here
        # for its raylet too, so that a head and its workers do not all start at once.
        head = f"http://127.0.0.1:{slot.ports['agent']}/api/local_raylet_healthz"
        script = (
            f"until {shlex.quote(sys.executable)} -c {shlex.quote(WAIT_HTTP)} {head} 2>/dev/null; "
            "do sleep 1; done; exec " + shlex.join(start)
        )
        return ProcessSpec(
            "ray-worker",
            ["/bin/bash", "-c", script],
            env={**_container_env(pod), **RAY_ENV, **_claimed_devices(pod, "ray-worker")},
            # Serve runs one proxy, on the head (every node here shares one host and one
            # Serve port: ``realserve.py``); a worker's 8000 reaches it, as a worker's own
            # proxy would route to the same replicas.
            ports={
                METRICS_PORT: p["metrics"],
                AGENT_PORT: p["agent"],
                SERVE_PORT: slot.ports["serve"],
            },
            memory_bytes=WORKER_MEMORY_BYTES,
            ready_port=AGENT_PORT,
            ready_path="/api/local_raylet_healthz",
            unready_after_seconds=KUBERAY_UNREADY_AFTER_SECONDS,
        )

    def _submitter(self, pod: Obj) -> list[ProcessSpec]:
        """A RayJob submitter pod of a real cluster runs its own command, its dashboard
        address swapped for the real head's loopback one."""
        containers = get_path(pod, "spec", "containers", default=[])
        if not containers:
            return []
        c = containers[0]
        env = {e.get("name"): str(e.get("value", "")) for e in c.get("env") or []}
        address = env.get("RAY_DASHBOARD_ADDRESS", "")
        ns = pod["metadata"]["namespace"]
        host = address.split("://")[-1].split(":")[0].split(".")[0]
        svc = self.cluster.store.get("services", ns, host)
        name = get_path(svc, "metadata", "labels", "ray.io/cluster", default="")
        real = self.dashboard(ns, name) if name else None
        if not address or real is None:
            return []
        loopback = real.split("://", 1)[1]
        argv = [
            arg.replace(address.split("://")[-1], loopback)
            for arg in [*(c.get("command") or []), *(c.get("args") or [])]
        ]
        env = {k: v.replace(address.split("://")[-1], loopback) for k, v in env.items() if k}
        return [ProcessSpec("submitter", argv, env={**env, **RAY_ENV}, main=True)]

    # -- the real Jobs API ------------------------------------------------------------

    def _call(self, ns: str, name: str, method: str, path: str, body: Any = None) -> Any:
        base = self.dashboard(ns, name)
        if base is None:
            return None
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{base}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=3) as resp:
                return json.loads(resp.read() or b"null")
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def job(self, ns: str, name: str, job_id: str) -> DriverRun | None:
        """The real head's job ``job_id`` as a :class:`DriverRun` (the last one read when
        the head does not answer now)."""
        key = (ns, name, job_id)
        info = self._call(ns, name, "GET", f"/api/jobs/{job_id}")
        if not isinstance(info, dict) or "status" not in info:
            return self._last.get(key)
        status = str(info["status"])
        start = (info.get("start_time") or 0) / 1000 or math.inf
        end = (info.get("end_time") or 0) / 1000 or math.inf
        if status == "PENDING":
            start = math.inf
        run = DriverRun(
            job_id=job_id,
            entrypoint=str(info.get("entrypoint") or ""),
            submitted=start,
            start=start,
            end=end if status in ("SUCCEEDED", "FAILED") else math.inf,
            outcome=status if status in ("SUCCEEDED", "FAILED") else "SUCCEEDED",
            message=str(info.get("message") or ""),
            stopped=end if status == "STOPPED" else None,
            driver_id=str(info.get("job_id") or ""),
            metadata=info.get("metadata") or {},
            runtime_env=info.get("runtime_env") or {},
            pending_message=str(info.get("message") or ""),
        )
        self._last[key] = run
        return run

    def submit(self, ns: str, name: str, job_id: str, rayjob: Obj | None) -> DriverRun:
        """``POST /api/jobs/`` to the real head (HTTPMode RayJobs); the job as it reads."""
        spec = (rayjob or {}).get("spec") or {}
        body: dict[str, Any] = {
            "entrypoint": str(spec.get("entrypoint") or ""),
            "submission_id": job_id,
            "metadata": dict(spec.get("metadata") or {}),
        }
        try:
            env = yaml.safe_load(spec.get("runtimeEnvYAML") or "") or {}
        except yaml.YAMLError:
            env = {}
        if isinstance(env, dict) and env:
            body["runtime_env"] = env
        self._call(ns, name, "POST", "/api/jobs/", body)
        found = self.job(ns, name, job_id)
        if found is not None:
            return found
        now = self.cluster.clock.time()
        return DriverRun(job_id, body["entrypoint"], now, math.inf, math.inf, "SUCCEEDED", "")

    def stop(self, ns: str, name: str, job_id: str) -> None:
        """``POST /api/jobs/<id>/stop`` on the real head."""
        self._call(ns, name, "POST", f"/api/jobs/{job_id}/stop")


def _container_env(pod: Obj) -> dict[str, str]:
    """The literal ``env`` of the pod's Ray container: ``ray start`` runs in it, so its
    raylet, and every driver and task the raylet starts, inherit it (a job's driver sees
    the head container's ``GANGWAY_PREEMPTION_URL``, as on a real KubeRay head).
    ``valueFrom`` entries are left out: nothing here resolves them."""
    containers = get_path(pod, "spec", "containers", default=[]) or []
    env = (containers[0].get("env") or []) if containers else []
    return {str(e["name"]): str(e["value"]) for e in env if e.get("name") and "value" in e}


def _claimed_devices(pod: Obj, container: str) -> dict[str, str]:
    """``NVIDIA_VISIBLE_DEVICES`` as NVIDIA's DRA driver sets it in ``container``: the UUIDs
    of the devices its claims were allocated (kubesim/dra records them on the pod); none
    for a container without claims or a pod that asks the device plugin."""
    recorded = (pod["metadata"].get("annotations") or {}).get("kubesim.io/nvidia-visible-devices")
    try:
        visible = json.loads(recorded or "{}").get(container)
    except (ValueError, AttributeError):
        return {}
    return {"NVIDIA_VISIBLE_DEVICES": str(visible)} if visible else {}
