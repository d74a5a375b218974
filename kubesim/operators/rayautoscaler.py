"""Ray's autoscaler, simulated as the head's ``autoscaler`` sidecar runs it (KubeRay's node
provider, Ray 2.x): every ``AUTOSCALER_UPDATE_INTERVAL_S`` (default 5 s) on the cluster
clock, while the head is Running and Ready, it places the demand of the head's jobs
(``raydemand.py``) on the Ray nodes (head, then connected workers, first fit), launches
worker pods for what does not fit (within each group's min/max, pending pods capped by
``upscalingMode``), removes workers idle for ``idleTimeoutSeconds`` (least recently used
first, down to minReplicas), and writes ``replicas`` and ``scaleStrategy.workersToDelete``
as its patches do, clearing the latter once KubeRay deleted those pods (``safe_to_scale``).
"""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim import quantity
from kubesim.controller import TimerHeap
from kubesim.errors import ApiError
from kubesim.operators import autoscalersidecar as sidecar
from kubesim.operators import raydemand
from kubesim.operators.raydemand import Bundle
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, parse_time

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

RC = "rayclusters.ray.io"
UPDATE_INTERVAL_S = 5.0
DEFAULT_IDLE_TIMEOUT_S = 60.0
# Ray's UPSCALING_INITIAL_NUM_NODES: pending nodes always allowed per node type.
INITIAL_PENDING = 5
# Ray's upscaling_speed per KubeRay upscalingMode (autoscaling_config.py).
SPEEDS = {"Conservative": 1, "Default": 1000, "Aggressive": 1000}
# The first Ray version whose autoscaler is v2 unless told otherwise.
V2_DEFAULT_FROM = (2, 47)
Key = tuple[str, str]


@dataclass
class NodeType:
    """A worker group as the autoscaling config describes it."""

    resources: Bundle
    min_workers: int
    max_workers: int
    idle_timeout: float


@dataclass
class ScalerState:
    """What the autoscaler remembers of one cluster between passes."""

    # Worker pod -> when its Ray node last held a bundle (or was first seen).
    last_used: dict[str, float] = field(default_factory=dict)
    # When the last pass ran (what happened since is replayed for ``last_used``).
    last_pass: float | None = None
    # Worker pod -> when its Ray node joined (the pod turned Ready).
    seen: dict[str, float] = field(default_factory=dict)


def _round_up(value: Any) -> int:
    return math.ceil(quantity.parse(value))


def node_resources(group: dict[str, Any]) -> Bundle:
    """Ray resources of a group's node (``_get_ray_resources_from_group_spec``):
    ``rayStartParams`` first, else the Ray container's limits, else its requests."""
    params = group.get("rayStartParams") or {}
    containers = get_path(group, "template", "spec", "containers", default=[]) or [{}]
    res = containers[0].get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    out: Bundle = {}
    try:
        if "num-cpus" in params:
            out["CPU"] = float(params["num-cpus"])
        elif "cpu" in limits or "cpu" in requests:
            out["CPU"] = _round_up(limits.get("cpu", requests.get("cpu")))
        if "num-gpus" in params:
            out["GPU"] = float(params["num-gpus"])
        else:
            gpus = [v for k, v in [*limits.items(), *requests.items()] if k.endswith("gpu")]
            if gpus and _round_up(gpus[0]) > 0:
                out["GPU"] = _round_up(gpus[0])
        if "memory" in params:
            out["memory"] = float(params["memory"])
        elif "memory" in limits or "memory" in requests:
            out["memory"] = _round_up(limits.get("memory", requests.get("memory")))
        custom = str(params.get("resources") or "").strip().strip("'\"").replace('\\"', '"')
        if custom:
            found = raydemand.bundle(json.loads(custom))
            out.update(found or {})
        tpu = limits.get("google.com/tpu", requests.get("google.com/tpu"))
        if tpu is not None and "TPU" not in out:
            out["TPU"] = _round_up(tpu)
    except (ValueError, quantity.QuantityError):
        pass
    return {k: v for k, v in out.items() if v > 0}


def autoscaler_version(rc: Obj) -> str:
    """``v1`` or ``v2``: ``autoscalerOptions.version``, else the head's
    ``RAY_enable_autoscaler_v2``, else Ray's default for its version (v2 from 2.47)."""
    spec = rc.get("spec") or {}
    version = sidecar.explicit_version(spec)
    if version:
        return version
    containers = get_path(spec, "headGroupSpec", "template", "spec", "containers", default=[])
    first = containers[0] if containers else {}
    env = {e.get("name"): e.get("value") for e in first.get("env") or []}
    flag = str(env.get(sidecar.V2_ENV, "")).lower()
    if flag in ("1", "true", "0", "false"):
        return "v2" if flag in ("1", "true") else "v1"
    try:
        major, minor = (int(x) for x in str(spec.get("rayVersion", "")).split(".")[:2])
    except ValueError:
        return "v1"
    return "v2" if (major, minor) >= V2_DEFAULT_FROM else "v1"


def node_types(rc: Obj) -> dict[str, NodeType]:
    """The worker groups the autoscaler may scale (``numOfHosts`` 1), by group name."""
    spec = rc.get("spec") or {}
    opts = spec.get("autoscalerOptions") or {}
    idle = float(opts.get("idleTimeoutSeconds", DEFAULT_IDLE_TIMEOUT_S))
    v2 = autoscaler_version(rc) == "v2"
    out = {}
    for g in spec.get("workerGroupSpecs") or []:
        if int(g.get("numOfHosts") or 1) != 1:
            continue
        top = g.get("maxReplicas")
        out[str(g.get("groupName", ""))] = NodeType(
            resources=node_resources(g),
            min_workers=int(g.get("minReplicas") or 0),
            max_workers=int(top) if top is not None else 2**31 - 1,
            idle_timeout=float(g["idleTimeoutSeconds"])
            if v2 and g.get("idleTimeoutSeconds") is not None
            else idle,
        )
    return out


def _fits(want: Bundle, free: Bundle) -> bool:
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in want.items())


def _take(want: Bundle, free: Bundle) -> None:
    for k, v in want.items():
        free[k] = free.get(k, 0.0) - v


def _ready(pod: Obj) -> bool:
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or []
    )


def _ready_since(pod: Obj, now: float) -> float:
    """When the pod turned Ready (the kubelet stamps it from the cluster clock)."""
    for c in get_path(pod, "status", "conditions", default=[]) or []:
        if c.get("type") == "Ready" and c.get("lastTransitionTime"):
            return min(now, parse_time(c["lastTransitionTime"]).timestamp())
    return now


def _score(kind: NodeType, want: Bundle) -> tuple[int, float]:
    """Ray's utilization scorer in short: never a GPU node for a bundle without GPUs if
    another fits, then the node type the bundle fills most."""
    res = kind.resources
    wastes_gpu = int(res.get("GPU", 0) > 0 and not want.get("GPU"))
    used = [want.get(k, 0.0) / v for k, v in res.items() if v > 0]
    return wastes_gpu, -(sum(used) / len(used) if used else 0.0)


def _group(pod: Obj) -> str:
    return str((pod["metadata"].get("labels") or {}).get("ray.io/group", ""))


@dataclass
class _View:
    """One pass's reading of a cluster."""

    rc: Obj
    kinds: dict[str, NodeType]
    workers: list[Obj]
    now: float
    held: set[str] = field(default_factory=set)
    kept: Counter[str] = field(default_factory=Counter)

    @property
    def connected(self) -> list[Obj]:
        """Workers whose Ray node has joined (Running and Ready)."""
        return [p for p in self.workers if _ready(p)]


def _scale_down(view: _View, state: ScalerState) -> dict[str, list[str]]:
    """``terminate_nodes_to_enforce_config_constraints``: the most recently used are kept
    for minReplicas (unconnected pods count as newest); above maxReplicas, and idle for
    the idle timeout, go. Multi-host groups are left alone."""
    doomed: dict[str, list[str]] = {}
    kept: Counter[str] = Counter()
    order = sorted(
        view.workers, key=lambda p: -state.last_used.get(p["metadata"]["name"], math.inf)
    )
    for p in order:
        n, g = p["metadata"]["name"], _group(p)
        kind = view.kinds.get(g)
        if kind is None:
            continue
        idle = n in state.last_used and n not in view.held
        if kept[g] < kind.min_workers:
            kept[g] += 1
        elif kept[g] >= kind.max_workers or (
            idle and view.now - state.last_used[n] >= kind.idle_timeout
        ):
            doomed.setdefault(g, []).append(n)
        else:
            kept[g] += 1
    view.kept = kept
    return doomed


def _scale_up(view: _View, unplaced: list[Bundle]) -> Counter[str]:
    """``get_nodes_to_launch``: minReplicas first, then nodes for the demand that fits on
    no pending pod, each on the best node type with room under maxReplicas; the pending
    pods of a type capped at max(5, upscaling_speed x its running pods)."""
    kinds, kept = view.kinds, view.kept
    launch: Counter[str] = Counter()
    for_min: Counter[str] = Counter()
    pending = [p for p in view.workers if not _ready(p) and _group(p) in kinds]
    room: list[Bundle] = [dict(kinds[_group(p)].resources) for p in pending]
    for g, kind in kinds.items():
        short = kind.min_workers - kept[g]
        if short > 0:
            for_min[g] = short
            launch[g] += short
            room += [dict(kind.resources) for _ in range(short)]
    for want in unplaced:
        spot = next((r for r in room if _fits(want, r)), None)
        if spot is not None:
            _take(want, spot)
            continue
        options = [
            g
            for g, kind in kinds.items()
            if _fits(want, kind.resources) and kept[g] + launch[g] < kind.max_workers
        ]
        if not options:
            continue  # infeasible: Ray warns and waits
        g = min(options, key=lambda x: _score(kinds[x], want))
        launch[g] += 1
        fresh = dict(kinds[g].resources)
        _take(want, fresh)
        room.append(fresh)
    mode = get_path(view.rc, "spec", "autoscalerOptions", "upscalingMode") or "Default"
    speed = SPEEDS.get(str(mode), 1000)
    for g in list(launch):
        running = sum(1 for p in view.connected if _group(p) == g)
        waiting = sum(1 for p in pending if _group(p) == g)
        allowed = max(INITIAL_PENDING, int(speed * max(running, 1)))
        launch[g] = max(0, min(max(allowed - waiting, for_min[g]), launch[g]))
    return launch


class RayAutoscaler:
    """The autoscaler sidecars of every RayCluster with in-tree autoscaling."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget every cluster's memory (the sidecars restart with their heads)."""
        self.states: dict[Key, ScalerState] = {}
        self.dirty: set[Key] = set()
        self.next_pass: dict[Key, float] = {}
        self.timers = TimerHeap()

    # -- controller protocol ------------------------------------------------------------

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """A head pod that changes may start (or stop) a sidecar; a RayCluster that goes
        takes its sidecar's memory with it."""
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.key == RC and new is None:
            key = (meta["namespace"], meta["name"])
            self.states.pop(key, None)
            self.next_pass.pop(key, None)
            self.dirty.discard(key)
        elif rt.kind == "Pod":
            labels = meta.get("labels") or {}
            if labels.get("ray.io/node-type") == "head":
                key = (meta["namespace"], labels.get("ray.io/cluster", ""))
                if key not in self.next_pass:
                    self.dirty.add(key)

    def wake_due(self, at: float) -> bool:
        """Mark the clusters whose next pass is due (ticker)."""
        woke = False
        for when, ns, name in self.timers.pop_due(at):
            if self.next_pass.get((ns, name)) == when:
                self.dirty.add((ns, name))
                woke = True
        return woke

    def reconcile(self) -> bool:
        """Run the due passes; True when a RayCluster was written."""
        busy = False
        while self.dirty:
            busy = self._pass(*self.dirty.pop()) or busy
        return busy

    # -- one pass -----------------------------------------------------------------------

    def _head(self, rc: Obj) -> Obj | None:
        """The head pod when its sidecar runs: Running, Ready, with the container."""
        name = get_path(rc, "status", "head", "podName")
        pod = self.cluster.store.get("pods", rc["metadata"]["namespace"], name) if name else None
        if pod is None or pod["metadata"].get("deletionTimestamp") or not _ready(pod):
            return None
        names = [c.get("name") for c in get_path(pod, "spec", "containers", default=[])]
        return pod if sidecar.CONTAINER in names else None

    def _pass(self, ns: str, name: str) -> bool:
        key = (ns, name)
        rc = self.cluster.store.get(RC, ns, name)
        spec = (rc or {}).get("spec") or {}
        head = self._head(rc) if rc is not None else None
        if (
            rc is None
            or head is None
            or not sidecar.enabled(spec)
            or spec.get("suspend")
            or sidecar.spec_error(spec) is not None
        ):
            # No sidecar runs: the next head that starts one brings a fresh process.
            self.states.pop(key, None)
            self.next_pass.pop(key, None)
            return False
        now = self.cluster.clock.time()
        env = {
            e.get("name"): e.get("value")
            for c in get_path(head, "spec", "containers", default=[])
            if c.get("name") == sidecar.CONTAINER
            for e in c.get("env") or []
        }
        try:
            interval = max(0.1, float(env.get("AUTOSCALER_UPDATE_INTERVAL_S") or UPDATE_INTERVAL_S))
        except ValueError:
            interval = UPDATE_INTERVAL_S
        self.next_pass[key] = now + interval
        self.timers.wake_at(now + interval, ns, name)
        return self._update(rc, self.states.setdefault(key, ScalerState()), now)

    def _demand(self, rc: Obj, now: float) -> list[Bundle]:
        """The bundles of every job alive on the head: the driver's entrypoint bundle
        until it ends, its tasks' bundles while it runs; the interactive driver's
        ``kubesim.io/ray-driver-demand`` while it is connected."""
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        out: list[Bundle] = []
        for run in list(self.cluster.rayruntime.heads.get((ns, name), {}).values()):
            if run.submitted > now or run.end_time(now) is not None:
                continue
            if run.kind == "DRIVER":
                ann = get_path(rc, "metadata", "annotations", raydemand.ANN_DRIVER_DEMAND)
                out += raydemand.parse_bundles(ann)
                continue
            if run.entrypoint_resources:
                out.append(run.entrypoint_resources)
            if run.status(now) == "RUNNING":
                out += run.demand
        # Ray Serve's replica actors (``rayserve.py``), placed or waiting.
        return out + self.cluster.rayserve.demand(ns, name)

    def _update(self, rc: Obj, state: ScalerState, now: float) -> bool:
        spec = rc["spec"]
        groups = spec.get("workerGroupSpecs") or []
        workers = [
            p
            for p in self._pods(rc)
            if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"
        ]
        names = {p["metadata"]["name"] for p in workers}
        new_spec = copy.deepcopy(spec)
        changed = False
        # safe_to_scale: wait for KubeRay to delete the workers named last time, then clear.
        for i, g in enumerate(groups):
            doomed = get_path(g, "scaleStrategy", "workersToDelete", default=[]) or []
            if any(w in names for w in doomed):
                return False
            if doomed:
                new_spec["workerGroupSpecs"][i]["scaleStrategy"] = {"workersToDelete": []}
                changed = True
        workers.sort(key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))
        view = _View(rc, node_types(rc), workers, now)
        unplaced = self._place(view, state)
        doomed_by_group = _scale_down(view, state)
        launch = _scale_up(view, unplaced)
        if any(launch.values()) or doomed_by_group:
            counts = Counter(_group(p) for p in workers)
            for i, g in enumerate(groups):
                gname = str(g.get("groupName", ""))
                if gname not in view.kinds and gname not in doomed_by_group:
                    continue
                target = counts[gname] - len(doomed_by_group.get(gname, [])) + launch[gname]
                top = g.get("maxReplicas")
                if top is not None:
                    target = min(target, int(top))
                if target != g.get("replicas", 1):
                    new_spec["workerGroupSpecs"][i]["replicas"] = target
                    changed = True
                if doomed_by_group.get(gname):
                    new_spec["workerGroupSpecs"][i]["scaleStrategy"] = {
                        "workersToDelete": doomed_by_group[gname]
                    }
                    changed = True
        return self._write(rc, new_spec) if changed else False

    def _assign(
        self, rc: Obj, nodes: list[tuple[str, Bundle]], at: float
    ) -> tuple[set[str], list[Bundle]]:
        """Place the demand at ``at`` on the head, then ``nodes`` in order (first fit):
        the workers that hold a bundle, and the bundles that fit nowhere."""
        head_free = node_resources(rc["spec"].get("headGroupSpec") or {})
        free = {n: dict(res) for n, res in nodes}
        used: set[str] = set()
        unplaced: list[Bundle] = []
        for want in self._demand(rc, at):
            if _fits(want, head_free):
                _take(want, head_free)
                continue
            spot = next((n for n, room in free.items() if _fits(want, room)), None)
            if spot is None:
                unplaced.append(want)
            else:
                _take(want, free[spot])
                used.add(spot)
        return used, unplaced

    def _place(self, view: _View, state: ScalerState) -> list[Bundle]:
        """Place the demand on the Ray nodes (head first, then the connected workers in
        the order they joined, first fit); note when each worker was last used, replaying
        what changed since the last pass (jobs starting and ending, workers joining) so
        that a late pass judges idleness as a punctual one would; return what did not fit."""
        rc, now = view.rc, view.now
        joined = [p for p in view.connected if _group(p) in view.kinds]
        for p in joined:
            state.seen.setdefault(p["metadata"]["name"], _ready_since(p, now))
        joined.sort(key=lambda p: (state.seen[p["metadata"]["name"]], p["metadata"]["name"]))
        nodes = [(p["metadata"]["name"], view.kinds[_group(p)].resources) for p in joined]
        prev = state.last_pass
        if prev is not None and prev < now:
            meta = rc["metadata"]
            runs = self.cluster.rayruntime.heads.get((meta["namespace"], meta["name"]), {})
            marks = {prev} | {state.seen[n] for n, _ in nodes}
            for run in runs.values():
                marks |= {run.start, run.end, run.stopped or run.end}
            times = sorted(t for t in marks if prev <= t < now)
            for a, b in zip(times, [*times[1:], now], strict=True):
                ready = [(n, res) for n, res in nodes if state.seen[n] <= a]
                for n in self._assign(rc, ready, a)[0]:
                    state.last_used[n] = max(state.last_used.get(n, a), b)
        used, unplaced = self._assign(rc, nodes, now)
        names = {n for n, _ in nodes}
        for n in names:
            state.last_used[n] = now if n in used else state.last_used.get(n, state.seen[n])
        state.last_used = {n: t for n, t in state.last_used.items() if n in names}
        state.seen = {n: t for n, t in state.seen.items() if n in names}
        state.last_pass = now
        view.held = used
        return unplaced

    def _pods(self, rc: Obj) -> list[Obj]:
        out = []
        for k, ns, name in self.cluster.store.dependents(rc["metadata"]["uid"]):
            if k == "pods":
                pod = self.cluster.store.get(k, ns, name)
                if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                    out.append(pod)
        return out

    def _write(self, rc: Obj, spec: dict[str, Any]) -> bool:
        """The autoscaler's JSON patch of the RayCluster, through what the API server's
        admission would do with it (Kueue's webhook may refuse it: the next pass retries)."""
        rt = self.cluster.rt(RC)
        new = copy.deepcopy(rc)
        new["spec"] = spec
        new["metadata"]["generation"] = int(rc["metadata"].get("generation", 1)) + 1
        try:
            self.cluster.kueue.validate(rt, new)
        except ApiError:
            return False
        self.cluster.update_object(rt, new, rc)
        return True
