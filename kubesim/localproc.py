"""Real local processes behind simulated pods (real Ray heads, notebooks, sshd).

A *launcher* looks at a pod that has just become Running and returns the processes it wants
(:class:`ProcessSpec`); :class:`LocalProcesses` starts them, maps the pod ports they serve
to loopback ports (:meth:`LocalProcesses.address`, read by the service proxy and
port-forward) and treats them as the kubelet treats containers: stopped with the pod,
restarted after a back-off, OOM-killed past their memory bound, Ready per their probe.
Without a ``root`` nothing is launched: pods stay simulated, as the benchmarks want.
kubesim/README.md (*Real processes behind pods*, *Real Ray*) says the rest.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

PodKey = tuple[str, str]
DEFAULT_MEMORY_BYTES = 2 << 30
# SIGTERM first, as the kubelet does; the grace is short because nothing here holds data.
STOP_GRACE_SECONDS = 5.0
MEMORY_POLL_SECONDS = 2.0
# Probes and exits are looked at this often (the kubelet's probes run every few seconds).
PROBE_POLL_SECONDS = 0.5
RESTART_BACKOFF_SECONDS = 1.0


@dataclass(frozen=True)
class ProcessSpec:
    """One process a launcher wants for a pod. ``ports`` maps the pod's container ports
    to the loopback ports the process listens on (:func:`free_port` picks them)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    # Readiness probe: GET ``ready_path`` on the pod port ``ready_port`` (0: no probe).
    ready_port: int = 0
    ready_path: str = "/"
    # A Ready pod turns unready only once its probe has failed for this long: the probe's
    # ``failureThreshold`` times its ``periodSeconds`` (Kubernetes' defaults: 3 times 10 s).
    # One slow answer on a busy node does not take the pod out of its services' endpoints.
    unready_after_seconds: float = 30.0
    # The pod's main process: when it exits, the pod's containers exit with its code.
    main: bool = False


Launcher = Callable[["ClusterView", Obj], list[ProcessSpec]]


@dataclass
class Running:
    """A started process and what it serves."""

    spec: ProcessSpec
    popen: subprocess.Popen[bytes]
    workdir: Path
    oom_killed: bool = False
    ready: bool = False
    stopping: bool = False
    restarts: int = 0
    restart_at: float | None = None
    # When the probe of a Ready process first failed in a row (None: it answers).
    failing_since: float | None = None


# Ports are picked at random from FIRST_PORT up to the kernel's ephemeral range, never in
# it: the kernel hands ephemeral ports to every ``bind(0)`` and every outgoing connection
# on this machine, and a port picked there can be handed to another socket before the
# process it was picked for binds it. A real Ray head binds some of its ports tens of
# seconds after it starts on a busy machine, while a test suite beside it opens thousands
# of connections.
FIRST_PORT = 10_000


def _ephemeral_start() -> int:
    """The kernel's lowest port for ``bind(0)`` and outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _bindable(port: int, host: str) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1", span: int = 1) -> int:
    """A loopback port, and the ``span - 1`` after it, that nothing is bound to now, below
    the ephemeral range (see :data:`FIRST_PORT`)."""
    picks = random.Random()
    end = _ephemeral_start() - span + 1  # the last port of the span stays below it
    for _ in range(500 if end > FIRST_PORT else 0):
        port = picks.randrange(FIRST_PORT, end)
        if all(_bindable(port + i, host) for i in range(span)):
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


def _running(pod: Obj) -> bool:
    return (
        get_path(pod, "status", "phase") == "Running"
        and not pod["metadata"].get("deletionTimestamp")
        and bool(get_path(pod, "status", "podIP"))
    )


class LocalProcesses:
    """The cluster's real processes, a controller told of every pod write."""

    def __init__(self, cluster: ClusterView, root: Path | None = None) -> None:
        self.cluster = cluster
        self.root = root
        self.launchers: list[Launcher] = []
        self.by_pod: dict[PodKey, dict[str, Running]] = {}
        self._to_start: set[PodKey] = set()
        self._to_stop: set[PodKey] = set()
        self._lock = threading.Lock()
        self._watchdog: threading.Thread | None = None
        self._closed = threading.Event()

    @property
    def enabled(self) -> bool:
        """Whether real processes run at all (a root was given)."""
        return self.root is not None

    def add_launcher(self, launcher: Launcher) -> None:
        """Ask ``launcher`` about every pod that starts running from now on."""
        self.launchers.append(launcher)

    # -- the controller protocol -----------------------------------------------------

    def reset(self) -> None:
        """The store was wiped or restored: no process outlives the pods it served."""
        self.stop_all()
        if self.enabled:
            self._to_start = {
                (p["metadata"]["namespace"], p["metadata"]["name"])
                for p in self.cluster.store.iter("pods")
                if _running(p)
            }

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Queue a start when a pod turns Running, a stop when it stops running."""
        if not self.enabled or rt.kind != "Pod" or not self.launchers:
            return
        pod = new if new is not None else old
        assert pod is not None
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if new is not None and _running(new):
            if key not in self.by_pod:
                self._to_start.add(key)
        elif key in self.by_pod or key in self._to_start:
            self._to_start.discard(key)
            self._to_stop.add(key)

    def reconcile(self) -> bool:
        """Start and stop what the writes asked for; never writes objects."""
        while self._to_stop:
            self.stop_pod(self._to_stop.pop())
        while self._to_start:
            key = self._to_start.pop()
            pod = self.cluster.store.get("pods", *key)
            if pod is not None and _running(pod):
                self._start_pod(key, pod)
        return False

    # -- starting and stopping -------------------------------------------------------

    def _start_pod(self, key: PodKey, pod: Obj) -> None:
        assert self.root is not None
        started: dict[str, Running] = {}
        for launcher in self.launchers:
            for spec in launcher(self.cluster, pod):
                workdir = self.root / key[0] / key[1] / spec.name
                workdir.mkdir(parents=True, exist_ok=True)
                started[spec.name] = Running(spec, _popen(spec, workdir), workdir)
            if started:
                # A later launcher sees what earlier ones started: a notebook finds the
                # pod's real Ray head (its GCS port) through :meth:`address`.
                with self._lock:
                    self.by_pod[key] = dict(started)
        if started:
            # A probed pod is not Ready before its probes answer.
            self._write_readiness(pod, list(started.values()))
            self._ensure_watchdog()

    def stop_pod(self, key: PodKey) -> None:
        """End every process of the pod (process group: SIGTERM, then SIGKILL)."""
        with self._lock:
            procs = self.by_pod.pop(key, {})
        for run in procs.values():
            run.stopping = True
            _stop_group(run.popen)

    def stop_all(self) -> None:
        """End every process (kubesim is stopping, or the store was reset)."""
        with self._lock:
            keys = list(self.by_pod)
        for key in keys:
            self.stop_pod(key)
        self._to_start.clear()
        self._to_stop.clear()

    def close(self) -> None:
        """Stop everything and the memory watchdog; the root's files stay for reading."""
        self._closed.set()
        self.stop_all()

    # -- reads -----------------------------------------------------------------------

    def address(self, namespace: str, pod: str, port: int) -> tuple[str, int] | None:
        """The loopback address serving ``port`` of the pod, when a live process does."""
        with self._lock:
            procs = self.by_pod.get((namespace, pod), {})
            for run in procs.values():
                if port in run.spec.ports and run.popen.poll() is None:
                    return ("127.0.0.1", run.spec.ports[port])
        return None

    def real_ports(self, key: PodKey) -> set[int] | None:
        """The pod ports its real processes serve (or will: a dead one's stay claimed);
        ``None`` while its start is pending and they are not known yet."""
        with self._lock:
            if key in self._to_start:
                return None
            procs = self.by_pod.get(key, {})
            return {port for run in procs.values() for port in run.spec.ports}

    def launched(self, key: PodKey) -> bool:
        """Whether the pod's launchers were asked (its processes run) or are due to be."""
        return key in self.by_pod or key in self._to_start

    def processes(self, namespace: str, pod: str) -> dict[str, Running]:
        """The pod's processes by name (a copy)."""
        with self._lock:
            return dict(self.by_pod.get((namespace, pod), {}))

    # -- memory bound ----------------------------------------------------------------

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._closed.clear()
            self._watchdog = threading.Thread(
                target=self._watch_memory, name="kubesim-localproc-memory", daemon=True
            )
            self._watchdog.start()

    def _watch_memory(self) -> None:
        last_memory = 0.0
        while not self._closed.wait(PROBE_POLL_SECONDS):
            with self._lock:
                pods = {key: list(procs.values()) for key, procs in self.by_pod.items()}
            for key, runs in pods.items():
                self._probe(key, runs)
            if time.monotonic() - last_memory < MEMORY_POLL_SECONDS:
                continue
            last_memory = time.monotonic()
            for run in (r for runs in pods.values() for r in runs):
                if run.popen.poll() is None and group_rss(run.popen.pid) > run.spec.memory_bytes:
                    run.oom_killed = True
                    _signal_group(run.popen.pid, signal.SIGKILL)

    # -- readiness and exits -------------------------------------------------------------

    def _probe(self, key: PodKey, runs: list[Running]) -> None:
        """Probe the pod's processes; write the pod when its readiness or life changed."""
        changed = False
        exited: Running | None = None
        for run in runs:
            alive = run.popen.poll() is None
            if run.spec.main and not alive and not run.stopping:
                exited = run
            elif not alive and not run.stopping:
                self._restart(run)
            if not run.spec.ready_port:
                continue
            ready = alive and self._still_ready(run)
            if ready != run.ready:
                run.ready, changed = ready, True
        if not changed and exited is None:
            return
        with self.cluster.lock:
            pod = self.cluster.store.get("pods", *key)
            if pod is None or not _running(pod) or self.by_pod.get(key) is None:
                return
            if exited is not None:
                exited.stopping = True
                code = exited.popen.returncode
                reason = "OOMKilled" if exited.oom_killed else ""
                self.cluster.kubelet.terminate(pod, 137 if code < 0 else code, reason=reason)
            else:
                self._write_readiness(pod, runs)
            self.cluster.settle()

    @staticmethod
    def _still_ready(run: Running) -> bool:
        """The probe's verdict: a failed answer makes a Ready process unready only after
        ``unready_after_seconds`` of failures, as the kubelet's ``failureThreshold`` does."""
        if _answers(run.spec.ports.get(run.spec.ready_port), run.spec.ready_path):
            run.failing_since = None
            return True
        if not run.ready:
            return False
        now = time.monotonic()
        if run.failing_since is None:
            run.failing_since = now
        return now - run.failing_since < run.spec.unready_after_seconds

    def _restart(self, run: Running) -> None:
        """Start a process that exited by itself again after a back-off doubling from 1 s
        to 5 min, as the kubelet restarts a container; what its group left is killed."""
        now = time.monotonic()
        if run.restart_at is None:
            run.restart_at = now + min(RESTART_BACKOFF_SECONDS * 2**run.restarts, 300.0)
            return
        if now < run.restart_at or self._closed.is_set():
            return
        _signal_group(run.popen.pid, signal.SIGKILL)
        with self._lock:
            if run.stopping:
                return
            run.popen = _popen(run.spec, run.workdir)
        run.restarts += 1
        run.restart_at = None

    def _write_readiness(self, pod: Obj, runs: list[Running]) -> None:
        probed = [r for r in runs if r.spec.ready_port]
        if not probed:
            return
        ready = all(r.ready for r in probed)
        statuses = get_path(pod, "status", "containerStatuses", default=[]) or []
        if all(bool(cs.get("ready")) == ready for cs in statuses):
            return
        for cs in statuses:
            if "running" in (cs.get("state") or {}):
                cs["ready"] = ready
        self.cluster.kubelet.life.rewrite(pod)


def python_module(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run one of this checkout's modules (``python -m``)
    in a pod's process: it runs in its own folder, so the checkout goes on its path."""
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return [sys.executable, "-m", module, *args], {"PYTHONPATH": path}


def _popen(spec: ProcessSpec, workdir: Path) -> subprocess.Popen[bytes]:
    with open(workdir / "output.log", "ab") as out:
        return subprocess.Popen(
            spec.argv,
            cwd=workdir,
            env={**os.environ, **spec.env},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _answers(port: int | None, path: str) -> bool:
    if not port:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return 200 <= int(resp.status) < 300
    except (OSError, urllib.error.URLError, ValueError):
        return False


def group_rss(pgid: int) -> int:
    """Resident bytes of every process in the process group ``pgid`` (from /proc)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            # Fields after the command's closing parenthesis: state ppid pgrp ...
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                total += int(Path(entry.path, "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _stop_group(popen: subprocess.Popen[bytes]) -> None:
    _signal_group(popen.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline and popen.poll() is None:
        time.sleep(0.05)
    # Children may outlive the leader: the group gets SIGKILL either way.
    _signal_group(popen.pid, signal.SIGKILL)
    popen.wait()


def clear_root(root: Path) -> None:
    """Remove what earlier runs left under ``root`` (kubesim starts with no processes)."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
