"""MultiKueue's Workload reconciler: a Workload that reserved quota behind a MultiKueue
check is copied (labelled with the origin) to the nominated workers — every connected
one (AllAtOnce) or three more per 5-minute round in the config's order (Incremental).
The first copy a worker admits wins: the job is created there (``spec.managedBy``
cleared, the prebuilt-workload label set), the other copies are deleted, the check turns
``Ready`` and ``status.clusterName`` names the worker; the worker's job status is copied
onto the manager's job and its ``Finished`` onto the Workload. A RayService's
``serveConfigV2`` changed on the manager is then written onto the worker's copy (Kueue's
``MultiKueueRemoteSpecSync``, on by default), which KubeRay there updates in place; no
other field of a dispatched job is forwarded. A finished, released or
deleted Workload's copies are deleted; an admitting worker lost for longer than
``workerLostTimeout`` sends the check to ``Retry`` (evict, requeue, dispatch again).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from kubesim.operators.kueue.common import (
    JOB_UID_LABEL,
    KIND_KEYS,
    RC,
    RJ,
    RS,
    WL,
    condition,
    is_finished,
)
from kubesim.operators.kueue.mkconfig import (
    AC,
    CONTROLLER,
    INCREMENTAL,
    Connections,
    config_clusters,
)
from kubesim.operators.kueue.mkremote import WorkerClient, WorkerUnreachable, collection
from kubesim.store import Obj
from kubesim.util import get_path, now

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"
WL_API = "kueue.x-k8s.io/v1beta2"
# The job kinds with a MultiKueue adapter here (Kueue v0.19's Ray ones): storage key ->
# (apiVersion, plural).
ADAPTERS = {
    RJ: ("ray.io/v1", "rayjobs"),
    RC: ("ray.io/v1", "rayclusters"),
    RS: ("ray.io/v1", "rayservices"),
}
# The spec fields a kind's adapter forwards to a copy that exists (Kueue's
# ``RemoteSpecSyncer``: RayService only, behind the MultiKueueRemoteSpecSync gate).
REMOTE_SPEC_SYNC = {RS: ("serveConfigV2",)}
# Kueue's Incremental dispatcher: clusters nominated per round, and a round's length.
INCREMENTAL_STEP = 3
INCREMENTAL_ROUND_SECONDS = 300.0


@dataclass
class Group:
    """One manager Workload and what the pass learnt of it."""

    ns: str
    name: str
    wl: Obj
    check: str
    clusters: list[str]
    job_key: str | None
    job: Obj | None
    remotes: dict[str, Obj | None] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """The MultiKueue check's state."""
        for st in get_path(self.wl, "status", "admissionChecks", default=[]) or []:
            if st.get("name") == self.check:
                return str(st.get("state", "Pending"))
        return "Pending"


def _true(obj: Obj | None, ctype: str) -> dict[str, Any] | None:
    for c in get_path(obj or {}, "status", "conditions", default=[]) or []:
        if c.get("type") == ctype and c.get("status") == "True":
            found: dict[str, Any] = c
            return found
    return None


class Dispatcher:
    """Follows every manager Workload behind a MultiKueue check (module docstring)."""

    def __init__(self, mk: Connections) -> None:
        self.mk = mk
        self.cluster = mk.cluster
        # (namespace, name) -> (job storage key, clusters holding copies): what to clean up
        # when the manager's Workload is gone.
        self.dispatched: dict[tuple[str, str], tuple[str, set[str]]] = {}
        self.round_start: dict[tuple[str, str], float] = {}
        self.last_gc = mk.now()

    # -- one pass ----------------------------------------------------------------------

    def sync(self) -> None:
        """Reconcile every group, clean up after deleted Workloads, collect garbage."""
        groups = self._groups()
        seen = {(g.ns, g.name) for g in groups}
        for g in groups:
            try:
                self._reconcile(g)
            except (RuntimeError, WorkerUnreachable):
                continue  # a worker refused or left mid-pass: tried again next pass
        for key in [k for k in self.dispatched if k not in seen]:
            job_key, clusters = self.dispatched[key]
            left = {c for c in clusters if not self._remove(c, key[0], key[1], job_key)}
            if left:
                self.dispatched[key] = (job_key, left)
            else:
                del self.dispatched[key]
                self.round_start.pop(key, None)
        if self.mk.now() - self.last_gc >= self.mk.settings.gc_interval:
            self.last_gc = self.mk.now()
            self._collect_garbage()

    def _groups(self) -> list[Group]:
        """Snapshots of the Workloads with a MultiKueue check state, read under the lock."""
        out = []
        with self.cluster.lock:
            store = self.cluster.store
            for wl in store.iter(WL):
                for st in get_path(wl, "status", "admissionChecks", default=[]) or []:
                    ac = store.get(AC, "", st.get("name", ""))
                    if ac is None or get_path(ac, "spec", "controllerName") != CONTROLLER:
                        continue
                    clusters, _ = config_clusters(self.cluster, ac)
                    job_key, job = None, None
                    for o in wl["metadata"].get("ownerReferences") or []:
                        job_key = KIND_KEYS.get(o.get("kind", ""))
                        if job_key is not None:
                            job = store.get(job_key, wl["metadata"]["namespace"], o["name"])
                            break
                    out.append(
                        Group(
                            ns=wl["metadata"]["namespace"],
                            name=wl["metadata"]["name"],
                            wl=copy.deepcopy(wl),
                            check=st["name"],
                            clusters=clusters or [],
                            job_key=job_key,
                            job=copy.deepcopy(job),
                        )
                    )
                    break
        return out

    # -- the reconciler ----------------------------------------------------------------

    def _reconcile(self, g: Group) -> None:  # noqa: C901
        """Kueue's ``reconcileGroup`` for one Workload (see the module docstring)."""
        key = (g.ns, g.name)
        if g.state == "Rejected":
            return
        if g.job_key not in ADAPTERS or g.job is None:
            return  # no adapter here (a batch Job): the check stays Pending
        managed_by = get_path(g.job, "spec", "managedBy") or ""
        if managed_by != CONTROLLER:
            self._set_check(
                g,
                "Rejected",
                "The owner is not managed by Kueue: Expecting spec.managedBy to be "
                f'"{CONTROLLER}" not "{managed_by}"',
            )
            return
        if is_finished(g.wl) or not get_path(g.wl, "status", "admission"):
            job_key, clusters = self.dispatched.get(key, (g.job_key, set()))
            left = {c for c in clusters if not self._remove(c, g.ns, g.name, job_key)}
            if left:
                self.dispatched[key] = (job_key, left)
            else:
                self.dispatched.pop(key, None)
                self.round_start.pop(key, None)
            return
        unavailable = []
        for name in g.clusters:
            client = self.mk.connected(name)
            if client is None:
                unavailable.append(name)
                continue
            try:
                g.remotes[name] = client.get(f"{collection(WL_API, 'workloads', g.ns)}/{g.name}")
            except WorkerUnreachable:
                self.mk.mark_lost(name)
                unavailable.append(name)
        # A copy a worker finished: the job's last status, then the Workload finishes.
        finished = self._best(g, "Finished")
        if finished is not None:
            name, cond = finished
            self._sync_job(g, name)
            self._finish(g, cond)
            return
        admitting = self._best(g, "Admitted")
        cluster_name = get_path(g.wl, "status", "clusterName") or ""
        if admitting is not None and g.state == "Ready":
            evicted = _true(g.remotes.get(admitting[0]), "Evicted")
            if evicted is not None:
                self._set_check(
                    g,
                    "Retry",
                    f'Workload evicted on worker cluster: "{admitting[0]}", resetting for '
                    f're-admission. Previously: "{g.state}"',
                    plain=True,
                )
                return
        if admitting is None and g.state == "Ready":
            if cluster_name and cluster_name in unavailable:
                worker = self.mk.workers.get(cluster_name)
                since = worker.lost_since if worker and worker.lost_since else self.mk.now()
                if self.mk.now() - since < self.mk.settings.worker_lost_timeout:
                    return  # the worker may come back: its job is likely still running
                self._set_check(g, "Retry", "Admitting remote lost")
            else:
                self._set_check(g, "Retry", "Admitting remote no longer exists")
            return
        if admitting is not None:
            winner = admitting[0]
            for name, remote in g.remotes.items():
                if remote is not None and name != winner:
                    self._remove(name, g.ns, g.name, g.job_key)
            self._remember(key, g.job_key, {winner})
            self._sync_job(g, winner)
            if g.state not in ("Ready", "Retry", "Rejected"):
                self._set_check(
                    g, "Ready", f'The workload was admitted on "{winner}"', admitted_on=winner
                )
            return
        if g.state != "Pending" or _true(g.wl, "Evicted") is not None:
            return  # Kueue nominates only for a Pending check, not while evicting
        if any(
            st.get("state") != "Ready"
            for st in get_path(g.wl, "status", "admissionChecks", default=[]) or []
            if st.get("name") != g.check
        ):
            return  # the other checks (a ProvisioningRequest) come first
        self._nominate_and_copy(g, unavailable)

    def _best(self, g: Group, ctype: str) -> tuple[str, dict[str, Any]] | None:
        """The worker whose copy has condition ``ctype`` True: the one the Workload names
        in ``status.clusterName``, else the earliest to get it."""
        found = [(n, c) for n, r in g.remotes.items() if (c := _true(r, ctype)) is not None]
        named = get_path(g.wl, "status", "clusterName")
        for n, c in found:
            if n == named:
                return n, c
        found.sort(key=lambda nc: str(nc[1].get("lastTransitionTime", "")))
        return found[0] if found else None

    def _nominate_and_copy(self, g: Group, unavailable: list[str]) -> None:
        """Nominate workers (AllAtOnce: every connected one; Incremental: the next three
        in the config's order every round) and copy the Workload to them."""
        key = (g.ns, g.name)
        connected = [n for n in g.clusters if n not in unavailable]
        nominated = list(get_path(g.wl, "status", "nominatedClusterNames", default=[]) or [])
        if self.mk.settings.dispatcher == INCREMENTAL:
            started = self.round_start.get(key)
            due = started is None or self.mk.now() - started >= INCREMENTAL_ROUND_SECONDS
            rest = [n for n in connected if n not in nominated]
            if due and rest:
                nominated += rest[:INCREMENTAL_STEP]
                self.round_start[key] = self.mk.now()
        else:
            nominated = connected
        if sorted(nominated) != sorted(
            get_path(g.wl, "status", "nominatedClusterNames", default=[]) or []
        ):
            self._write_status(g, nominated=nominated)
        for name in g.clusters:
            client = self.mk.connected(name)
            if client is None:
                continue
            if name in nominated and g.remotes.get(name) is None:
                client.create(collection(WL_API, "workloads", g.ns), self._clone(g))
                self._remember(key, g.job_key, {name})
            elif name not in nominated and g.remotes.get(name) is not None:
                self._remove(name, g.ns, g.name, g.job_key)

    def _clone(self, g: Group) -> Obj:
        """The worker's copy of the Workload: name, labels (the origin added, the job UID
        removed), annotations and spec."""
        meta = g.wl["metadata"]
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != JOB_UID_LABEL}
        labels[ORIGIN_LABEL] = self.mk.settings.origin
        out: Obj = {
            "apiVersion": WL_API,
            "kind": "Workload",
            "metadata": {"name": g.name, "namespace": g.ns, "labels": labels},
            "spec": copy.deepcopy(g.wl["spec"]),
        }
        if meta.get("annotations"):
            out["metadata"]["annotations"] = dict(meta["annotations"])
        return out

    # -- jobs --------------------------------------------------------------------------

    def _sync_job(self, g: Group, name: str) -> None:
        """Kueue's adapter ``SyncJob``: the worker's job status onto the manager's job, then
        the fields the kind forwards onto the worker's copy; or the job created on the
        worker when it has none."""
        client = self.mk.connected(name)
        if client is None or g.job is None or g.job_key is None:
            return
        api, plural = ADAPTERS[g.job_key]
        path = collection(api, plural, g.ns)
        job_name = g.job["metadata"]["name"]
        remote = client.get(f"{path}/{job_name}")
        if remote is None:
            meta = g.job["metadata"]
            labels = dict(meta.get("labels") or {})
            labels[PREBUILT_LABEL] = g.name
            labels[ORIGIN_LABEL] = self.mk.settings.origin
            spec = copy.deepcopy(g.job.get("spec") or {})
            spec.pop("managedBy", None)  # the worker's KubeRay takes it over
            body: Obj = {
                "apiVersion": api,
                "kind": g.job["kind"],
                "metadata": {"name": job_name, "namespace": g.ns, "labels": labels},
                "spec": spec,
            }
            if meta.get("annotations"):
                body["metadata"]["annotations"] = dict(meta["annotations"])
            client.create(path, body)
            return
        status = remote.get("status")
        if status is not None and not _same(status, g.job.get("status")):
            with self.cluster.lock:
                local = self.cluster.store.get(g.job_key, g.ns, job_name)
                if local is not None:
                    local["status"] = copy.deepcopy(status)
                    self.cluster.update_object(self.cluster.rt(g.job_key), local)
                    self.cluster.settle()
        self._sync_remote_spec(g, client, f"{path}/{job_name}", remote)

    def _sync_remote_spec(self, g: Group, client: WorkerClient, path: str, remote: Obj) -> None:
        """Kueue's ``syncRemoteSpec``: the forwarded fields that differ, merge-patched onto
        the worker's copy as read (its resourceVersion: a conflict is tried next pass)."""
        fields = REMOTE_SPEC_SYNC.get(g.job_key or "", ())
        if not fields or not self.cluster.kueue.feature_gates.get("MultiKueueRemoteSpecSync"):
            return
        local = (g.job or {}).get("spec") or {}
        theirs = remote.get("spec") or {}
        changed = {f: local.get(f) for f in fields if local.get(f) != theirs.get(f)}
        if not changed:
            return
        rv = remote["metadata"].get("resourceVersion")
        client.merge_patch(path, {"metadata": {"resourceVersion": rv}, "spec": changed})

    def _remove(self, name: str, ns: str, wl_name: str, job_key: str | None) -> bool:
        """Delete the worker's copies of a Workload and of its job (the job only when it
        carries the origin label); False when the worker cannot be reached now."""
        client = self.mk.connected(name)
        if client is None:
            return False
        try:
            path = f"{collection(WL_API, 'workloads', ns)}/{wl_name}"
            remote = client.get(path)
            owners = (remote or {}).get("metadata", {}).get("ownerReferences") or []
            for o in owners:
                key = KIND_KEYS.get(o.get("kind", ""))
                if key in ADAPTERS:
                    job_key = key
                    self._delete_job(client, ns, key, o["name"])
            if not owners and job_key in ADAPTERS:
                # Not adopted yet: a job the worker has for it carries its name.
                self._delete_job_for(client, ns, job_key, wl_name)
            if remote is not None:
                client.delete(path)
        except WorkerUnreachable:
            self.mk.mark_lost(name)
            return False
        return True

    def _delete_job(self, client: WorkerClient, ns: str, key: str, name: str) -> None:
        api, plural = ADAPTERS[key]
        path = f"{collection(api, plural, ns)}/{name}"
        job = client.get(path)
        labels = get_path(job or {}, "metadata", "labels", default={}) or {}
        if job is not None and labels.get(ORIGIN_LABEL) == self.mk.settings.origin:
            client.delete(path)

    def _delete_job_for(self, client: WorkerClient, ns: str, key: str, wl_name: str) -> None:
        api, plural = ADAPTERS[key]
        path = collection(api, plural, ns)
        for job in client.list(path, f"{PREBUILT_LABEL}={wl_name}"):
            if (job["metadata"].get("labels") or {}).get(ORIGIN_LABEL) == self.mk.settings.origin:
                client.delete(f"{path}/{job['metadata']['name']}")

    def _collect_garbage(self) -> None:
        """Kueue's periodic GC: a worker's copies whose manager Workload is gone."""
        selector = f"{ORIGIN_LABEL}={self.mk.settings.origin}"
        for name in list(self.mk.workers):
            client = self.mk.connected(name)
            if client is None:
                continue
            try:
                remotes = client.list("/apis/kueue.x-k8s.io/v1beta2/workloads", selector)
            except (WorkerUnreachable, RuntimeError):
                continue
            for remote in remotes:
                ns, wl_name = remote["metadata"]["namespace"], remote["metadata"]["name"]
                with self.cluster.lock:
                    exists = self.cluster.store.get(WL, ns, wl_name) is not None
                if not exists:
                    self._remove(name, ns, wl_name, None)

    # -- the manager's Workload ----------------------------------------------------------

    def _remember(self, key: tuple[str, str], job_key: str | None, clusters: set[str]) -> None:
        old_key, old = self.dispatched.get(key, (job_key or "", set()))
        self.dispatched[key] = (job_key or old_key, old | clusters)

    def _set_check(
        self, g: Group, state: str, message: str, admitted_on: str = "", plain: bool = False
    ) -> None:
        """The MultiKueue check's new state and message (Kueue's ``updateACS`` adds the
        previous state unless ``plain``); ``admitted_on`` sets ``status.clusterName``."""
        if not plain and state != "Ready":
            message = f'{message}, Previously: "{g.state}"'
        self._write_status(g, check=(state, message), admitted_on=admitted_on)

    def _write_status(
        self,
        g: Group,
        check: tuple[str, str] | None = None,
        admitted_on: str = "",
        nominated: list[str] | None = None,
    ) -> None:
        """Write the manager Workload's check state, ``clusterName`` and
        ``nominatedClusterNames`` (the latter two are exclusive, as in Kueue)."""
        with self.cluster.lock:
            wl = self.cluster.store.get(WL, g.ns, g.name)
            if wl is None or wl["metadata"]["uid"] != g.wl["metadata"]["uid"]:
                return
            status = wl.setdefault("status", {})
            if check is not None:
                for st in status.get("admissionChecks") or []:
                    if st.get("name") == g.check:
                        if st.get("state") != check[0]:
                            st["lastTransitionTime"] = now()
                        st["state"], st["message"] = check
            if admitted_on:
                status.setdefault("clusterName", admitted_on)
                status.pop("nominatedClusterNames", None)
            if nominated is not None and not status.get("clusterName"):
                if nominated:
                    status["nominatedClusterNames"] = list(nominated)
                else:
                    status.pop("nominatedClusterNames", None)
            self.cluster.update_object(self.cluster.rt(WL), wl)
            if check is not None:
                self.cluster.record_event(wl, "Normal", "MultiKueue", check[1], "kueue-multikueue")
            self.cluster.settle()

    def _finish(self, g: Group, remote: dict[str, Any]) -> None:
        """The worker finished the Workload: so does the manager's, with its reason."""
        with self.cluster.lock:
            wl = self.cluster.store.get(WL, g.ns, g.name)
            if wl is None or is_finished(wl):
                return
            old = get_path(wl, "status", "conditions", default=[]) or []
            wl["status"]["conditions"] = [
                *[c for c in old if c.get("type") != "Finished"],
                condition(
                    "Finished", True, remote.get("reason", ""), remote.get("message", ""), old
                ),
            ]
            self.cluster.update_object(self.cluster.rt(WL), wl)
            self.cluster.kueue.need_admit = True
            self.cluster.settle()


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
