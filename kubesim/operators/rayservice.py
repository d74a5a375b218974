"""An emulation of KubeRay's RayService controller (ray.io/v1, KubeRay v1.7 behaviour).

Each pass does what ``rayservice_controller.go`` does: RayClusters of the RayService that are
neither active nor pending are deleted ``rayClusterDeletionDelaySeconds`` (default 60)
after they were first found so (at once when the RayService is deleted; then the finalizer
``ray.io/rayservice-finalizer`` goes); the spec is validated (``ValidationFailed``); a
pending RayCluster ``<name>-raycluster-<5 chars>`` is created when the status names one
(``rayservice_upgrade.py`` decides when: first start, or a changed ``rayClusterConfig``
under ``NewCluster``/``NewClusterWithIncrementalUpgrade``); once a cluster's head is Ready
``serveConfigV2`` is applied through its dashboard's Serve API (``PUT
/api/serve/applications/``, again when the config changes: an in-place update) and
the applications' statuses read back; a cluster is ready when every application is
``RUNNING``. The head service ``<name>-head-svc`` and serve service ``<name>-serve-svc``
(selector ``ray.io/cluster`` and ``ray.io/serve: "true"``, the head container's ``serve``
ports, or ``spec.serveService``) point at the ready cluster — the pending one as soon as it
is ready, which promotes it to active. The head pod's ``ray.io/serve`` label follows its
Serve proxy's ``/-/healthz`` (``false`` with ``excludeHeadPodFromServeSvc``). Status:
``activeServiceStatus``/``pendingServiceStatus`` (``rayClusterName``,
``applicationStatuses``, ``rayClusterStatus``, and for incremental upgrades
``targetCapacity``, ``trafficRoutedPercent``, ``lastTrafficMigratedTime``),
``numServeEndpoints`` (Ready pods behind the serve service whose node runs a Serve
proxy), conditions ``Ready`` and ``UpgradeInProgress`` with KubeRay's reasons,
``serviceStatus`` ``Running`` when Ready, ``observedGeneration``, ``lastUpdateTime``.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

import yaml

from kubesim.controller import TimerHeap
from kubesim.errors import ApiError
from kubesim.operators import rayserve_api
from kubesim.operators import rayservice_status as rss
from kubesim.operators import rayservice_upgrade as upg
from kubesim.operators.realserve import RealServe
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, owner_ref, parse_time, stamp

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

KEY = "rayservices.ray.io"
RC = "rayclusters.ray.io"
FINALIZER = "ray.io/rayservice-finalizer"
COMPONENT = "rayservice-controller"
DEFAULT_DELETION_DELAY = 60.0
SERVE_LABEL = rss.SERVE_LABEL
Key = tuple[str, str]


class RayServiceController:
    """Reconciles RayServices into RayClusters, Serve applications, services and status.
    Costs nothing while no RayService exists: it only looks at its own kind and what
    RayServices own."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.real = RealServe(cluster)  # Serve on heads that run real Ray
        self.reset()

    def reset(self) -> None:
        """Forget pending work, timers, the Serve config cache and deletion times."""
        self.dirty: set[Key] = set()
        self.timers = TimerHeap()
        self.cache: dict[tuple[str, str, str], str] = {}
        self.last_put: dict[tuple[str, str, str], float] = {}
        self.doomed: dict[tuple[str, str], float] = {}
        self.owners: dict[Key, str] = {}

    # -- controller protocol --------------------------------------------------------------

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """RayService writes by others, and writes of its RayClusters (and their pods)."""
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.key == KEY:
            key = (meta["namespace"], meta["name"])
            if new is None:
                self.dirty.discard(key)
            elif old is not new:
                self.dirty.add(key)
            return
        if not self.owners and rt.key != RC:
            return
        if rt.key == RC:
            for o in meta.get("ownerReferences") or []:
                if o.get("kind") == "RayService" and o.get("controller"):
                    self.owners[(meta["namespace"], meta["name"])] = o["name"]
                    self.dirty.add((meta["namespace"], o["name"]))
            if new is None:
                self.owners.pop((meta["namespace"], meta["name"]), None)
        elif rt.kind == "Pod":
            rc = (meta.get("labels") or {}).get("ray.io/cluster", "")
            owner = self.owners.get((meta["namespace"], rc))
            if owner is not None:
                self.dirty.add((meta["namespace"], owner))

    def serve_changed(self, ns: str, rc: str) -> None:
        """Serve on RayCluster ``ns/rc`` changed (the controller polls it every 2 s)."""
        owner = self.owners.get((ns, rc))
        if owner is not None:
            self.dirty.add((ns, owner))

    def wake_at(self, at: float, ns: str, name: str) -> None:
        """Reconcile ``ns/name`` again at ``at`` (cluster clock)."""
        self.timers.wake_at(at, ns, name)

    def wake_due(self, at: float) -> bool:
        """Mark RayServices whose timer is due dirty."""
        return self.timers.mark_due(at, self.dirty)

    def reconcile(self) -> bool:
        """Reconcile every dirty RayService; True when anything was written."""
        busy = False
        while self.dirty:
            ns, name = self.dirty.pop()
            rs = self.cluster.store.get(KEY, ns, name)
            if rs is None:
                continue
            # KubeRay requeues after each pass; passes run until nothing moves.
            for _ in range(8):
                if not self._pass(rs):
                    break
                busy = True
        return busy

    # -- one pass -----------------------------------------------------------------------

    def _event(self, rs: Obj, etype: str, reason: str, message: str) -> None:
        self.cluster.record_event(rs, etype, reason, message, COMPONENT)

    def _clusters(self, rs: Obj) -> list[Obj]:
        out = []
        for k, ns, name in self.cluster.store.dependents(rs["metadata"]["uid"]):
            rc = self.cluster.store.get(k, ns, name) if k == RC else None
            if rc is not None and not rc["metadata"].get("deletionTimestamp"):
                out.append(rc)
        return out

    def _cleanup(self, rs: Obj, st: dict[str, Any], deleting: bool) -> tuple[bool, bool]:
        """``cleanUpRayClusterInstance``: (clusters left to clean, anything deleted)."""
        ns = rs["metadata"]["namespace"]
        keep = {
            get_path(st, "activeServiceStatus", "rayClusterName"),
            get_path(st, "pendingServiceStatus", "rayClusterName"),
        }
        delay = rs["spec"].get("rayClusterDeletionDelaySeconds")
        delay = DEFAULT_DELETION_DELAY if delay is None else max(0.0, float(delay))
        now = self.cluster.clock.time()
        left = deleted = False
        for rc in self._clusters(rs):
            name = rc["metadata"]["name"]
            if not deleting and name in keep:
                continue
            left = True
            due = self.doomed.get((ns, name))
            if deleting or (due is not None and now >= due):
                self.cluster.delete_object(self.cluster.rt(RC), rc)
                self.doomed.pop((ns, name), None)
                self._event(
                    rs, "Normal", "DeletedRayCluster", f"Deleted the RayCluster {ns}/{name}"
                )
                deleted = True
            elif due is None:
                self.doomed[(ns, name)] = now + delay
                self.wake_at(now + delay, ns, rs["metadata"]["name"])
        return left, deleted

    # Named exception to ruff's C901 (max-complexity 12): KubeRay's Reconcile, step by step.
    def _pass(self, rs: Obj) -> bool:  # noqa: C901
        """One pass of KubeRay's Reconcile; True when anything was written."""
        meta, spec = rs["metadata"], rs.get("spec") or {}
        if spec.get("managedBy") not in (None, "", "ray.io/kuberay-operator"):
            return False
        rt = self.cluster.rt(KEY)
        old = copy.deepcopy(rs.get("status") or {})
        st: dict[str, Any] = copy.deepcopy(old)
        deleting = bool(meta.get("deletionTimestamp"))
        left, wrote = self._cleanup(rs, st, deleting)
        if deleting:
            if not left and FINALIZER in (meta.get("finalizers") or []):
                meta["finalizers"] = [f for f in meta["finalizers"] if f != FINALIZER]
                self.cluster.update_object(rt, rs)
                return True
            return wrote
        if FINALIZER not in (meta.get("finalizers") or []):
            meta.setdefault("finalizers", []).append(FINALIZER)
            self.cluster.update_object(rt, rs)
            return True
        gen = int(meta.get("generation", 1))
        at = stamp(self.cluster.clock.time())
        problem = upg.validate(rs)
        if problem is not None:
            if not any(c.get("reason") == "ValidationFailed" for c in st.get("conditions") or []):
                self._event(
                    rs,
                    "Warning",
                    "InvalidRayServiceSpec",
                    f"{meta['namespace']}/{meta['name']}: {problem}",
                )
            rss.set_condition(st, "Ready", "False", "ValidationFailed", problem, gen, at)
            return self._write(rs, old, st) or wrote

        active, pending = self._reconcile_clusters(rs, st)
        inc = upg.incremental(rs)
        upgrading = rss.is_true(st, "UpgradeInProgress")
        for rc in (active, pending):
            if rc is not None:
                self._head_label(rs, rc)
        pending_ready, active_ready = False, False
        pending_apps: dict[str, Any] | None = None
        active_apps: dict[str, Any] | None = None
        if pending is not None:
            pending_ready, pending_apps = self._serve(rs, pending, st, upgrading)
        # The active cluster's Serve is reconciled when no upgrade is under way, and
        # alongside the pending one during an incremental upgrade.
        if active is not None and (
            (pending is None and not upg.should_prepare(rs, active, None, False))
            or (pending is not None and inc)
        ):
            active_ready, active_apps = self._serve(rs, active, st, upgrading)

        svcs: tuple[Obj, Obj] | None = None
        if pending_ready or active_ready:
            target = active
            if pending_ready and not (inc and upgrading):
                target = pending
            assert target is not None
            svcs = self._services(rs, target)
        self._status(
            rs, st, svcs, active, pending, active_apps, pending_apps, pending_ready, gen, at
        )
        return self._write(rs, old, st) or wrote

    def _reconcile_clusters(self, rs: Obj, st: dict[str, Any]) -> tuple[Obj | None, Obj | None]:
        """``reconcileRayCluster``: create the pending cluster, or update one in place."""
        ns = rs["metadata"]["namespace"]
        rt = self.cluster.rt(RC)
        aname = get_path(st, "activeServiceStatus", "rayClusterName")
        pname = get_path(st, "pendingServiceStatus", "rayClusterName")
        active = self.cluster.store.get(RC, ns, aname) if aname else None
        pending = self.cluster.store.get(RC, ns, pname) if pname else None
        if pname and pending is None and not upg.held(rs):
            built = upg.build_cluster(rs, pname)
            try:
                pending = self.cluster.create_object(rt, built)
            except ApiError as exc:
                self._event(
                    rs,
                    "Warning",
                    "FailedToCreateRayCluster",
                    f"Failed to create the RayCluster {ns}/{pname}: {exc.message}",
                )
                return active, None
            self.owners[(ns, pname)] = rs["metadata"]["name"]
            self._event(rs, "Normal", "CreatedRayCluster", f"Created the RayCluster {ns}/{pname}")
            return active, pending
        upgrading = rss.is_true(st, "UpgradeInProgress")
        for which, rc in (("active", active), ("pending", pending)):
            if rc is not None and upg.should_update(rs, rc, which == "active", upgrading):
                new = upg.updated_cluster(rs, rc)
                try:
                    self.cluster.kueue.validate(rt, new)
                    self.cluster.update_object(rt, new, rc)
                except ApiError as exc:
                    self._event(
                        rs,
                        "Warning",
                        "FailedToUpdateRayCluster",
                        f"Failed to update the {which} RayCluster "
                        f"{ns}/{rc['metadata']['name']}: {exc.message}",
                    )
                    continue
                self._event(
                    rs,
                    "Normal",
                    "UpdatedRayCluster",
                    f"Updated the {which} RayCluster {ns}/{rc['metadata']['name']}",
                )
                if which == "active":
                    active = new
                else:
                    pending = new
        return active, pending

    def _head_pod(self, rc: Obj) -> Obj | None:
        name = get_path(rc, "status", "head", "podName")
        return self.cluster.store.get("pods", rc["metadata"]["namespace"], name) if name else None

    def _head_label(self, rs: Obj, rc: Obj) -> None:
        """``updateHeadPodServeLabel``: the head serves while its proxy is healthy."""
        pod = self._head_pod(rc)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        ns = rc["metadata"]["namespace"]
        name = rc["metadata"]["name"]
        if self.real.is_real(ns, name):
            healthy = self.real.proxy_healthy(ns, name)
        else:
            # KubeRay's CheckProxyActorHealth: the head's ``/-/healthz`` answers 200.
            reply = rayserve_api.proxy(self.cluster, pod, "GET", "/-/healthz", b"")
            healthy = reply is not None and reply[0] == 200
        healthy = healthy and rss.pod_ready(pod)
        label = "false" if rs["spec"].get("excludeHeadPodFromServeSvc") else str(healthy).lower()
        labels = pod["metadata"].setdefault("labels", {})
        if labels.get(SERVE_LABEL) == label:
            return
        new = copy.deepcopy(pod)
        new["metadata"]["labels"][SERVE_LABEL] = label
        self.cluster.update_object(self.cluster.rt("pods"), new, pod)
        self._event(
            rs,
            "Normal",
            "UpdatedHeadPodServeLabel",
            f'Updated the serve label to "{label}" for the Head Pod {ns}/{pod["metadata"]["name"]}',
        )

    def _serve(
        self, rs: Obj, rc: Obj, st: dict[str, Any], upgrading: bool
    ) -> tuple[bool, dict[str, Any] | None]:
        """``reconcileServe``: apply the config when needed; (all RUNNING, app statuses)."""
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        pod = self._head_pod(rc)
        if pod is None or not rss.pod_ready(pod):
            return False, None
        serve = self.cluster.rayserve
        is_active = name == get_path(st, "activeServiceStatus", "rayClusterName")
        skip = is_active and upg.incremental(rs) and upgrading
        config = rs["spec"].get("serveConfigV2") or ""
        if self.real.is_real(ns, name):
            return self._serve_real(rs, rc, config)
        cache_key = (ns, rs["metadata"]["name"], name)
        statuses = serve.statuses(ns, name)
        now = self.cluster.clock.time()
        stale = self.cache.get(cache_key) != config
        # With no application on the head KubeRay submits again, once per requeue (2 s).
        again = not statuses and now >= self.last_put.get(cache_key, -1e18) + 2.0
        if not skip and (stale or again):
            self.last_put[cache_key] = now
            try:
                doc = yaml.safe_load(config) if config else {"applications": []}
                body = json.dumps(doc).encode()
            except (yaml.YAMLError, TypeError) as exc:
                self._event(
                    rs,
                    "Warning",
                    "FailedToUpdateServeApplications",
                    f"Failed to update serve applications to the RayCluster {ns}/{name}: {exc}",
                )
                return False, None
            if upg.incremental(rs) and upgrading and isinstance(doc, dict):
                side = "activeServiceStatus" if is_active else "pendingServiceStatus"
                doc["target_capacity"] = get_path(st, side, "targetCapacity")
                body = json.dumps(doc).encode()
            reply = rayserve_api.serve_api(self.cluster, ns, name, "PUT", body, notify=False)
            if reply[0] != 200:
                self._event(
                    rs,
                    "Warning",
                    "FailedToUpdateServeApplications",
                    f"Failed to update serve applications to the RayCluster {ns}/{name}: "
                    f"{reply[2].decode()}",
                )
                return False, None
            self.cache[cache_key] = config
            self._event(
                rs,
                "Normal",
                "UpdatedServeApplications",
                f"Updated serve applications to the RayCluster {ns}/{name}",
            )
            statuses = serve.statuses(ns, name)
            if not statuses:
                # No application: KubeRay submits again at its next requeue (2 s).
                self.wake_at(now + 2.0, ns, rs["metadata"]["name"])
        if upg.incremental(rs) and upgrading:
            self._target_capacity(rs, rc, st, is_active)
        return self._applications(statuses)

    def _serve_real(self, rs: Obj, rc: Obj, config: str) -> tuple[bool, dict[str, Any] | None]:
        """``reconcileServe`` against a real head (``realserve.py``): the config handed to
        its Serve API thread, the statuses it last read (the thread wakes us when they change)."""
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        key, error = (ns, rs["metadata"]["name"], name), "serveConfigV2 is not a mapping"
        try:
            doc = yaml.safe_load(config) if config else {"applications": []}
        except yaml.YAMLError as exc:
            doc, error = None, str(exc)
        if isinstance(doc, dict):
            applied, error = self.real.apply(ns, name, doc)
            if applied and self.cache.get(key) != config:
                self.cache[key] = config
                msg = f"Updated serve applications to the RayCluster {ns}/{name}"
                self._event(rs, "Normal", "UpdatedServeApplications", msg)
        if error:
            msg = f"Failed to update serve applications to the RayCluster {ns}/{name}: {error}"
            self._event(rs, "Warning", "FailedToUpdateServeApplications", msg)
        return self._applications(self.real.statuses(ns, name) if not error else None)

    def _applications(self, statuses: dict[str, Any] | None) -> tuple[bool, dict[str, Any] | None]:
        """The applications' statuses as KubeRay writes them; ready when all RUNNING."""
        apps = {}
        for app, s in (statuses or {}).items():
            entry: dict[str, Any] = {"status": s["status"]}
            if s["message"]:
                entry["message"] = s["message"]
            deps = {d: {k: v for k, v in ds.items() if v} for d, ds in s["deployments"].items()}
            if deps:
                entry["serveDeploymentStatuses"] = deps
            apps[app] = entry
        ready = bool(apps) and all(a["status"] == "RUNNING" for a in apps.values())
        return ready, apps

    def _target_capacity(self, rs: Obj, rc: Obj, st: dict[str, Any], is_active: bool) -> None:
        """``reconcileServeTargetCapacity`` for one cluster of an incremental upgrade."""
        goal = upg.capacity_goal(rs, st, "active" if is_active else "pending")
        if goal is None:
            return
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        inst = self.cluster.rayserve.instances.get((ns, name))
        if inst is None:
            return
        inst.target_capacity = float(goal)
        self.cluster.rayserve.step(ns, name)
        side = "activeServiceStatus" if is_active else "pendingServiceStatus"
        st[side]["targetCapacity"] = goal
        self._event(
            rs,
            "Normal",
            "UpdatedServeTargetCapacity",
            f"Updated target_capacity of serve applications to to the RayCluster {ns}/{name}",
        )

    # -- services -----------------------------------------------------------------------

    def _services(self, rs: Obj, rc: Obj) -> tuple[Obj, Obj]:
        """``reconcileServicesToReadyCluster``: the head and serve services, created or
        re-pointed to ``rc``."""
        head = self._service(rs, rc, rss.head_service(self.cluster.store, rs, rc))
        serve = self._service(rs, rc, rss.serve_service(rs, rc))
        return head, serve

    def _service(self, rs: Obj, rc: Obj, want: Obj) -> Obj:
        """``reconcileServices``: create, or re-point when the cluster switches."""
        ns, name = want["metadata"]["namespace"], want["metadata"]["name"]
        rt = self.cluster.rt("services")
        have = self.cluster.store.get("services", ns, name)
        if have is not None:
            if get_path(have, "spec", "selector", "ray.io/cluster") == rc["metadata"]["name"]:
                return have
            new = copy.deepcopy(have)
            new["spec"]["selector"] = want["spec"]["selector"]
            new["spec"]["ports"] = want["spec"]["ports"]
            self.cluster.update_object(rt, new, have)
            self._event(rs, "Normal", "UpdatedService", f"Updated the service {ns}/{name}")
            return new
        want["metadata"]["ownerReferences"] = [owner_ref(rs)]
        svc = self.cluster.create_object(rt, want)
        self._event(rs, "Normal", "CreatedService", f"Created the service {ns}/{name}")
        return svc

    # -- status -------------------------------------------------------------------------

    def _status(
        self,
        rs: Obj,
        st: dict[str, Any],
        svcs: tuple[Obj, Obj] | None,
        active: Obj | None,
        pending: Obj | None,
        active_apps: dict[str, Any] | None,
        pending_apps: dict[str, Any] | None,
        pending_ready: bool,
        gen: int,
        at: str,
    ) -> None:
        """``calculateStatus``: promotion, the next pending cluster, endpoints, conditions."""
        st["observedGeneration"] = gen
        act = st.setdefault("activeServiceStatus", {})
        pen = st.setdefault("pendingServiceStatus", {})
        for side, rc, apps in ((act, active, active_apps), (pen, pending, pending_apps)):
            side["rayClusterStatus"] = copy.deepcopy((rc or {}).get("status") or {})
            side.pop("applicationStatuses", None)
            if apps:
                side["applicationStatuses"] = apps
        inc = upg.incremental(rs)
        serving = self._promote(rs, st, svcs, pending, pending_ready, at)
        act, pen = st["activeServiceStatus"], st["pendingServiceStatus"]
        if upg.should_prepare(rs, active, pending, serving):
            name = upg.new_name(rs)
            st["pendingServiceStatus"] = pen = {"rayClusterName": name}
            if inc:
                pen["targetCapacity"] = 0 if act.get("rayClusterName") else 100
        ns = rs["metadata"]["namespace"]
        serve_svc = (
            svcs[1]
            if svcs is not None
            else self.cluster.store.get("services", ns, f"{rs['metadata']['name']}-serve-svc")
        )
        st["numServeEndpoints"] = rss.endpoints(self.cluster, serve_svc)
        pname = pending["metadata"]["name"] if pending is not None else None
        if (
            inc
            and active is not None
            and pname
            and pname != get_path(serve_svc, "spec", "selector", "ray.io/cluster")
        ):
            # During an incremental upgrade the pending cluster serves too.
            selector = {"ray.io/cluster": pname, SERVE_LABEL: "true"}
            st["numServeEndpoints"] += rss.endpoints(
                self.cluster, {"metadata": {"namespace": ns}, "spec": {"selector": selector}}
            )
        rss.conditions(st, gen, at)
        st["serviceStatus"] = "Running" if rss.is_true(st, "Ready") else ""
        for side in (st["activeServiceStatus"], st["pendingServiceStatus"]):
            if not side.get("rayClusterStatus"):
                side.pop("rayClusterStatus", None)

    def _promote(
        self,
        rs: Obj,
        st: dict[str, Any],
        svcs: tuple[Obj, Obj] | None,
        pending: Obj | None,
        pending_ready: bool,
        at: str,
    ) -> bool:
        """``reconcilePromotionAndServingStatus`` (with the incremental upgrade's traffic
        weights first): promote the pending cluster when the services point at it (or,
        incrementally, when it has all capacity and traffic); whether they point at the
        pending cluster."""
        if svcs is None:
            return False
        act, pen = st["activeServiceStatus"], st["pendingServiceStatus"]
        inc = upg.incremental(rs)
        upgrading = rss.is_true(st, "UpgradeInProgress")
        pending_name = pen.get("rayClusterName")
        if inc and pending is not None and upgrading:
            self._traffic(rs, st, pending_ready, at)
        points = get_path(svcs[1], "spec", "selector", "ray.io/cluster")
        if inc and upgrading:
            promote = (
                int(pen.get("targetCapacity", 0)) == 100
                and int(pen.get("trafficRoutedPercent", 0)) == 100
                and int(act.get("targetCapacity", 100)) == 0
            )
        elif inc:
            promote = not act.get("rayClusterName") and bool(pending_name)
        else:
            promote = act.get("rayClusterName") != points
        if promote:
            st["activeServiceStatus"], st["pendingServiceStatus"] = pen, {}
            if inc:
                pen["targetCapacity"], pen["trafficRoutedPercent"] = 100, 100
        return bool(points == pending_name)

    def _traffic(self, rs: Obj, st: dict[str, Any], pending_ready: bool, at: str) -> None:
        """The HTTPRoute's weights (``calculateTrafficRoutedPercent``) into the status."""
        act, pen = st["activeServiceStatus"], st["pendingServiceStatus"]
        last_text = pen.get("lastTrafficMigratedTime")
        last = parse_time(last_text).timestamp() if last_text else None
        now = self.cluster.clock.time()
        a, p, due = upg.traffic_step(rs, st, pending_ready, now, last)
        if a != act.get("trafficRoutedPercent"):
            act["trafficRoutedPercent"], act["lastTrafficMigratedTime"] = a, at
        if p != pen.get("trafficRoutedPercent"):
            pen["trafficRoutedPercent"], pen["lastTrafficMigratedTime"] = p, at
        if due is not None:
            self.wake_at(due, rs["metadata"]["namespace"], rs["metadata"]["name"])

    def _write(self, rs: Obj, old: dict[str, Any], st: dict[str, Any]) -> bool:
        """``updateStatusIfChanged``: write only when the status moved."""

        def view(s: dict[str, Any]) -> Any:
            s = copy.deepcopy(s)
            s.pop("lastUpdateTime", None)
            for side in ("activeServiceStatus", "pendingServiceStatus"):
                (s.get(side) or {}).get("rayClusterStatus", {}).pop("lastUpdateTime", None)
            return s

        # Go's omitempty: empty strings and a zero count go, the two structs stay.
        st = {k: v for k, v in st.items() if v not in ("", None) and (v or isinstance(v, dict))}
        if view(old) == view(st):
            return False
        st["lastUpdateTime"] = stamp(self.cluster.clock.time())
        rs["status"] = st
        self.cluster.update_object(self.cluster.rt(KEY), rs)
        return True
