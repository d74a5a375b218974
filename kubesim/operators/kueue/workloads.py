"""Kueue's job integrations for RayClusters and RayJobs: one Workload per queued job.

A queued job (``kueue.x-k8s.io/queue-name``) gets a Workload it owns, named as Kueue names
it (``raycluster-<name>-<hash>``, ``rayjob-<name>-<hash>``), with a ``head`` pod set and one
per worker group at its desired size — for a RayJob those of ``spec.rayClusterSpec`` plus,
in K8sJobMode, a ``submitter`` pod set of one (``spec.submitterPodTemplate``, else KubeRay's
default submitter: the head's image, requests 500m/200Mi, limits 1/1Gi), as Kueue's RayJob
integration builds them — and the priority of the WorkloadPriorityClass it names (none is
made until that class exists). When its user suspends an admitted job the Workload releases
its quota and stops queueing; when its user resumes one that is not admitted it goes back
to the queue and the job is suspended again until Kueue admits it. A RayJob whose
``jobDeploymentStatus`` is ``Complete`` or ``Failed`` finishes its Workload (condition
``Finished``, reason ``Succeeded`` or ``Failed``, the RayJob's message), which then holds no
quota.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.operators.kuberay import desired_workers
from kubesim.operators.kueue.common import (
    ADMISSION_CONDITIONS,
    JOB_KINDS,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RC,
    RJ,
    WL,
    WPC,
    condition,
    is_finished,
    touch_job,
    workload_name,
)
from kubesim.store import Obj
from kubesim.util import get_path, owner_ref

if TYPE_CHECKING:
    from kubesim.cluster import Cluster
    from kubesim.operators.kueue import Kueue


def workload_for(cluster: Cluster, rc: Obj) -> Obj | None:
    """The Workload Kueue made for job ``rc`` (it owns it), if any."""
    for key, ns, name in cluster.store.dependents(rc["metadata"]["uid"]):
        if key == WL:
            return cluster.store.get(key, ns, name)
    return None


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
    cluster_spec = (spec.get("rayClusterSpec") or {}) if key == RJ else spec
    out: list[tuple[str, Any]] = [("head", get_path(cluster_spec, "headGroupSpec", "template"))]
    out += [
        (g.get("groupName"), g.get("template")) for g in cluster_spec.get("workerGroupSpecs") or []
    ]
    if key == RJ and _has_submitter(job):
        spec["submitterPodTemplate"] = submitter_template(job)
        out.append(("submitter", spec["submitterPodTemplate"]))
    return out


def pod_sets(rc: Obj, key: str = RC) -> list[dict[str, Any]]:
    """The Workload's pod sets: ``head`` and one per worker group, at full size (and a
    RayJob's ``submitter``)."""
    spec = rc.get("spec") or {}
    if key == RJ:
        spec = spec.get("rayClusterSpec") or {}
    sets = [
        {
            "name": "head",
            "count": 1,
            "template": copy.deepcopy(get_path(spec, "headGroupSpec", "template", default={})),
        }
    ]
    for g in spec.get("workerGroupSpecs") or []:
        sets.append(
            {
                "name": g.get("groupName", "workers"),
                "count": desired_workers({**g, "suspend": False}),
                "template": copy.deepcopy(g.get("template") or {}),
            }
        )
    if key == RJ and _has_submitter(rc):
        sets.append(
            {"name": "submitter", "count": 1, "template": copy.deepcopy(submitter_template(rc))}
        )
    return sets


def sync_job(kueue: Kueue, rc: Obj, key: str = RC) -> bool:
    """Bring job ``rc``'s (a RayCluster or, ``key`` RJ, a RayJob) Workload in line with
    it: create it (once its priority class exists), finish it when the RayJob finished,
    release its quota when its user suspends it, queue it again when its user resumes it.
    True when anything was written."""
    cluster = kueue.cluster
    wl = workload_for(cluster, rc)
    if wl is not None and key == RJ:
        deploy = get_path(rc, "status", "jobDeploymentStatus")
        if deploy in ("Complete", "Failed"):
            return _finish(kueue, wl, rc)
        if is_finished(wl):
            return False
    labels = rc["metadata"].get("labels") or {}
    suspended = bool((rc.get("spec") or {}).get("suspend"))
    if wl is None:
        prio, prio_ref = 0, None
        pc = labels.get(PRIORITY_LABEL)
        wpc = cluster.store.get(WPC, "", pc) if pc else None
        if pc and wpc is None:
            kueue.waiting_for_class.add((key, rc["metadata"]["namespace"], rc["metadata"]["name"]))
            return False
        if wpc is not None:
            prio = int(wpc.get("value", 0))
            prio_ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": pc}
        wl = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": workload_name(
                    rc["metadata"]["name"], rc["metadata"]["uid"], JOB_KINDS[key]
                ),
                "namespace": rc["metadata"]["namespace"],
                "labels": {"kueue.x-k8s.io/job-uid": rc["metadata"]["uid"]},
                "ownerReferences": [owner_ref(rc)],
            },
            "spec": {
                "queueName": labels[QUEUE_LABEL],
                "podSets": pod_sets(rc, key),
                "priority": prio,
                "active": True,
            },
        }
        if prio_ref:
            wl["spec"]["priorityClassRef"] = prio_ref
        if not suspended:
            rc["spec"]["suspend"] = True  # a job created running goes back to the queue
            touch_job(cluster, key, rc)
        cluster.create_object(cluster.rt(WL), wl, admit=False)
        kueue.need_admit = True
        return True
    # Admitted, not only holding quota: a Workload whose quota is reserved waits, its job
    # suspended, for its admission checks (Kueue's workload.IsAdmitted reads the
    # condition). Taking that for a user's suspension deactivated gangs waiting for nodes.
    admitted = any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in get_path(wl, "status", "conditions", default=[])
    )
    if suspended and admitted:
        # Suspended by its user: release the quota and stop queueing until resumed.
        set_pending(
            cluster, wl, "Stopped", "The workload is deactivated by the job's user", active=False
        )
        kueue.need_admit = True
        return True
    if not suspended and not admitted:
        # Resumed by its user (or started without admission): back into the queue.
        wl["spec"]["active"] = True
        wl["spec"]["podSets"] = pod_sets(rc, key)
        cluster.update_object(cluster.rt(WL), wl)
        rc["spec"]["suspend"] = True
        touch_job(cluster, key, rc)
        kueue.need_admit = True
        return True
    return False


def _finish(kueue: Kueue, wl: Obj, rj: Obj) -> bool:
    """Kueue's job reconciler on a finished job: the Workload ``Finished`` (reason
    ``Succeeded`` when the Ray job SUCCEEDED, else ``Failed``; the RayJob's message), its
    quota released; an event ``FinishedWorkload`` on the job."""
    if is_finished(wl):
        return False
    cluster = kueue.cluster
    st = rj.get("status") or {}
    ok = st.get("jobStatus") == "SUCCEEDED"
    old = get_path(wl, "status", "conditions", default=[])
    wl.setdefault("status", {})["conditions"] = [
        *[c for c in old if c.get("type") != "Finished"],
        condition("Finished", True, "Succeeded" if ok else "Failed", st.get("message", ""), old),
    ]
    cluster.update_object(cluster.rt(WL), wl)
    cluster.record_event(
        rj,
        "Normal",
        "FinishedWorkload",
        f"Workload '{wl['metadata']['namespace']}/{wl['metadata']['name']}' is declared finished",
        "kueue-job-controller",
    )
    kueue.need_admit = True
    return True


def set_pending(cluster: Cluster, wl: Obj, reason: str, message: str, active: bool = True) -> bool:
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
