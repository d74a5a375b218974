"""Elastic jobs: Kueue's ElasticJobsViaWorkloadSlices (Beta, on by default since 0.18).

A job annotated ``kueue.x-k8s.io/elastic-job: "true"`` has its pod templates gated and a
chain of Workload slices. Scaling down shrinks the admitted slice in place; scaling up
queues a new slice (``workload-slice-replacement-for`` the old one), admitted on the old
slice's flavors counting its quota as its own, after which the old one is ``Finished``
(``WorkloadSliceReplaced``). The job runs on meanwhile; new pods stay gated until a
slice grants them.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim.operators.kueue.common import (
    ELASTIC_ANNOTATION,
    ELASTIC_GATE,
    JOB_UID_LABEL,
    PODSET_LABEL,
    RC,
    REPLACEMENT_FOR,
    RJ,
    RS,
    SLICE_NAME,
    WL,
    condition,
    is_admitted,
    is_elastic,
    is_finished,
    is_suspended,
    owning_job,
    set_suspended,
    touch_job,
    workload_name,
)
from kubesim.operators.kueue.quota import Usage, workload_usage
from kubesim.operators.kueue.workloads import (
    finish,
    new_workload,
    outcome,
    pod_sets,
    set_pending,
    workloads_of,
)
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.kueue import Kueue

# KubeRay's RayCluster of an elastic RayJob: what Kueue records on the RayJob.
REPLICA_SIZES = "kueue.x-k8s.io/raycluster-podset-replica-sizes"
RAYCLUSTER_GENERATION = "kueue.x-k8s.io/raycluster-generation"
# Why Kueue finishes a stray slice when it puts a job's chain of slices in order.
REPLACED = "Replaced to accommodate a new workload slice"
OUT_OF_SYNC = "The workload slice is out of sync with its parent job"


def _key(wl: Obj) -> str:
    return f"{wl['metadata']['namespace']}/{wl['metadata']['name']}"


def _reserved(wl: Obj) -> bool:
    return bool(get_path(wl, "status", "admission"))


def _evicted(wl: Obj) -> bool:
    return any(
        c.get("type") == "Evicted" and c.get("status") == "True"
        for c in get_path(wl, "status", "conditions", default=[])
    )


def _counts(sets: list[dict[str, Any]]) -> dict[str, int]:
    return {ps["name"]: int(ps.get("count", 1)) for ps in sets}


def _rayjob_cluster(cluster: ClusterView, job: Obj) -> Obj | None:
    name = get_path(job, "status", "rayClusterName")
    return cluster.store.get(RC, job["metadata"]["namespace"], name) if name else None


def _pod_sets(cluster: ClusterView, job: Obj, key: str) -> list[dict[str, Any]]:
    """The job's pod sets; an autoscaling RayJob's worker counts are those of the
    RayCluster KubeRay made for it (the Ray autoscaler scales that one)."""
    sets = pod_sets(job, key)
    rc = _rayjob_cluster(cluster, job) if key == RJ else None
    if rc is None or get_path(job, "spec", "rayClusterSpec", "enableInTreeAutoscaling") is not True:
        return sets
    by_name = {ps["name"]: ps for ps in sets}
    for g in get_path(rc, "spec", "workerGroupSpecs", default=[]):
        ps = by_name.get(g.get("groupName", ""))
        if ps is not None and g.get("replicas") is not None:
            ps["count"] = int(g["replicas"]) * max(1, int(g.get("numOfHosts") or 1))
    return sets


def _name_extra(cluster: ClusterView, job: Obj, key: str) -> str:
    """What Kueue hashes into a slice's name besides the job: its generation (a RayJob's
    followed by ``_<its RayCluster's generation>``)."""
    extra = str(job["metadata"].get("generation", 1))
    rc_gen = (job["metadata"].get("annotations") or {}).get(RAYCLUSTER_GENERATION, "")
    return f"{extra}_{rc_gen}" if key == RJ and rc_gen else extra


def _record_sizes(cluster: ClusterView, job: Obj, sets: list[dict[str, Any]]) -> bool:
    """An elastic RayJob carries its pod set sizes and its RayCluster's generation as
    annotations (Kueue writes them before each slice decision)."""
    rc = _rayjob_cluster(cluster, job)
    want = {
        REPLICA_SIZES: json.dumps(
            [{"name": ps["name"], "count": ps["count"]} for ps in sets], separators=(",", ":")
        ),
        RAYCLUSTER_GENERATION: str(rc["metadata"].get("generation", 1)) if rc else "",
    }
    annotations = job["metadata"].setdefault("annotations", {})
    if all(annotations.get(k) == v for k, v in want.items()):
        return False
    annotations.update(want)
    touch_job(cluster, RJ, job, spec_changed=False)
    return True


def _normalize(kueue: Kueue, live: list[Obj]) -> Obj | None:
    """Kueue's invariant over a job's unfinished slices: the admitted one at the head of the
    chain and at most one pending replacement of it; every other slice is finished
    (``WorkloadSliceReplaced`` when a slice replaced it, else ``OutOfSync``). Returns the
    slice the job's counts are compared with: the pending replacement, else the admitted
    slice, else the newest one not evicted."""
    replacements: dict[str, Obj] = {}
    for wl in live:
        target = (wl["metadata"].get("annotations") or {}).get(REPLACEMENT_FOR)
        if target and not _evicted(wl):
            seen = replacements.get(target)
            if seen is None or (not _reserved(seen) and _reserved(wl)):
                replacements[target] = wl
    holder = newest = None
    for wl in live:
        if _evicted(wl):
            continue
        newest = wl
        repl = replacements.get(_key(wl))
        if _reserved(wl) and not (repl is not None and _reserved(repl)):
            holder = wl
    pending = replacements.get(_key(holder)) if holder is not None else None
    if pending is not None and _reserved(pending):
        pending = None
    selected = pending or holder or newest
    for wl in live:
        if wl is selected or wl is holder:
            continue
        if _key(wl) in replacements:
            finish_slice(kueue, wl, "WorkloadSliceReplaced", REPLACED)
        else:
            finish_slice(kueue, wl, "OutOfSync", OUT_OF_SYNC)
    return selected


def finish_slice(kueue: Kueue, wl: Obj, reason: str, message: str) -> None:
    """Slice ``wl`` is ``Finished`` with ``reason``: it holds no quota any more."""
    old = get_path(wl, "status", "conditions", default=[])
    wl.setdefault("status", {})["conditions"] = [
        *[c for c in old if c.get("type") != "Finished"],
        condition("Finished", True, reason, message, old),
    ]
    kueue.cluster.update_object(kueue.cluster.rt(WL), wl)
    kueue.need_admit = True


def _first_slice(kueue: Kueue, job: Obj, key: str) -> bool:
    """The first slice of ``job`` (its own name as the chain's name), the job suspended
    until it is admitted."""
    cluster = kueue.cluster
    extra = _name_extra(cluster, job, key)
    name = workload_name(job, key, extra)
    annotations = {ELASTIC_ANNOTATION: "true", SLICE_NAME: name}
    if new_workload(kueue, job, key, extra, annotations) is None:
        return False
    if not is_suspended(key, job):
        set_suspended(key, job, True)
        touch_job(cluster, key, job)
    return True


def _follow_suspend(kueue: Kueue, job: Obj, key: str, live: list[Obj], sel: Obj) -> bool:
    """The user suspended the job: its slices release their quota and stop queueing; a
    job resumed with no slice holding quota queues again, suspended until admitted."""
    cluster = kueue.cluster
    suspended = is_suspended(key, job)
    if suspended and any(is_admitted(w) for w in live):
        msg = "The workload is deactivated by the job's user"
        for wl in live:
            set_pending(cluster, wl, "Stopped", msg, active=False)
        kueue.need_admit = True
        return True
    if not suspended and not any(_reserved(w) for w in live):
        sel["spec"]["active"] = True
        cluster.update_object(cluster.rt(WL), sel)
        set_suspended(key, job, True)
        touch_job(cluster, key, job)
        kueue.need_admit = True
        return True
    return False


def sync_slices(kueue: Kueue, job: Obj, key: str) -> bool:
    """Kueue's job reconciler for elastic ``job``: the first slice, scale-down in place,
    a replacement slice on scale-up, the slices finished with the job. True when anything
    was written."""
    cluster = kueue.cluster
    live = [w for w in workloads_of(cluster, job) if not is_finished(w)]
    done = outcome(key, job)
    if done is not None:
        return any([finish(kueue, wl, job, *done) for wl in live])
    sets = _pod_sets(cluster, job, key)
    busy = _record_sizes(cluster, job, sets) if key == RJ else False
    sel = (live[0] if len(live) == 1 else _normalize(kueue, live)) if live else None
    if sel is None:
        return _first_slice(kueue, job, key) or busy
    live = [w for w in live if not is_finished(w)]
    want, have = _counts(sets), _counts(sel["spec"].get("podSets") or [])
    if set(want) != set(have):
        return busy  # a changed shape: not a scale (Kueue falls back to its usual path)
    if want == have:
        return _follow_suspend(kueue, job, key, live, sel) or busy
    shrinks = any(want[n] < have[n] for n in want) and not any(want[n] > have[n] for n in want)
    if not _reserved(sel) or shrinks:
        for ps in sel["spec"]["podSets"]:
            ps["count"] = want[ps["name"]]
        cluster.update_object(cluster.rt(WL), sel)
        kueue.need_admit = kueue.need_ungate = True
        return True
    extra = _name_extra(cluster, job, key)
    if cluster.store.get(WL, job["metadata"]["namespace"], workload_name(job, key, extra)):
        return busy  # this generation's slice exists (finished): wait for the next change
    origin = (sel["metadata"].get("annotations") or {}).get(SLICE_NAME, sel["metadata"]["name"])
    annotations = {ELASTIC_ANNOTATION: "true", REPLACEMENT_FOR: _key(sel), SLICE_NAME: origin}
    return new_workload(kueue, job, key, extra, annotations) is not None or busy


# -- admission of a replacement ------------------------------------------------------------


def replaced_slice(cluster: ClusterView, wl: Obj, cq_name: str) -> Obj | None:
    """The admitted slice that pending slice ``wl`` replaces, when it holds quota in the
    same ClusterQueue ``cq_name``."""
    target = (wl["metadata"].get("annotations") or {}).get(REPLACEMENT_FOR)
    if not target or not is_elastic(cluster, wl):
        return None
    ns, _, name = target.partition("/")
    old = cluster.store.get(WL, ns, name)
    if old is None or is_finished(old) or ns != wl["metadata"]["namespace"]:
        return None
    return old if get_path(old, "status", "admission", "clusterQueue") == cq_name else None


def without(use: Usage, old: Obj) -> Usage:
    """``use`` (copied) without what slice ``old`` reserves: its replacement takes it."""
    out = {name: Counter(counter) for name, counter in use.items()}
    out.setdefault(old["status"]["admission"]["clusterQueue"], Counter()).subtract(
        workload_usage(old)
    )
    return out


def slice_flavors(old: Obj) -> dict[str, dict[str, str]]:
    """The flavors slice ``old`` was admitted on, per pod set: its replacement keeps them."""
    return {
        psa["name"]: dict(psa.get("flavors") or {})
        for psa in get_path(old, "status", "admission", "podSetAssignments", default=[])
    }


def replace(kueue: Kueue, old: Obj, new: Obj) -> None:
    """``new`` was admitted in place of ``old``: ``old`` is finished, as Kueue's scheduler
    writes it, with an event."""
    job_uid = (new["metadata"].get("labels") or {}).get(JOB_UID_LABEL, "")
    message = (
        f"Replaced to accommodate a workload (UID: {new['metadata']['uid']}, JobUID: "
        f"{job_uid}) due to workload slice aggregation"
    )
    finish_slice(kueue, old, "WorkloadSliceReplaced", message)
    kueue.cluster.record_event(old, "Normal", "WorkloadSliceReplaced", message, "kueue-admission")


# -- the elastic job ungater ---------------------------------------------------------------


def _active_slice(cluster: ClusterView, wl: Obj) -> tuple[str, Obj] | None:
    """The job (storage key and object) when ``wl`` is its newest unfinished, not evicted
    slice holding quota, and admitted: the one whose counts cap how many pods run."""
    if not is_admitted(wl) or is_finished(wl) or _evicted(wl):
        return None
    found = owning_job(cluster, wl)
    if found is None:
        return None
    holders = [
        w
        for w in workloads_of(cluster, found[1])
        if _reserved(w) and not is_finished(w) and not _evicted(w)
    ]
    return found if holders and holders[-1] is wl else None


def _in_step(cluster: ClusterView, wl: Obj, key: str, job: Obj) -> bool:
    """The job asks for no more than admitted slice ``wl`` counts and no slice waits to
    replace it: where Kueue's job reconciler starts every gated pod of the slice
    (``StartWorkloadSlicePods``), those of a RayService's upgrade cluster too."""
    live = [w for w in workloads_of(cluster, job) if not is_finished(w)]
    if any(w is not wl and not _reserved(w) for w in live):
        return False
    want, have = _counts(_pod_sets(cluster, job, key)), _counts(wl["spec"].get("podSets") or [])
    return set(want) == set(have) and all(want[n] <= have[n] for n in want)


def ungate(kueue: Kueue) -> bool:
    """Remove the elastic scheduling gate from the pods each active slice grants: all its
    gated pods while the job asks for no more than it counts (Kueue's
    ``StartWorkloadSlicePods``), else per pod set up to its count less the pods already
    ungated, lowest names first. True when a pod was written."""
    cluster = kueue.cluster
    busy = False
    for wl in list(cluster.store.iter(WL)):
        found = _active_slice(cluster, wl) if is_elastic(cluster, wl) else None
        if found is None:
            continue
        every = _in_step(cluster, wl, *found)
        chain = (wl["metadata"].get("annotations") or {}).get(SLICE_NAME, wl["metadata"]["name"])
        granted = _counts(wl["spec"].get("podSets") or [])
        gated: dict[str, list[Obj]] = {}
        running: Counter[str] = Counter()
        for pod in cluster.store.iter("pods", wl["metadata"]["namespace"]):
            meta = pod["metadata"]
            if (meta.get("annotations") or {}).get(SLICE_NAME) != chain:
                continue
            if meta.get("deletionTimestamp") or get_path(pod, "status", "phase") in (
                "Succeeded",
                "Failed",
            ):
                continue
            podset = (meta.get("labels") or {}).get(PODSET_LABEL, "")
            gates = get_path(pod, "spec", "schedulingGates", default=[]) or []
            if any(g.get("name") == ELASTIC_GATE for g in gates):
                gated.setdefault(podset, []).append(pod)
            else:
                running[podset] += 1
        for podset, pods in gated.items():
            room = len(pods) if every else granted.get(podset, 0) - running[podset]
            for pod in sorted(pods, key=lambda p: p["metadata"]["name"])[: max(room, 0)]:
                gates = [g for g in pod["spec"]["schedulingGates"] if g.get("name") != ELASTIC_GATE]
                if gates:
                    pod["spec"]["schedulingGates"] = gates
                else:
                    pod["spec"].pop("schedulingGates")
                cluster.update_object(cluster.rt("pods"), pod)
                busy = True
    return busy


def gate_templates(key: str, job: Obj) -> None:
    """Kueue's webhook on an elastic job: every pod template gets the elastic gate (a
    RayService's in its ``rayClusterConfig``)."""
    spec = job.setdefault("spec", {})
    if key in (RC, RS):
        config = (spec.get("rayClusterConfig") or {}) if key == RS else spec
        templates = [get_path(config, "headGroupSpec", "template")]
        templates += [g.get("template") for g in config.get("workerGroupSpecs") or []]
    else:
        templates = [spec.get("template")]
    for template in templates:
        if not isinstance(template, dict):
            continue
        gates = template.setdefault("spec", {}).setdefault("schedulingGates", [])
        if not any(g.get("name") == ELASTIC_GATE for g in gates):
            gates.append({"name": ELASTIC_GATE})


__all__ = [
    "finish_slice",
    "gate_templates",
    "is_elastic",
    "replace",
    "replaced_slice",
    "slice_flavors",
    "sync_slices",
    "ungate",
    "without",
]
