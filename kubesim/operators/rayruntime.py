"""What runs inside Ray pods, which kubesim does not run: each Ray head's job table (what
the Ray dashboard's job API answers KubeRay) and the RayJob submitter's
``ray job submit --no-wait`` + ``ray job logs --follow``.

The drivers are simulated from simulator-only knobs (annotations, fleet file, setters, CLI
flags, never anything a control plane would set), on the cluster's clock. The same table
serves the dashboard emulation (``raydashboard.py``), including interactive drivers
(``kubesim.io/ray-driver``) and the GCS's runtime env packages; it lives as long as the head
pod. kubesim/README.md (*Simulated Ray drivers*) says how each knob acts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from kubesim.controller import TimerHeap
from kubesim.operators import raycheckpoint, raydemand
from kubesim.operators.rayjob_defaults import RayJobDefaults
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

RC = "rayclusters.ray.io"
RJ = "rayjobs.ray.io"
ANN_RUN = "kubesim.io/job-run-seconds"
ANN_PENDING = "kubesim.io/job-pending-seconds"
ANN_OUTCOME = "kubesim.io/job-outcome"
ANN_MESSAGE = "kubesim.io/job-message"
ANN_DRIVER = "kubesim.io/ray-driver"
DRIVER_STATES = ("active", "idle")
# What an interactive driver's JobDetails shows as its entrypoint (the driver's command line).
INTERACTIVE_ENTRYPOINT = "python -c 'import ray; ray.init()'  # kubesim interactive driver"
# Ray's job messages (JobInfo.message), as the dashboard reports them.
MSG_PENDING = (
    "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom "
    "resources) to become available. It may be waiting for the runtime environment to be set up."
)
MSG_RUNNING = "Job is currently running."
MSG_SUCCEEDED = "Job finished successfully."
MSG_FAILED = "Job entrypoint command failed with exit code 1"
MSG_STOPPED = "Job was intentionally stopped."
MSG_NOT_STARTED = "Job has not started yet."
MSG_WAIT_RESOURCES = (
    " It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available."
)
MSG_WAIT_RUNTIME_ENV = " It may be waiting for the runtime environment to be set up."
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
# Ray's message for a job whose runtime env named a package the GCS does not have
# (the job manager's prefix, RuntimeEnvSetupError's first line, the download's IOError).
MSG_RUNTIME_ENV_FAILED = (
    "runtime_env setup failed: Failed to set up runtime environment.\n"
    "Failed to download runtime_env file package {uri} from the GCS to the Ray worker node. "
    "The package may have prematurely been deleted from the GCS due to a long upload time "
    "or a problem with Ray."
)
PodKey = tuple[str, str]
HeadKey = tuple[str, str]


@dataclass
class DriverRun:
    """One Ray job in a head's job table; times on the cluster clock."""

    job_id: str
    entrypoint: str
    submitted: float
    start: float
    end: float
    outcome: str  # SUCCEEDED or FAILED, once ``end`` is reached
    message: str
    stopped: float | None = None
    followers: set[PodKey] = field(default_factory=set)
    # SUBMISSION (a job of the job API) or DRIVER (an interactive ``ray.init`` driver).
    kind: str = "SUBMISSION"
    # Ray's JobID of the job's driver (hex, e.g. ``02000000``), once the driver runs.
    driver_id: str = ""
    metadata: dict[str, str] | None = None
    runtime_env: dict[str, Any] | None = None
    pending_message: str = MSG_PENDING
    deleted: bool = False  # deleted through the job API (the driver's record stays)
    # Its runtime env could not be set up (a package it names was never uploaded): it
    # failed when it would have started, and its driver never ran.
    runtime_env_failed: bool = False
    # What it asks of the cluster (``raydemand.py``): the driver's entrypoint resources,
    # held until it ends, and its tasks' bundles, wanted while it runs.
    entrypoint_resources: dict[str, float] = field(default_factory=dict)
    demand: list[dict[str, float]] = field(default_factory=list)
    # A driver that checkpoints, on notice or periodically (``raycheckpoint.py``), else None.
    checkpointing: raycheckpoint.CheckpointingRun | None = None

    def status(self, at: float) -> str:
        """Ray's JobStatus at ``at``."""
        if self.stopped is not None and self.stopped <= at:
            return "STOPPED"
        if at < self.start:
            return "PENDING"
        if at < self.end:
            return "RUNNING"
        return self.outcome

    def message_at(self, at: float) -> str:
        """Ray's JobInfo.message at ``at``."""
        st = self.status(at)
        if st == "PENDING":
            return self.pending_message
        if st == "RUNNING":
            return MSG_RUNNING
        if st == "STOPPED":
            return MSG_STOPPED
        return self.message

    def end_time(self, at: float) -> float | None:
        """When the job ended, if it has by ``at``."""
        if self.stopped is not None and self.stopped <= at:
            return self.stopped
        return self.end if at >= self.end else None


@dataclass
class SubmitterTrace:
    """What one submitter pod did, kept for its logs after the head is gone."""

    address: str
    job_id: str
    waiting_since: float
    run: DriverRun | None = None
    submitted_here: bool = False
    attached: float | None = None
    lost: float | None = None
    waited: bool = False


def _float(value: Any, default: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if out >= 0 else default


class RayRuntime:
    """Job tables of the Ray heads and the submitter pods' behaviour."""

    def __init__(self, cluster: ClusterView, defaults: RayJobDefaults) -> None:
        self.cluster = cluster
        self.defaults = defaults
        self.reset()

    def reset(self) -> None:
        """Forget every job table (the store was wiped; a restore loses running drivers
        as a head restart without GCS fault tolerance would)."""
        self.heads: dict[HeadKey, dict[str, DriverRun]] = {}
        self.driver_counters: dict[HeadKey, int] = {}
        # Heads whose interactive driver may have to connect or disconnect.
        self.drivers_dirty: set[HeadKey] = set()
        self.dirty: set[PodKey] = set()
        self.following: dict[PodKey, tuple[HeadKey, str]] = {}
        # Submitter pods waiting for their head to answer (the GCS health loop).
        self.waiters: dict[PodKey, HeadKey] = {}
        # Per submitter pod, for ``podlogs.py``: until the pod is deleted.
        self.traces: dict[PodKey, SubmitterTrace] = {}
        self.timers = TimerHeap()
        # Per head, the packages uploaded to its GCS (``PUT /api/packages/...``): URI to size.
        self.packages: dict[HeadKey, dict[str, int]] = {}
        # Every driver started that checkpoints, in order (``raycheckpoint.py``).
        self.checkpointing_runs: list[raycheckpoint.CheckpointingRun] = []

    # -- the job table (the dashboard's job API) ----------------------------------------

    def _real(self, ns: str, cluster: str) -> Any:
        real = self.cluster.realray  # ``realray.py``'s RealRay, when kubesim runs real Ray
        return real if real is not None and real.is_real(ns, cluster) else None

    def job(self, ns: str, cluster: str, job_id: str) -> DriverRun | None:
        """``GET /api/jobs/<id>`` on the head of RayCluster ``ns/cluster`` (a real head's
        when the cluster runs real Ray)."""
        real = self._real(ns, cluster)
        found: DriverRun | None = real.job(ns, cluster, job_id) if real is not None else None
        return found if real is not None else self.heads.get((ns, cluster), {}).get(job_id)

    def submit(self, ns: str, cluster: str, job_id: str, rayjob: Obj | None) -> DriverRun:
        """Submit a RayJob's job to a head (a real one is sent it); the driver's timing and
        outcome come from the RayJob's annotations, else the defaults."""
        if (real := self._real(ns, cluster)) is not None:
            sent: DriverRun = real.submit(ns, cluster, job_id, rayjob)
            return sent
        table = self.heads.setdefault((ns, cluster), {})
        if job_id in table:
            return table[job_id]
        ann = get_path(rayjob, "metadata", "annotations", default={}) or {}
        spec = (rayjob or {}).get("spec") or {}
        run_obj = self._new_run(
            ns, cluster, job_id, str(spec.get("entrypoint") or ""), ann, MSG_PENDING
        )
        # ``ray job submit`` sends the RayJob's metadata and runtime env ({} when unset).
        run_obj.metadata = dict(spec.get("metadata") or {})
        try:
            env = yaml.safe_load(spec.get("runtimeEnvYAML") or "") or {}
        except yaml.YAMLError:
            env = {}
        run_obj.runtime_env = env if isinstance(env, dict) else {}
        run_obj.entrypoint_resources = raydemand.entrypoint_bundle(
            spec.get("entrypointNumCpus"),
            spec.get("entrypointNumGpus"),
            None,
            spec.get("entrypointResources"),
        )
        run_obj.demand = raydemand.parse_bundles(ann.get(raydemand.ANN_JOB_DEMAND))
        self._checkpointing(run_obj, rayjob)
        table[job_id] = run_obj
        self._wake_rayjob(rayjob, run_obj.start)
        self._wake_rayjob(rayjob, run_obj.end)
        return run_obj

    def _checkpointing(self, run: DriverRun, rayjob: Obj | None) -> None:
        """A driver with ``kubesim.io/job-checkpoint`` (``on-notice``, ``every-<n>s``)
        resumed from a step runs only the work left after it (and is kept in
        ``checkpointing_runs``)."""
        plan = raycheckpoint.plan(
            rayjob, run.runtime_env, run.end - run.start, default=self.defaults.checkpoint
        )
        if plan is None:
            return
        plan.start = run.start
        run.end = run.start + plan.remaining()
        run.checkpointing = plan
        self.checkpointing_runs.append(plan)

    def submit_request(
        self,
        ns: str,
        cluster: str,
        job_id: str,
        entrypoint: str,
        metadata: dict[str, str] | None,
        runtime_env: dict[str, Any] | None,
        resources: bool,
        driver_bundle: dict[str, float] | None = None,
    ) -> DriverRun | None:
        """``POST /api/jobs/`` on the head of ``ns/cluster``: a new job, or None when the
        submission id is taken. Simulator knobs come from ``metadata``; the PENDING
        message is Ray's for what was asked (entrypoint resources, a runtime env);
        ``driver_bundle`` is the driver's bundle of entrypoint resources."""
        table = self.heads.setdefault((ns, cluster), {})
        if job_id in table:
            return None
        pending = MSG_NOT_STARTED
        if resources:
            pending += MSG_WAIT_RESOURCES
        if runtime_env:
            pending += MSG_WAIT_RUNTIME_ENV
        run = self._new_run(ns, cluster, job_id, entrypoint, metadata or {}, pending)
        run.metadata, run.runtime_env = metadata, runtime_env
        run.entrypoint_resources = dict(driver_bundle or {})
        run.demand = raydemand.parse_bundles((metadata or {}).get(raydemand.ANN_JOB_DEMAND))
        missing = self.missing_package((ns, cluster), runtime_env)
        if missing is not None:
            run.end, run.outcome, run.runtime_env_failed = run.start, "FAILED", True
            run.message = MSG_RUNTIME_ENV_FAILED.format(uri=missing)
        table[job_id] = run
        return run

    # -- packages (the GCS's runtime env packages) --------------------------------------

    def store_package(self, head: HeadKey, uri: str, size: int) -> None:
        """``PUT /api/packages/gcs/<name>``: the head's GCS keeps the package."""
        self.packages.setdefault(head, {})[uri] = size

    def has_package(self, head: HeadKey, uri: str) -> bool:
        """Whether the head's GCS has the package ``uri``."""
        return uri in self.packages.get(head, {})

    def missing_package(self, head: HeadKey, runtime_env: dict[str, Any] | None) -> str | None:
        """The first ``gcs://`` package of a runtime env (its ``working_dir`` and
        ``py_modules``) that the head does not have, as Ray's runtime env agent finds it
        when it sets the job up; None when every one was uploaded (other URIs, on remote
        storage, are taken as given)."""
        env = runtime_env or {}
        modules = env.get("py_modules")
        uris = [env.get("working_dir"), *(modules if isinstance(modules, list) else [])]
        in_gcs = [u for u in uris if isinstance(u, str) and u.startswith("gcs://")]
        return next((u for u in in_gcs if not self.has_package(head, u)), None)

    def delete(self, ns: str, cluster: str, job_id: str) -> None:
        """``DELETE /api/jobs/<id>``: the job API forgets a (terminal) job and its id may be
        used again, but its driver stays in the GCS job table (and in the head's activity),
        so the run is kept under another key, marked deleted."""
        table = self.heads.get((ns, cluster), {})
        run = table.pop(job_id, None)
        if run is not None:
            run.deleted = True
            table[f"deleted:{run.driver_id}:{job_id}"] = run

    def _new_run(
        self,
        ns: str,
        cluster: str,
        job_id: str,
        entrypoint: str,
        knobs: dict[str, Any],
        pending_message: str,
    ) -> DriverRun:
        d = self.defaults
        now = self.cluster.clock.time()
        pending = _float(knobs.get(ANN_PENDING), d.pending_seconds)
        run = _float(knobs.get(ANN_RUN), d.run_seconds)
        outcome = str(knobs.get(ANN_OUTCOME) or d.outcome).lower()
        failed = outcome == "failed"
        message = str(knobs.get(ANN_MESSAGE) or d.message)
        if not message:
            message = MSG_FAILED if failed else MSG_SUCCEEDED
        elif failed and not message.startswith(MSG_FAILED):
            message = f"{MSG_FAILED}, last available logs (truncated to 20,000 chars):\n{message}"
        return DriverRun(
            job_id=job_id,
            entrypoint=entrypoint,
            submitted=now,
            start=now + pending,
            end=now + pending + run,
            outcome="FAILED" if failed else "SUCCEEDED",
            message=message,
            pending_message=pending_message,
            driver_id=self._next_driver_id((ns, cluster)),
        )

    def _next_driver_id(self, head: HeadKey) -> str:
        """Ray's JobIDs count up from 1 per GCS, printed as 4 little-endian bytes."""
        n = self.driver_counters.get(head, 0) + 1
        self.driver_counters[head] = n
        return n.to_bytes(4, "little").hex()

    # -- driver activity (the dashboard's component_activities) ---------------------------

    def activity(self, ns: str, cluster: str, at: float) -> tuple[int, float | None]:
        """(drivers connected at ``at``, when the last driver that ended ended) on the head
        of ``ns/cluster``: a submitted job has a driver from RUNNING to its end."""
        active, last = 0, None
        for run in self.heads.get((ns, cluster), {}).values():
            if run.status(at) == "RUNNING":
                active += 1
                continue
            ended = run.end_time(at)
            # A job stopped before its driver started never had a driver.
            had_driver = not run.runtime_env_failed and (
                run.kind == "DRIVER" or run.stopped is None or run.stopped > run.start
            )
            if ended is not None and had_driver:
                last = ended if last is None else max(last, ended)
        return active, last

    def _sync_driver(self, head: HeadKey) -> None:
        """Connect or disconnect the interactive driver of a head as its RayCluster's
        ``kubesim.io/ray-driver`` annotation and the head's readiness say."""
        rc = self.cluster.store.get(RC, *head)
        ann = get_path(rc, "metadata", "annotations", ANN_DRIVER, default="")
        want = ann == "active" and self.head_ready(*head)
        live = [
            r for r in self.heads.get(head, {}).values() if r.kind == "DRIVER" and r.end == math.inf
        ]
        now = self.cluster.clock.time()
        if want and not live:
            driver_id = self._next_driver_id(head)
            self.heads.setdefault(head, {})[driver_id] = DriverRun(
                job_id=driver_id,
                entrypoint=INTERACTIVE_ENTRYPOINT,
                submitted=now,
                start=now,
                end=math.inf,
                outcome="SUCCEEDED",
                message="",
                kind="DRIVER",
                driver_id=driver_id,
                metadata={},
                runtime_env={},
            )
        elif not want:
            for run in live:
                run.end = now

    def stop(self, ns: str, cluster: str, job_id: str) -> None:
        """``ray job stop``: a job not yet ended is STOPPED now."""
        real = self._real(ns, cluster)
        if real is not None:
            return real.stop(ns, cluster, job_id)
        run = self.job(ns, cluster, job_id)
        now = self.cluster.clock.time()
        if run is not None and run.end_time(now) is None:
            run.stopped = now
            self.dirty |= run.followers

    def _wake_rayjob(self, rayjob: Obj | None, at: float) -> None:
        if rayjob is not None:
            self.cluster.rayjob.wake_at(
                at, rayjob["metadata"]["namespace"], rayjob["metadata"]["name"]
            )

    # -- controller protocol --------------------------------------------------------------

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Submitter pods, the pods of Ray heads and RayClusters (the driver knob)."""
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.key == RC:
            self.drivers_dirty.add((meta["namespace"], meta["name"]))
            return
        if rt.kind != "Pod":
            return
        key = (meta["namespace"], meta["name"])
        labels = meta.get("labels") or {}
        if labels.get("ray.io/node-type") == "head":
            cluster = labels.get("ray.io/cluster", "")
            head = (meta["namespace"], cluster)
            if new is not None:
                self._notice(head, new)
            if new is None or (new.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                # The head is gone and its job table with it (no GCS fault tolerance).
                table = self.heads.pop(head, {})
                self.driver_counters.pop(head, None)
                self.packages.pop(head, None)
                for run in table.values():
                    self.dirty |= run.followers
            self.drivers_dirty.add(head)
            # A head that starts may be what a waiting submitter waits for.
            self.dirty |= {k for k, h in self.waiters.items() if h == head}
        if labels.get("ray.io/originated-from-crd") == "RayJob":
            if new is None:
                self.dirty.discard(key)
                self.following.pop(key, None)
                self.waiters.pop(key, None)
                self.traces.pop(key, None)
            else:
                self.dirty.add(key)

    def _notice(self, head: HeadKey, pod: Obj) -> None:
        """A head pod changed: its running drivers that checkpoint on notice answer a
        new preemption notice on it."""
        now = self.cluster.clock.time()
        for run in self.heads.get(head, {}).values():
            if run.checkpointing is not None and run.status(now) == "RUNNING":
                raycheckpoint.on_notice(run.checkpointing, pod, now)

    def wake_due(self, at: float) -> bool:
        """Mark submitter pods whose driver has ended dirty (ticker)."""
        return self.timers.mark_due(at, self.dirty)

    def reconcile(self) -> bool:
        """Advance every dirty submitter pod and interactive driver."""
        while self.drivers_dirty:
            self._sync_driver(self.drivers_dirty.pop())
        busy = False
        while self.dirty:
            key = self.dirty.pop()
            pod = self.cluster.store.get("pods", *key)
            if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                busy = self._submitter(pod) or busy
        return busy

    # -- the submitter ----------------------------------------------------------------

    @staticmethod
    def submitter_env(pod: Obj) -> tuple[str, str] | None:
        """(dashboard address, submission id) of a submitter pod, else None."""
        containers = get_path(pod, "spec", "containers", default=[])
        if not containers:
            return None
        env = {e.get("name"): e.get("value") for e in containers[0].get("env") or []}
        addr, job_id = env.get("RAY_DASHBOARD_ADDRESS"), env.get("RAY_JOB_SUBMISSION_ID")
        if not addr or not job_id:
            return None
        return str(addr), str(job_id)

    def head_of(self, ns: str, address: str) -> str | None:
        """The RayCluster behind a dashboard address ``<svc>.<ns>.svc...:8265``."""
        host = address.split("://")[-1].split(":")[0].split(".")[0]
        svc = self.cluster.store.get("services", ns, host)
        if svc is None:
            return None
        return str(get_path(svc, "metadata", "labels", "ray.io/cluster", default="")) or None

    def head_ready(self, ns: str, cluster: str) -> bool:
        """The head pod of ``ns/cluster`` is Running and Ready (its dashboard answers).
        Found through the RayCluster's ``status.head.podName`` rather than a scan of the
        namespace's pods, which would cost O(pods) per submitter."""
        rc = self.cluster.store.get(RC, ns, cluster)
        name = get_path(rc, "status", "head", "podName")
        pod = self.cluster.store.get("pods", ns, name) if name else None
        if pod is None or (pod["metadata"].get("labels") or {}).get("ray.io/cluster") != cluster:
            return False
        st = pod.get("status") or {}
        return st.get("phase") == "Running" and any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in st.get("conditions") or []
        )

    def _submitter(self, pod: Obj) -> bool:
        st = pod.get("status") or {}
        if st.get("phase") != "Running":
            return False
        found = self.submitter_env(pod)
        if found is None:
            return False
        addr, job_id = found
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        key = (ns, name)
        now = self.cluster.clock.time()
        trace = self.traces.setdefault(key, SubmitterTrace(addr, job_id, now))
        prev = self.following.get(key)
        cluster = prev[0][1] if prev else self.head_of(ns, addr)
        if prev is not None and self.job(ns, prev[0][1], job_id) is None:
            # Following a job whose head went away: `ray job logs --follow` breaks.
            trace.lost = now
            self._exit(pod, 1)
            return True
        if cluster is not None and self._real(ns, cluster) is not None:
            return False  # a real submitter process (``realray.py``) does the work
        if cluster is None or not self.head_ready(ns, cluster):
            trace.waited = True
            self.waiters[key] = (ns, cluster or "")
            return False
        self.waiters.pop(key, None)
        rayjob = self.cluster.store.get(
            RJ, ns, (pod["metadata"].get("labels") or {}).get("ray.io/originated-from-cr-name", "")
        )
        run = self.job(ns, cluster, job_id)
        if run is None:
            run = self.submit(ns, cluster, job_id, rayjob)
            trace.submitted_here = True
        if trace.run is None:
            trace.run, trace.attached = run, now
        run.followers.add(key)
        self.following[key] = ((ns, cluster), job_id)
        ended = run.end_time(now)
        if ended is None:
            self.timers.wake_at(run.end, ns, name)
            if run.checkpointing is not None:
                # A periodic driver reports as its work reaches each step (its
                # follower wakes to do it while the driver runs).
                due = raycheckpoint.periodic(run.checkpointing, now)
                if due is not None:
                    self.timers.wake_at(due, ns, name)
            return False
        self._exit(pod, 0 if run.status(now) == "SUCCEEDED" else 1)
        return True

    def _exit(self, pod: Obj, code: int) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.following.pop(key, None)
        self.cluster.kubelet.terminate(pod, code)
