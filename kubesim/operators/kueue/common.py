"""Names and helpers the parts of the Kueue emulation share: label and resource keys, Kueue's
reasons and messages, conditions written as Kueue writes them, the name Kueue gives a job's
Workload, and the RayCluster that owns a Workload."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kubesim.store import Obj
from kubesim.util import now

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
RC = "rayclusters.ray.io"
RJ = "rayjobs.ray.io"
RS = "rayservices.ray.io"
JOB = "jobs.batch"
# The job kinds Kueue integrates here: storage key -> (kind, API group), which Kueue hashes
# into the Workload's name (the lower-cased kind prefixes it).
JOB_KINDS = {
    RC: ("RayCluster", "ray.io"),
    RJ: ("RayJob", "ray.io"),
    RS: ("RayService", "ray.io"),
    JOB: ("Job", "batch"),
}
KIND_KEYS = {kind: key for key, (kind, _) in JOB_KINDS.items()}
# Elastic jobs (the ElasticJobsViaWorkloadSlices feature): the job's opt-in annotation (also
# put on its Workloads), the scheduling gate Kueue's webhook puts on its pod templates, the
# annotations linking the slices of one job, and the pod set label Kueue puts on pods.
ELASTIC_ANNOTATION = "kueue.x-k8s.io/elastic-job"
ELASTIC_GATE = "kueue.x-k8s.io/elastic-job"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
PODSET_LABEL = "kueue.x-k8s.io/podset"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WL = "workloads.kueue.x-k8s.io"
CQ = "clusterqueues.kueue.x-k8s.io"
LQ = "localqueues.kueue.x-k8s.io"
RF = "resourceflavors.kueue.x-k8s.io"
WPC = "workloadpriorityclasses.kueue.x-k8s.io"
COHORT = "cohorts.kueue.x-k8s.io"
WATCHED = {WL, CQ, LQ, RF, WPC, COHORT}
VIS = "visibility.kueue.x-k8s.io"

# Why Kueue preempts, as its Preempted condition's reason and in its eviction message.
PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
}
# Evicted reasons the admin knob can produce, and Kueue's message for each.
EVICTIONS = {
    "Preempted": "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to "
    + PREEMPTION_REASONS["InClusterQueue"],
    "PodsReadyTimeout": "Exceeded the PodsReady timeout {ns}/{name}",
    "InactiveWorkload": "The workload is deactivated",
}
# Conditions the admission itself owns; the others (Evicted, Preempted, Requeued, ...)
# are carried over when admission changes.
ADMISSION_CONDITIONS = ("QuotaReserved", "Admitted")


def workload_name(job: Obj, key: str, extra: str = "") -> str:
    """``<kind>-<name>-<hash>`` as Kueue names the Workload of ``job`` (storage key
    ``key``): the hash is SHA-1 of kind, group, name, uid and, for the slices of an elastic
    job, ``extra`` (the job's generation), one per line; the prefix is cut at 247 chars."""
    kind, group = JOB_KINDS[key]
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    parts = [kind, group, name, uid] + ([extra] if extra else [])
    digest = hashlib.sha1("\n".join(parts).encode()).hexdigest()[:5]
    return f"{kind.lower()}-{name}"[:247] + "-" + digest


def is_elastic(cluster: ClusterView, obj: Obj) -> bool:
    """An elastic job or Workload: the ElasticJobsViaWorkloadSlices feature gate is on and
    it carries ``kueue.x-k8s.io/elastic-job: "true"``."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return cluster.kueue.elastic_enabled and annotations.get(ELASTIC_ANNOTATION) == "true"


def run_spec(key: str, job: Obj) -> dict[str, Any]:
    """Where a job's ``suspend`` lives: a RayService's in ``spec.rayClusterConfig`` (Kueue's
    RayService integration suspends the cluster config), every other kind's in ``spec``."""
    spec: dict[str, Any] = job.setdefault("spec", {})
    if key == RS:
        config: dict[str, Any] = spec.setdefault("rayClusterConfig", {})
        return config
    return spec


def is_suspended(key: str, job: Obj) -> bool:
    """Whether ``job`` (storage ``key``) is suspended (see :func:`run_spec`)."""
    return bool(run_spec(key, job).get("suspend"))


def set_suspended(key: str, job: Obj, value: bool) -> None:
    """Suspend or unsuspend ``job`` in place (see :func:`run_spec`)."""
    run_spec(key, job)["suspend"] = value


def is_finished(wl: Obj) -> bool:
    """The Workload has the ``Finished`` condition: it no longer holds quota."""
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (wl.get("status") or {}).get("conditions") or []
    )


def is_admitted(wl: Obj) -> bool:
    """The Workload is admitted (``Admitted`` True): it reserved quota and every admission
    check is Ready, so Kueue started its job. A reservation that waits for its checks is
    not: its job stays suspended by Kueue."""
    return any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in (wl.get("status") or {}).get("conditions") or []
    )


def condition(
    ctype: str, status: bool, reason: str, message: str, old: list[dict[str, Any]]
) -> dict[str, Any]:
    """A Workload or queue condition; its ``lastTransitionTime`` is kept from ``old`` when
    the status does not change, as Kueue keeps it."""
    text = "True" if status else "False"
    prev = next((c for c in old if c.get("type") == ctype), None)
    when = prev["lastTransitionTime"] if prev and prev.get("status") == text else now()
    return {
        "type": ctype,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": when,
        "observedGeneration": 1,
    }


def owning_job(cluster: ClusterView, wl: Obj) -> tuple[str, Obj] | None:
    """The job (RayCluster or RayJob: its storage key and object) that owns Workload
    ``wl``, if it still exists."""
    for o in wl["metadata"].get("ownerReferences") or []:
        key = KIND_KEYS.get(o.get("kind", ""))
        if key is not None:
            obj = cluster.store.get(key, wl["metadata"]["namespace"], o["name"])
            return (key, obj) if obj is not None else None
    return None


def owning_raycluster(cluster: ClusterView, wl: Obj) -> Obj | None:
    """The RayCluster that owns Workload ``wl``, if it still exists."""
    found = owning_job(cluster, wl)
    return found[1] if found is not None and found[0] == RC else None


def touch_job(cluster: ClusterView, key: str, job: Obj, spec_changed: bool = True) -> None:
    """Write the job Kueue changed (suspend, node selectors; ``spec_changed`` False: only
    its metadata) and have its operator look. Kueue writes through the API server, which
    bumps ``metadata.generation`` on a change of the spec (an elastic job's slice names
    hash it in)."""
    if spec_changed:
        job["metadata"]["generation"] = int(job["metadata"].get("generation", 1)) + 1
    cluster.update_object(cluster.rt(key), job)
    ref = (job["metadata"]["namespace"], job["metadata"]["name"])
    # The operators ignore in-place writes (their own status writes): tell them.
    operators = {RC: cluster.kuberay, RJ: cluster.rayjob, RS: cluster.rayservice}
    operators.get(key, cluster.jobs).dirty.add(ref)


def cohort_root(cluster: ClusterView, name: str) -> str:
    """The root of cohort ``name``'s tree: Cohort objects name their parent in
    ``spec.parentName``; a cohort without an object, or without a parent, is a root. The
    ClusterQueues of every cohort under one root borrow each other's unused quota. (Kueue
    disables a tree with a cycle; here the walk stops at the first cohort seen twice.)"""
    seen = {name}
    while True:
        obj = cluster.store.get(COHORT, "", name)
        parent = ((obj or {}).get("spec") or {}).get("parentName")
        if not parent or parent in seen:
            return name
        seen.add(parent)
        name = parent
