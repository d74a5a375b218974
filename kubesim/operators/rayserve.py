"""Ray Serve on a simulated Ray head: the applications a Serve config declares, their
deployments and replicas, placed on the cluster's Ray nodes, and Serve's autoscaling.

A config (``PUT /api/serve/applications/``, ``rayserve_api.py``) deploys every application;
it is ``RUNNING`` once its deploy time has passed and every replica is placed, first fit on
the head then the Ready workers. A replica that fits nowhere is demand for the Ray
autoscaler (:meth:`RayServe.demand`). Autoscaling follows the requests the Serve proxy took
plus the ``kubesim.io/serve-load`` knob. kubesim/README.md (*Ray Serve (simulated)*) says
how placement, the knobs and autoscaling act, and what is simplified.
"""

from __future__ import annotations

import heapq
import json
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.operators import raydemand
from kubesim.operators.rayautoscaler import node_resources
from kubesim.operators.raydemand import Bundle
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, random_hex

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

RC = "rayclusters.ray.io"
ANN_DEPLOY_SECONDS = "kubesim.io/serve-deploy-seconds"
ANN_LOAD = "kubesim.io/serve-load"
# How long a request through the simulated proxy counts as ongoing (seconds).
REQUEST_SECONDS = 1.0
Key = tuple[str, str]


@dataclass
class Replica:
    """One replica actor: where it runs (a pod name) once placed."""

    replica_id: str
    node: str | None = None
    started: float = 0.0


@dataclass
class Deployment:
    """One deployment of an application."""

    name: str
    config: dict[str, Any]
    actor: Bundle
    target: int
    autoscaling: dict[str, Any] | None
    replicas: list[Replica] = field(default_factory=list)
    wanted: int | None = None
    wanted_since: float = 0.0

    def limits(self) -> tuple[int, int]:
        """min and max replicas of an autoscaling deployment."""
        cfg = self.autoscaling or {}
        lo = int(cfg.get("min_replicas", 1))
        return lo, max(lo, int(cfg.get("max_replicas", 100 if cfg.get("_auto") else 1)))


@dataclass
class Application:
    """One Serve application as deployed from a config."""

    name: str
    route_prefix: str
    config: dict[str, Any]
    deployed_at: float
    ready_at: float
    deployments: dict[str, Deployment]
    requests: deque[float] = field(default_factory=deque)
    # Its route is in the proxies' route table: from the end of its first deploy on (an
    # in-place update keeps it; Ray registers the endpoint once the app is built).
    routed: bool = False

    def is_routed(self, now: float) -> bool:
        """Whether the proxies route to it at ``now``."""
        return self.routed or self.ready_at <= now


@dataclass
class ServeInstance:
    """Serve on one head: its applications and options."""

    apps: dict[str, Application] = field(default_factory=dict)
    http_options: dict[str, Any] = field(default_factory=dict)
    proxy_location: str = "EveryNode"
    target_capacity: float | None = None
    # Ray's ProxyRouter._route_table_populated: once any route was published, for good.
    routes_populated: bool = False

    def populated(self, now: float) -> bool:
        """Whether the proxies' route table was ever published (by ``now``)."""
        return self.routes_populated or any(a.is_routed(now) for a in self.apps.values())


def actor_bundle(options: dict[str, Any]) -> Bundle:
    """A replica's Ray resources from ``ray_actor_options`` (1 CPU unless told)."""
    found = raydemand.entrypoint_bundle(
        options.get("num_cpus", 1),
        options.get("num_gpus"),
        options.get("memory"),
        options.get("resources"),
    )
    return found


def _deployment(entry: dict[str, Any]) -> Deployment:
    num = entry.get("num_replicas", 1)
    auto = entry.get("autoscaling_config")
    if num == "auto":
        auto = {"_auto": True, "target_ongoing_requests": 2, **(auto or {})}
    if isinstance(auto, dict):
        lo = int(auto.get("min_replicas", 1))
        target = int(auto.get("initial_replicas", lo))
    else:
        auto, target = None, int(num if isinstance(num, int) else 1)
    return Deployment(
        name=str(entry.get("name", "")),
        config=entry,
        actor=actor_bundle(entry.get("ray_actor_options") or {}),
        target=max(0, target),
        autoscaling=auto,
    )


def parse_config(body: Any) -> tuple[ServeInstance | None, str]:
    """A ServeDeploySchema (the JSON of serveConfigV2) as an instance; (None, why)."""
    if not isinstance(body, dict) or not isinstance(body.get("applications"), list):
        return None, "'applications' field is required and must be a list"
    inst = ServeInstance(
        http_options=dict(body.get("http_options") or {}),
        proxy_location=str(body.get("proxy_location") or "EveryNode"),
        target_capacity=body.get("target_capacity"),
    )
    prefixes: set[str] = set()
    for i, app in enumerate(body["applications"]):
        if not isinstance(app, dict) or not app.get("import_path"):
            return None, f"applications.{i}.import_path: field required"
        name = str(app.get("name") or "default")
        if name in inst.apps:
            return None, f"Found duplicate application names: ['{name}']"
        prefix = str(app.get("route_prefix", "/"))
        if prefix in prefixes:
            return None, f"Found duplicate route prefixes: ['{prefix}']"
        prefixes.add(prefix)
        entries = [d for d in app.get("deployments") or [] if isinstance(d, dict)]
        if not entries:
            tail = str(app["import_path"]).replace(":", ".").rsplit(".", 1)[-1]
            entries = [{"name": tail}]
        deps = {}
        for entry in entries:
            dep = _deployment(entry)
            deps[dep.name] = dep
        inst.apps[name] = Application(name, prefix, app, 0.0, 0.0, deps)
    return inst, ""


class RayServe:
    """Serve instances of every head (forgotten when the head pod goes)."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget every instance (Serve lives in the head; no GCS fault tolerance)."""
        self.instances: dict[Key, ServeInstance] = {}
        # What each instance's statuses looked like when last stepped.
        self.seen: dict[Key, str] = {}
        self.dirty: set[Key] = set()
        self.timers: list[tuple[float, str, str]] = []

    # -- controller protocol ------------------------------------------------------------

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """A head pod that goes takes Serve with it; pods of a cluster with Serve may
        change where its replicas fit."""
        if not self.instances:
            return
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.kind == "Pod":
            labels = meta.get("labels") or {}
            key = (meta["namespace"], labels.get("ray.io/cluster", ""))
            if key not in self.instances:
                return
            if labels.get("ray.io/node-type") == "head" and (
                new is None or meta.get("deletionTimestamp")
            ):
                self.instances.pop(key, None)
                self.cluster.rayservice.serve_changed(*key)
                return
            self.dirty.add(key)
        elif rt.key == RC:
            key = (meta["namespace"], meta["name"])
            if new is None:
                self.instances.pop(key, None)
            elif key in self.instances and old is not new:
                # Its annotations carry the load knob and the deploy time.
                self.dirty.add(key)

    def wake_due(self, at: float) -> bool:
        """Mark instances whose timer is due (deploys finishing, autoscaling delays)."""
        woke = False
        while self.timers and self.timers[0][0] <= at:
            _, ns, name = heapq.heappop(self.timers)
            if (ns, name) in self.instances:
                self.dirty.add((ns, name))
                woke = True
        return woke

    def reconcile(self) -> bool:
        """Place replicas and autoscale; the RayService of a changed instance is told."""
        while self.dirty:
            key = self.dirty.pop()
            if key in self.instances and self.step(*key):
                self.cluster.rayservice.serve_changed(*key)
        return False

    # -- the instance -------------------------------------------------------------------

    def _rc(self, ns: str, name: str) -> Obj | None:
        return self.cluster.store.get(RC, ns, name)

    def deploy(self, ns: str, name: str, inst: ServeInstance) -> None:
        """Apply a config: applications it drops are deleted, new or changed ones deploy
        again (replicas of an unchanged deployment are kept)."""
        now = self.cluster.clock.time()
        rc = self._rc(ns, name)
        ann = get_path(rc, "metadata", "annotations", default={}) or {}
        try:
            delay = max(0.0, float(ann.get(ANN_DEPLOY_SECONDS, 0)))
        except ValueError:
            delay = 0.0
        old = self.instances.get((ns, name))
        for app in inst.apps.values():
            prev = old.apps.get(app.name) if old else None
            if prev is not None and prev.config == app.config:
                inst.apps[app.name] = prev
                continue
            app.deployed_at, app.ready_at = now, now + delay
            app.routed = prev is not None and prev.routed and prev.route_prefix == app.route_prefix
            if delay:
                heapq.heappush(self.timers, (app.ready_at, ns, name))
            for dep in app.deployments.values():
                kept = prev.deployments.get(dep.name) if prev else None
                if kept is not None and kept.actor == dep.actor:
                    dep.replicas = kept.replicas
        inst.routes_populated = old is not None and old.routes_populated
        self.instances[(ns, name)] = inst
        self.step(ns, name)

    def shutdown(self, ns: str, name: str) -> None:
        """``DELETE /api/serve/applications/``: Serve shut down."""
        self.instances.pop((ns, name), None)

    def nodes(self, ns: str, name: str) -> list[tuple[str, Bundle]]:
        """The Ray nodes (pod name, resources): the head, then Ready workers by age."""
        rc = self._rc(ns, name)
        if rc is None:
            return []
        groups = {
            str(g.get("groupName", "")): node_resources(g)
            for g in rc["spec"].get("workerGroupSpecs") or []
        }
        head: list[tuple[str, Bundle]] = []
        workers: list[tuple[str, str, Bundle]] = []
        for k, pns, pname in self.cluster.store.dependents(rc["metadata"]["uid"]):
            pod = self.cluster.store.get(k, pns, pname) if k == "pods" else None
            if pod is None or pod["metadata"].get("deletionTimestamp") or not _ready(pod):
                continue
            labels = pod["metadata"].get("labels") or {}
            if labels.get("ray.io/node-type") == "head":
                head = [(pname, node_resources(rc["spec"].get("headGroupSpec") or {}))]
            else:
                res = groups.get(labels.get("ray.io/group", ""), {})
                workers.append((pod["metadata"]["creationTimestamp"], pname, res))
        workers.sort()
        return head + [(n, r) for _, n, r in workers]

    def step(self, ns: str, name: str) -> bool:
        """Autoscale, then place replicas; whether any status changed."""
        inst = self.instances.get((ns, name))
        if inst is None:
            return False
        before = self.seen.get((ns, name))
        now = self.cluster.clock.time()
        rc = self._rc(ns, name)
        load = _load(get_path(rc, "metadata", "annotations", ANN_LOAD))
        for app in inst.apps.values():
            while app.requests and app.requests[0] < now - 600:
                app.requests.popleft()
            for dep in app.deployments.values():
                if dep.autoscaling is not None:
                    self._autoscale(ns, name, app, dep, load, now)
        for app in inst.apps.values():
            app.routed = app.is_routed(now)
        inst.routes_populated = inst.populated(now)
        self._place(ns, name, inst, now)
        after = self.seen[(ns, name)] = self.fingerprint(inst)
        return after != before

    def _autoscale(
        self,
        ns: str,
        name: str,
        app: Application,
        dep: Deployment,
        load: dict[str, float],
        now: float,
    ) -> None:
        cfg = dep.autoscaling or {}
        window = float(cfg.get("look_back_period_s", 30))
        recent = sum(1 for t in app.requests if t > now - window)
        ingress = list(app.deployments)[-1] == dep.name
        ongoing = (recent * REQUEST_SECONDS / window if ingress else 0.0) + load.get(dep.name, 0.0)
        target = float(cfg.get("target_ongoing_requests", 2)) or 2.0
        lo, hi = dep.limits()
        want = max(lo, min(hi, math.ceil(ongoing / target - 1e-9)))
        if want == dep.target:
            dep.wanted = None
            return
        # Serve's delays count how long the decision has pointed the same way.
        if dep.wanted is None or (dep.wanted > dep.target) != (want > dep.target):
            dep.wanted_since = now
        dep.wanted = want
        delay = float(
            cfg.get(
                "upscale_delay_s" if want > dep.target else "downscale_delay_s",
                30 if want > dep.target else 600,
            )
        )
        if now - dep.wanted_since >= delay:
            dep.target, dep.wanted = want, None
        else:
            heapq.heappush(self.timers, (dep.wanted_since + delay, ns, name))
        if recent:
            # The window moves on: look again when the oldest counted request leaves it.
            oldest = next(t for t in app.requests if t > now - window)
            heapq.heappush(self.timers, (oldest + window + 0.001, ns, name))

    def _place(self, ns: str, name: str, inst: ServeInstance, now: float) -> None:
        nodes = self.nodes(ns, name)
        free = {n: dict(r) for n, r in nodes}
        placed: list[tuple[Deployment, Replica]] = []
        waiting: list[tuple[Deployment, Replica]] = []
        for app in inst.apps.values():
            for dep in app.deployments.values():
                capacity = inst.target_capacity
                goal = dep.target if capacity is None else math.ceil(dep.target * capacity / 100)
                while len(dep.replicas) < goal:
                    dep.replicas.append(Replica(random_hex(8)))
                # Scaling down stops the newest replicas first.
                del dep.replicas[goal:]
                for r in dep.replicas:
                    if r.node in free and _fits(dep.actor, free[r.node]):
                        _take(dep.actor, free[r.node])
                        placed.append((dep, r))
                    else:
                        r.node = None
                        waiting.append((dep, r))
        for dep, r in waiting:
            spot = next((n for n, room in free.items() if _fits(dep.actor, room)), None)
            if spot is not None:
                _take(dep.actor, free[spot])
                r.node, r.started = spot, now

    def fingerprint(self, inst: ServeInstance) -> str:
        """What the statuses depend on, to tell whether a step changed anything."""
        now = self.cluster.clock.time()
        return json.dumps(
            [
                (a.name, a.ready_at <= now, d.name, d.target, [r.node for r in d.replicas])
                for a in inst.apps.values()
                for d in a.deployments.values()
            ]
        )

    # -- what others read ---------------------------------------------------------------

    def statuses(self, ns: str, name: str) -> dict[str, dict[str, Any]] | None:
        """Each application's status, message and deployments' statuses (Ray's names),
        None when Serve does not run on the head."""
        inst = self.instances.get((ns, name))
        if inst is None:
            return None
        now = self.cluster.clock.time()
        out = {}
        for app in inst.apps.values():
            deps = {}
            for dep in app.deployments.values():
                running = sum(1 for r in dep.replicas if r.node)
                if app.ready_at <= now and running == len(dep.replicas):
                    deps[dep.name] = {"status": "HEALTHY", "message": ""}
                elif running < len(dep.replicas) and app.ready_at <= now:
                    deps[dep.name] = {
                        "status": "UPDATING",
                        "message": (
                            f"Deployment '{dep.name}' in application '{app.name}' has "
                            f"{len(dep.replicas) - running} replicas that have taken more than "
                            "30s to be scheduled. This may be due to waiting for the cluster "
                            "to auto-scale or for a runtime environment to be installed. "
                            f"Resources required for each replica: {_ray_res(dep.actor)}."
                        ),
                    }
                else:
                    deps[dep.name] = {"status": "UPDATING", "message": ""}
            ok = all(d["status"] == "HEALTHY" for d in deps.values())
            out[app.name] = {
                "status": "RUNNING" if ok else "DEPLOYING",
                "message": ""
                if ok
                else "Deploying app. Waiting for deployments to become HEALTHY.",
                "deployments": deps,
            }
        return out

    def demand(self, ns: str, name: str) -> list[Bundle]:
        """Every replica's bundle (placed or not): what the Ray autoscaler must fit."""
        inst = self.instances.get((ns, name))
        if inst is None:
            return []
        return [
            dict(dep.actor)
            for app in inst.apps.values()
            for dep in app.deployments.values()
            for _ in dep.replicas
            if dep.actor
        ]

    def route(self, ns: str, name: str, path: str) -> Application | None:
        """The routed application whose route prefix is the longest prefix of ``path``."""
        inst = self.instances.get((ns, name))
        if inst is None:
            return None
        now = self.cluster.clock.time()
        best: Application | None = None
        for app in inst.apps.values():
            if not app.is_routed(now):
                continue
            p = app.route_prefix.rstrip("/")
            if (path == p or path.startswith(p + "/") or not p) and (
                best is None or len(p) > len(best.route_prefix.rstrip("/"))
            ):
                best = app
        return best

    def record_request(self, ns: str, name: str, app: Application) -> None:
        """A request through the proxy: load for the app's ingress deployment."""
        now = self.cluster.clock.time()
        app.requests.append(now)
        if any(d.autoscaling for d in app.deployments.values()):
            # Looked at by the next tick (a proxied request settles nothing itself).
            heapq.heappush(self.timers, (now, ns, name))


def _ready(pod: Obj) -> bool:
    return get_path(pod, "status", "phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in get_path(pod, "status", "conditions", default=[])
    )


def _fits(want: Bundle, free: Bundle) -> bool:
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in want.items())


def _take(want: Bundle, free: Bundle) -> None:
    for k, v in want.items():
        free[k] = free.get(k, 0.0) - v


def _ray_res(bundle: Bundle) -> dict[str, float]:
    return {k: float(v) for k, v in sorted(bundle.items())}


def _load(text: Any) -> dict[str, float]:
    """``kubesim.io/serve-load``: deployment name -> ongoing requests ({} if malformed)."""
    try:
        raw = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    out = {}
    for k, v in raw.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
            out[str(k)] = float(v)
    return out
