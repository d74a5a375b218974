"""An emulation of Kubernetes' Job controller (``batch/v1`` Job), enough for KubeRay's
RayJob submitter and for plain one-pod Jobs. As kube-controller-manager does: defaults
at create (:func:`default_job`), pods from the template owned by the Job through the
normal pod path, failed pods replaced after the pod-failure backoff up to
``backoffLimit`` (then ``Failed``), ``Complete`` at ``completions``, the status counts,
and ``spec.suspend`` (Kueue's lever). Simplified: no job-tracking finalizer, Indexed
mode, ``podFailurePolicy``, ``successPolicy``, deadline or TTL; a running pod ends only
when a simulated process (the RayJob submitter) or the admin
``POST /_kubesim/pods/exit`` ends it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.controller import TimerHeap
from kubesim.errors import ApiError
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import owner_ref, parse_time, stamp, suffix

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

KEY = "jobs.batch"
JobKey = tuple[str, str]
# The Job controller's pod-failure backoff: DefaultJobPodFailureBackOff, doubling, capped.
BACKOFF_BASE = 10.0
BACKOFF_MAX = 360.0


def default_job(job: Obj) -> None:
    """The API server's defaulting of a new Job (its uid is already set)."""
    meta = job["metadata"]
    uid = meta["uid"]
    spec = job.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("completions", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    labels = tmeta.setdefault("labels", {})
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": uid,
                "batch.kubernetes.io/job-name": meta["name"],
                "controller-uid": uid,
                "job-name": meta["name"],
            }
        )
    tspec = template.setdefault("spec", {})
    tspec.setdefault("restartPolicy", "Never")


def is_finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` when that condition is True, else None."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def finished_at(job: Obj) -> str | None:
    """The lastTransitionTime of the Job's Complete/Failed condition."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "")
    return None


class JobController:
    """Keeps each Job's pods and status (the Job controller of kube-controller-manager)."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget pending work (the store was wiped or reloaded)."""
        self.dirty: set[JobKey] = set()
        # (due time on the cluster clock, ns, name): Jobs waiting out a pod-failure backoff.
        self.timers = TimerHeap()

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Job writes by others and writes of owned pods mark the Job dirty."""
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.key == KEY:
            if new is not None and old is not new:
                self.dirty.add((meta["namespace"], meta["name"]))
        elif rt.kind == "Pod":
            for owner in meta.get("ownerReferences") or []:
                if owner.get("kind") == "Job" and owner.get("controller"):
                    self.dirty.add((meta["namespace"], owner["name"]))

    def wake_due(self, at: float) -> bool:
        """Mark Jobs whose backoff is over dirty (ticker); True when any was."""
        return self.timers.mark_due(at, self.dirty)

    def reconcile(self) -> bool:
        """Reconcile every dirty Job; True when anything was written."""
        busy = False
        while self.dirty:
            ns, name = self.dirty.pop()
            job = self.cluster.store.get(KEY, ns, name)
            if job is not None and not job["metadata"].get("deletionTimestamp"):
                busy = self._reconcile_one(job) or busy
        return busy

    def _pods(self, job: Obj) -> list[Obj]:
        out = []
        for k, ns, name in self.cluster.store.dependents(job["metadata"]["uid"]):
            if k == "pods":
                pod = self.cluster.store.get(k, ns, name)
                if pod is not None:
                    out.append(pod)
        return sorted(out, key=lambda p: p["metadata"]["creationTimestamp"])

    def _reconcile_one(self, job: Obj) -> bool:
        spec = job.get("spec") or {}
        pods = self._pods(job)
        phases = [(p.get("status") or {}).get("phase", "Pending") for p in pods]
        succeeded = phases.count("Succeeded")
        failed = phases.count("Failed")
        active = [
            p for p, ph in zip(pods, phases, strict=True) if ph not in ("Succeeded", "Failed")
        ]
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec.get("parallelism") or 1)
        backoff_limit = int(spec.get("backoffLimit", 6))
        now = self.cluster.clock.time()
        busy = False
        finished = is_finished(job)
        if finished is None and not spec.get("suspend"):
            if failed > backoff_limit:
                finished = "Failed"
            elif succeeded >= completions:
                finished = "Complete"
            else:
                want = min(parallelism, completions - succeeded) - len(active)
                due = self._backoff_due(pods, failed)
                if want > 0 and due > now:
                    self.timers.wake_at(due, *self._key(job))
                elif want > 0:
                    for _ in range(want):
                        if self._create_pod(job) is None:
                            break
                        busy = True
                    pods = self._pods(job)
                    active = [
                        p
                        for p in pods
                        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                    ]
                elif want < 0:
                    active = self._delete_extra(active, -want)
                    busy = True
        if (finished == "Failed" or (finished is None and spec.get("suspend"))) and active:
            # The controller deletes the pods still running when the Job fails or is
            # suspended.
            for p in active:
                self.cluster.delete_object(self.cluster.rt("pods"), p)
            busy = True
            active = []
        return self._write_status(job, active, succeeded, failed, finished, now) or busy

    def _delete_extra(self, active: list[Obj], count: int) -> list[Obj]:
        """Parallelism was lowered: delete ``count`` active pods as the controller does,
        those not running first, then the newest; the pods left."""
        newest_first = sorted(
            active, key=lambda p: p["metadata"]["creationTimestamp"], reverse=True
        )
        doomed = sorted(
            newest_first, key=lambda p: (p.get("status") or {}).get("phase") == "Running"
        )[:count]
        for p in doomed:
            self.cluster.delete_object(self.cluster.rt("pods"), p)
        return [p for p in active if p not in doomed]

    @staticmethod
    def _key(job: Obj) -> JobKey:
        return job["metadata"]["namespace"], job["metadata"]["name"]

    def _backoff_due(self, pods: list[Obj], failed: int) -> float:
        """When the next pod may be created after ``failed`` failures (the controller's
        exponential pod-failure backoff, from the last failure's finish time)."""
        if failed == 0:
            return 0.0
        last = 0.0
        for p in pods:
            for cs in (p.get("status") or {}).get("containerStatuses") or []:
                end = ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
                if end:
                    last = max(last, parse_time(end).timestamp())
        delay = min(BACKOFF_MAX, BACKOFF_BASE * 2 ** (failed - 1))
        return last + delay

    def _create_pod(self, job: Obj) -> Obj | None:
        template = copy.deepcopy(job["spec"].get("template") or {})
        meta = template.get("metadata") or {}
        name = job["metadata"]["name"]
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{suffix()}",
                "generateName": f"{name}-",
                "namespace": job["metadata"]["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_ref(job)],
            },
            "spec": template.get("spec") or {},
        }
        try:
            self.cluster.create_object(self.cluster.rt("pods"), pod)
        except ApiError as exc:
            self.cluster.record_event(
                job, "Warning", "FailedCreate", f"Error creating: {exc.message}", "job-controller"
            )
            return None
        self.cluster.record_event(
            job,
            "Normal",
            "SuccessfulCreate",
            f"Created pod: {pod['metadata']['name']}",
            "job-controller",
        )
        return pod

    def _suspension(self, job: Obj, status: dict[str, Any], when: str) -> None:
        """The ``Suspended`` condition as the Job controller keeps it: True (``JobSuspended``)
        while ``spec.suspend`` is set; on resume False (``JobResumed``) and ``startTime``
        reset to now; an event for each turn."""
        conds = list(status.get("conditions") or [])
        prev = next((c for c in conds if c.get("type") == "Suspended"), None)
        suspended = bool(job["spec"].get("suspend"))
        if suspended == (prev is not None and prev.get("status") == "True"):
            return
        if not suspended and prev is None:
            return  # never suspended: nothing to resume
        reason, message = (
            ("JobSuspended", "Job suspended") if suspended else ("JobResumed", "Job resumed")
        )
        cond = {
            "type": "Suspended",
            "status": "True" if suspended else "False",
            "reason": reason,
            "message": message,
            "lastProbeTime": when,
            "lastTransitionTime": when,
        }
        status["conditions"] = [c for c in conds if c.get("type") != "Suspended"] + [cond]
        if not suspended:
            status["startTime"] = when
        event = "Suspended" if suspended else "Resumed"
        self.cluster.record_event(job, "Normal", event, message, "job-controller")

    def _write_status(
        self,
        job: Obj,
        active: list[Obj],
        succeeded: int,
        failed: int,
        finished: str | None,
        now: float,
    ) -> bool:
        old = job.get("status") or {}
        when = stamp(now)
        status: dict[str, Any] = {k: v for k, v in old.items() if k in ("startTime", "conditions")}
        if finished is None:
            self._suspension(job, status, when)
        if not job["spec"].get("suspend"):
            status.setdefault("startTime", when)
        ready = sum(
            1
            for p in active
            if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        )
        if active:
            status["active"] = len(active)
        status["ready"] = ready
        status["terminating"] = 0
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        status["uncountedTerminatedPods"] = {}
        conds = list(status.get("conditions") or [])
        if finished and not is_finished(job):
            if finished == "Complete":
                interim = (
                    "SuccessCriteriaMet",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                )
            else:
                interim = (
                    "FailureTarget",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                )
            for ctype in (interim[0], finished):
                conds.append(
                    {
                        "type": ctype,
                        "status": "True",
                        "reason": interim[1],
                        "message": interim[2],
                        "lastProbeTime": when,
                        "lastTransitionTime": when,
                    }
                )
            status["conditions"] = conds
            if finished == "Complete":
                status["completionTime"] = when
            self.cluster.record_event(
                job,
                "Normal" if finished == "Complete" else "Warning",
                "Completed" if finished == "Complete" else "BackoffLimitExceeded",
                "Job completed" if finished == "Complete" else interim[2],
                "job-controller",
            )
        elif "completionTime" in old:
            status["completionTime"] = old["completionTime"]
        if status == old:
            return False
        job["status"] = status
        self.cluster.update_object(self.cluster.rt(KEY), job)
        return True
