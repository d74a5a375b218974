"""Kueue's job integrations (RayCluster, RayJob, batch/v1 Job): the Workload of each job.

A queued job gets a Workload it owns, named and shaped as Kueue's integration builds it:
a ``head`` pod set and one per worker group (a RayJob adds its ``submitter`` in
K8sJobMode), or a Job's ``main``, with the priority of the WorkloadPriorityClass it names
(none until that class exists). A user's suspend releases the quota, a resume queues it
again; a finished RayJob or Job finishes its Workload, which then holds no quota.
Elastic jobs: ``slices.py``.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.operators.kuberay import desired_workers
from kubesim.operators.kueue.common import (
    ADMISSION_CONDITIONS,
    JOB,
    JOB_UID_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RC,
    RJ,
    RS,
    WL,
    WPC,
    condition,
    is_admitted,
    is_finished,
    is_suspended,
    set_suspended,
    touch_job,
    workload_name,
)
from kubesim.operators.kueue.topology import topology_request
from kubesim.store import Obj
from kubesim.util import get_path, owner_ref

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.kueue import Kueue

# The Job controller's labels on a Job's pod template that Kueue leaves out of the pod set.
JOB_MANAGED_LABELS = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid")


def workloads_of(cluster: ClusterView, job: Obj) -> list[Obj]:
    """Every Workload job ``job`` owns (an elastic job's slices), oldest first."""
    out = []
    for key, ns, name in cluster.store.dependents(job["metadata"]["uid"]):
        if key == WL:
            wl = cluster.store.get(key, ns, name)
            if wl is not None:
                out.append(wl)
    out.sort(
        key=lambda w: (w["metadata"]["creationTimestamp"], int(w["metadata"]["resourceVersion"]))
    )
    return out


def workload_for(cluster: ClusterView, job: Obj) -> Obj | None:
    """The Workload Kueue made for ``job``: its newest unfinished one (an elastic job's
    newest slice), else its newest."""
    wls = workloads_of(cluster, job)
    live = [w for w in wls if not is_finished(w)]
    chosen = live or wls
    return chosen[-1] if chosen else None


def submitter_template(rj: Obj) -> dict[str, Any]:
    """The RayJob's submitter pod template as Kueue sees it (the user's, else KubeRay's
    default); Kueue writes the default into ``spec.submitterPodTemplate`` on admission."""
    spec = rj.get("spec") or {}
    if spec.get("submitterPodTemplate"):
        template: dict[str, Any] = spec["submitterPodTemplate"]
        return template
    head = get_path(spec, "rayClusterSpec", "headGroupSpec", "template", "spec", "containers")
    return {
        "spec": {
            "containers": [
                {
                    "name": "ray-job-submitter",
                    "image": (head or [{}])[0].get("image", ""),
                    "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi"},
                        "requests": {"cpu": "500m", "memory": "200Mi"},
                    },
                }
            ],
            "restartPolicy": "Never",
        }
    }


def _has_submitter(rj: Obj) -> bool:
    return (get_path(rj, "spec", "submissionMode") or "K8sJobMode") == "K8sJobMode"


def job_templates(key: str, job: Obj) -> list[tuple[str, Any]]:
    """(pod set name, the job's pod template it comes from), for injecting an admitted
    flavor's node labels; a RayJob's default submitter template is written into its spec
    then, as Kueue does."""
    spec = job.get("spec") or {}
    if key == JOB:
        return [("main", spec.get("template"))]
    cluster_spec = (spec.get("rayClusterSpec") or {}) if key == RJ else spec
    if key == RS:
        cluster_spec = spec.get("rayClusterConfig") or {}
    out: list[tuple[str, Any]] = [("head", get_path(cluster_spec, "headGroupSpec", "template"))]
    out += [
        (g.get("groupName"), g.get("template")) for g in cluster_spec.get("workerGroupSpecs") or []
    ]
    if key == RJ and _has_submitter(job):
        spec["submitterPodTemplate"] = submitter_template(job)
        out.append(("submitter", spec["submitterPodTemplate"]))
    return out


def _head_template(cluster_spec: dict[str, Any]) -> dict[str, Any]:
    """The head pod set's template: with in-tree autoscaling KubeRay adds its
    ``autoscaler`` sidecar to the head pod (``autoscalerOptions.resources``, else 500m and
    512Mi), and Kueue counts it."""
    template: dict[str, Any] = copy.deepcopy(
        get_path(cluster_spec, "headGroupSpec", "template", default={})
    )
    if cluster_spec.get("enableInTreeAutoscaling") is True:
        default = {"cpu": "500m", "memory": "512Mi"}
        resources = get_path(cluster_spec, "autoscalerOptions", "resources") or {
            "requests": dict(default),
            "limits": dict(default),
        }
        containers = template.setdefault("spec", {}).setdefault("containers", [])
        containers.append({"name": "autoscaler", "resources": copy.deepcopy(resources)})
    return template


def pod_sets(job: Obj, key: str = RC) -> list[dict[str, Any]]:
    """The Workload's pod sets: ``head`` and one per worker group, at full size (a
    RayService's from its ``rayClusterConfig``; a RayJob's with its ``submitter``), or a
    Job's ``main``."""
    spec = job.get("spec") or {}
    if key == JOB:
        template = copy.deepcopy(spec.get("template") or {})
        labels = (template.get("metadata") or {}).get("labels") or {}
        for label in JOB_MANAGED_LABELS:
            labels.pop(label, None)
        count = min(int(spec.get("parallelism", 1)), int(spec.get("completions") or 2**31))
        main = {"name": "main", "count": count, "template": template}
        request = topology_request(template)
        return [{**main, "topologyRequest": request}] if request else [main]
    if key == RJ:
        spec = spec.get("rayClusterSpec") or {}
    elif key == RS:
        spec = spec.get("rayClusterConfig") or {}
    sets: list[dict[str, Any]] = [{"name": "head", "count": 1, "template": _head_template(spec)}]
    for g in spec.get("workerGroupSpecs") or []:
        sets.append(
            {
                "name": g.get("groupName", "workers"),
                "count": desired_workers({**g, "suspend": False}),
                "template": copy.deepcopy(g.get("template") or {}),
            }
        )
    if key == RJ and _has_submitter(job):
        sets.append(
            {"name": "submitter", "count": 1, "template": copy.deepcopy(submitter_template(job))}
        )
    for ps in sets:
        request = topology_request(ps["template"])
        if request:
            ps["topologyRequest"] = request
    return sets


def outcome(key: str, job: Obj) -> tuple[bool, str] | None:
    """(succeeded, message) once the job finished, as Kueue's integration reads it: a
    RayJob's ``jobDeploymentStatus`` Complete or Failed (success: ``jobStatus``
    SUCCEEDED), a Job's Complete or Failed condition; None while it runs (a RayCluster
    never finishes)."""
    st = job.get("status") or {}
    if key == RJ and st.get("jobDeploymentStatus") in ("Complete", "Failed"):
        return st.get("jobStatus") == "SUCCEEDED", str(st.get("message", ""))
    if key == JOB:
        for c in st.get("conditions") or []:
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                return c["type"] == "Complete", str(c.get("message", ""))
    return None


def new_workload(
    kueue: Kueue, job: Obj, key: str, extra: str = "", annotations: dict[str, str] | None = None
) -> Obj | None:
    """Create the Workload of ``job`` (``extra``: an elastic slice's name part, with its
    ``annotations``) and queue it; None (and retried once it exists) while the
    WorkloadPriorityClass it names is missing."""
    cluster = kueue.cluster
    labels = job["metadata"].get("labels") or {}
    prio, prio_ref = 0, None
    pc = labels.get(PRIORITY_LABEL)
    wpc = cluster.store.get(WPC, "", pc) if pc else None
    if pc and wpc is None:
        kueue.waiting_for_class.add((key, job["metadata"]["namespace"], job["metadata"]["name"]))
        return None
    if wpc is not None:
        prio = int(wpc.get("value", 0))
        prio_ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": pc}
    wl: Obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job, key, extra),
            "namespace": job["metadata"]["namespace"],
            "labels": {JOB_UID_LABEL: job["metadata"]["uid"]},
            "ownerReferences": [owner_ref(job)],
        },
        "spec": {
            "queueName": labels[QUEUE_LABEL],
            "podSets": pod_sets(job, key),
            "priority": prio,
            "active": True,
        },
    }
    if annotations:
        wl["metadata"]["annotations"] = dict(annotations)
    if prio_ref:
        wl["spec"]["priorityClassRef"] = prio_ref
    cluster.create_object(cluster.rt(WL), wl, admit=False)
    kueue.need_admit = True
    return wl


def sync_job(kueue: Kueue, job: Obj, key: str = RC) -> bool:
    """Bring ``job``'s (a RayCluster, RayJob or Job: storage ``key``) Workload in line
    with it: create it (once its priority class exists), finish it when the job finished,
    release its quota when its user suspends it, queue it again when its user resumes it.
    True when anything was written. (An elastic job's slices: ``slices.sync_slices``.)"""
    cluster = kueue.cluster
    wl = workload_for(cluster, job)
    if wl is not None:
        done = outcome(key, job)
        if done is not None:
            return finish(kueue, wl, job, *done)
        if is_finished(wl):
            return False
    suspended = is_suspended(key, job)
    if wl is None:
        if new_workload(kueue, job, key) is None:
            return False
        if not suspended:
            set_suspended(key, job, True)  # a job created running goes back to the queue
            touch_job(cluster, key, job)
        return True
    return follow_suspend(kueue, wl, job, key)


def follow_suspend(kueue: Kueue, wl: Obj, job: Obj, key: str) -> bool:
    """The job's user suspended admitted ``wl``'s job: release the quota and stop
    queueing; resumed one that holds no quota: back into the queue, the job suspended
    until Kueue admits it. A job suspended while its Workload's quota reservation waits
    for admission checks is Kueue's doing, not its user's: it stays so (and is suspended
    again if resumed early). True when anything was written."""
    cluster = kueue.cluster
    suspended = is_suspended(key, job)
    reserved = bool(get_path(wl, "status", "admission"))
    if suspended and is_admitted(wl):
        set_pending(
            cluster, wl, "Stopped", "The workload is deactivated by the job's user", active=False
        )
        kueue.need_admit = True
        return True
    if not suspended and reserved and not is_admitted(wl):
        set_suspended(key, job, True)
        touch_job(cluster, key, job)
        return True
    if not suspended and not reserved:
        wl["spec"]["active"] = True
        wl["spec"]["podSets"] = pod_sets(job, key)
        cluster.update_object(cluster.rt(WL), wl)
        set_suspended(key, job, True)
        touch_job(cluster, key, job)
        kueue.need_admit = True
        return True
    return False


def finish(kueue: Kueue, wl: Obj, job: Obj, ok: bool, message: str) -> bool:
    """Kueue's job reconciler on a finished job: the Workload ``Finished`` (reason
    ``Succeeded`` or ``Failed``, the job's message), its quota released; an event
    ``FinishedWorkload`` on the job."""
    if is_finished(wl):
        return False
    cluster = kueue.cluster
    old = get_path(wl, "status", "conditions", default=[])
    wl.setdefault("status", {})["conditions"] = [
        *[c for c in old if c.get("type") != "Finished"],
        condition("Finished", True, "Succeeded" if ok else "Failed", message, old),
    ]
    cluster.update_object(cluster.rt(WL), wl)
    cluster.record_event(
        job,
        "Normal",
        "FinishedWorkload",
        f"Workload '{wl['metadata']['namespace']}/{wl['metadata']['name']}' is declared finished",
        "kueue-job-controller",
    )
    kueue.need_admit = True
    return True


def set_pending(
    cluster: ClusterView, wl: Obj, reason: str, message: str, active: bool = True
) -> bool:
    """Workload ``wl`` holds no quota: ``QuotaReserved`` False with ``reason`` and
    ``message`` (and ``Admitted`` False if it was admitted); ``active`` False stops it
    queueing. True when anything changed."""
    old = get_path(wl, "status", "conditions", default=[])
    conditions = [condition("QuotaReserved", False, reason, message, old)]
    if any(c.get("type") == "Admitted" for c in old):
        conditions.append(
            condition("Admitted", False, "NoReservation", "The workload has no reservation", old)
        )
    conditions += [c for c in old if c.get("type") not in ADMISSION_CONDITIONS]
    status: dict[str, Any] = {"conditions": conditions}
    if get_path(wl, "status", "requeueState"):
        status["requeueState"] = wl["status"]["requeueState"]
    changed = wl.get("status") != status or wl["spec"].get("active", True) != active
    if changed:
        wl["status"] = status
        wl["spec"]["active"] = active
        cluster.update_object(cluster.rt(WL), wl)
    return changed
