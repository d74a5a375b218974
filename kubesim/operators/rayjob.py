"""An emulation of KubeRay's RayJob controller (ray.io/v1, KubeRay v1.4+ behaviour).

It runs the state machine of ``status.jobDeploymentStatus`` as ``rayjob_controller.go`` does
(``""`` → ``Initializing`` → ``Running`` → ``Complete`` | ``Failed``, with ``Suspending``,
``Suspended`` and ``Retrying``), so that a control plane sees what it would see on a real
cluster: the RayCluster, the submitter Job, the Ray job's status read from the head's job
table (``rayruntime.py``), deadlines, retries and clean-up. kubesim/README.md (*KubeRay for
RayJob*) says what each state does. Time is the cluster's clock; a timer wakes each RayJob
when something is due.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from kubesim.controller import TimerHeap
from kubesim.errors import ApiError
from kubesim.operators import batchjob
from kubesim.operators.rayjob_submitter import (
    check_submitter,
    rayjob_labels,
    submitter_template,
)
from kubesim.operators.rayjob_validation import validate
from kubesim.operators.rayruntime import DriverRun
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, owner_ref, parse_time, stamp, suffix

# How often the state of a job on a real Ray head (``realray.py``) is read again.
REAL_JOB_POLL_SECONDS = 2.0

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

KEY = "rayjobs.ray.io"
RC = "rayclusters.ray.io"
FINALIZER = "ray.io/rayjob-finalizer"
COMPONENT = "rayjob-controller"
DASHBOARD_PORT = 8265
TERMINAL_DEPLOY = ("Complete", "Failed", "ValidationFailed")
JobKey = tuple[str, str]


class RayJobController:
    """Reconciles RayJobs into a RayCluster, a submitter Job and the RayJob status."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget pending work and timers."""
        self.dirty: set[JobKey] = set()
        self.timers = TimerHeap()

    # -- controller protocol --------------------------------------------------------------

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """RayJob writes by others and writes of what a RayJob owns mark it dirty."""
        ref = new if new is not None else old
        assert ref is not None
        meta = ref["metadata"]
        if rt.key == KEY:
            if new is not None and old is not new:
                self.dirty.add((meta["namespace"], meta["name"]))
            return
        if rt.key in (RC, batchjob.KEY):
            for owner in meta.get("ownerReferences") or []:
                if owner.get("kind") == "RayJob" and owner.get("controller"):
                    self.dirty.add((meta["namespace"], owner["name"]))

    def wake_at(self, at: float, ns: str, name: str) -> None:
        """Reconcile ``ns/name`` again at ``at`` (cluster clock)."""
        self.timers.wake_at(at, ns, name)

    def wake_due(self, at: float) -> bool:
        """Mark RayJobs whose timer is due dirty (ticker); True when any was."""
        return self.timers.mark_due(at, self.dirty)

    def reconcile(self) -> bool:
        """Reconcile every dirty RayJob; True when anything was written."""
        busy = False
        while self.dirty:
            ns, name = self.dirty.pop()
            rj = self.cluster.store.get(KEY, ns, name)
            if rj is not None:
                busy = self._reconcile_one(rj) or busy
        return busy

    # -- one RayJob ---------------------------------------------------------------------

    def _reconcile_one(self, rj: Obj) -> bool:
        meta = rj["metadata"]
        spec = rj.get("spec") or {}
        if spec.get("managedBy") not in (None, "", "ray.io/kuberay-operator"):
            return False
        if meta.get("deletionTimestamp"):
            return self._finalize(rj)
        busy = False
        # KubeRay takes one step per reconcile and requeues; here the steps run back to
        # back until the state stops moving, so a write returns a settled RayJob.
        for _ in range(8):
            before = (rj.get("status") or {}).get("jobDeploymentStatus", "")
            stepped = self._step(rj)
            busy = stepped or busy
            after = (rj.get("status") or {}).get("jobDeploymentStatus", "")
            if not stepped or after == before:
                break
        return busy

    def _finalize(self, rj: Obj) -> bool:
        """Deletion: stop a Ray job not yet terminal, then drop the finalizer."""
        finalizers = rj["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            return False
        st = rj.get("status") or {}
        if st.get("jobStatus") not in ("SUCCEEDED", "FAILED", "STOPPED") and st.get("jobId"):
            self.cluster.rayruntime.stop(
                rj["metadata"]["namespace"], st.get("rayClusterName", ""), st["jobId"]
            )
        rj["metadata"]["finalizers"] = [f for f in finalizers if f != FINALIZER]
        self.cluster.update_object(self.cluster.rt(KEY), rj)
        return True

    def _event(self, rj: Obj, etype: str, reason: str, message: str) -> None:
        self.cluster.record_event(rj, etype, reason, message, COMPONENT)

    # Named exception to ruff's C901 (max-complexity 12): KubeRay's switch over
    # jobDeploymentStatus, one branch per state as rayjob_controller.go has them.
    def _step(self, rj: Obj) -> bool:  # noqa: C901
        """One pass of KubeRay's reconcile; True when anything was written."""
        meta = rj["metadata"]
        spec = rj.get("spec") or {}
        old = copy.deepcopy(rj.get("status") or {})
        st: dict[str, Any] = copy.deepcopy(old)
        state = st.get("jobDeploymentStatus", "")
        now = self.cluster.clock.time()
        wrote = False

        problem = validate(rj)
        if problem is not None and state not in TERMINAL_DEPLOY:
            reason = "InvalidRayJobMetadata" if "metadata" in problem[:24] else "InvalidRayJobSpec"
            self._event(rj, "Warning", reason, problem)
            st.update(
                jobDeploymentStatus="ValidationFailed", reason="ValidationFailed", message=problem
            )
            return self._write(rj, old, st, force=True)

        if state == "":
            if FINALIZER not in (meta.get("finalizers") or []):
                meta.setdefault("finalizers", []).append(FINALIZER)
                self.cluster.update_object(self.cluster.rt(KEY), rj)
                wrote = True
            mode = spec.get("submissionMode") or "K8sJobMode"
            if mode != "InteractiveMode" and not st.get("jobId"):
                st["jobId"] = spec.get("jobId") or f"{meta['name']}-{suffix()}"
            if not st.get("rayClusterName"):
                selected = get_path(spec, "clusterSelector", "ray.io/cluster")
                st["rayClusterName"] = selected or f"{meta['name']}-{suffix()}"
            st.setdefault("jobStatus", "")
            st["jobDeploymentStatus"] = "Initializing"
            st["startTime"] = stamp(now)
        elif state == "Initializing":
            self._arm_deadlines(rj)
            if self._suspending(spec, st) or self._deadlines(spec, st, now, pre=True):
                pass
            else:
                rc = self._get_or_create_cluster(rj, st)
                if rc is None:
                    return wrote
                if not st.get("dashboardURL"):
                    if get_path(rc, "status", "state") != "ready":
                        st["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})
                        return self._write(rj, old, st) or wrote
                    url = self._dashboard_url(rc)
                    if url is None:
                        return wrote
                    st["dashboardURL"] = url
                mode = spec.get("submissionMode") or "K8sJobMode"
                if mode == "InteractiveMode":
                    st["jobDeploymentStatus"] = "Waiting"
                else:
                    if mode == "K8sJobMode":
                        if not self._ensure_submitter(rj, st, rc):
                            return wrote
                    elif mode == "HTTPMode":
                        self.cluster.rayruntime.submit(
                            meta["namespace"], rc["metadata"]["name"], st["jobId"], rj
                        )
                    st["jobDeploymentStatus"] = "Running"
        elif state == "Waiting":
            if not self._deadlines(spec, st, now, pre=True, active=False) and spec.get("jobId"):
                st["jobId"] = spec["jobId"]
                st["jobDeploymentStatus"] = "Running"
        elif state == "Running":
            self._arm_deadlines(rj)
            if not (self._suspending(spec, st) or self._deadlines(spec, st, now, pre=False)):
                self._running(rj, spec, st, now)
        elif state in ("Suspending", "Retrying"):
            self._release(rj, st)
            for k in ("rayClusterStatus", "rayClusterName", "dashboardURL", "jobId", "message"):
                st.pop(k, None)
            for k in ("reason", "rayJobInfo", "jobStatusCheckFailureStartTime"):
                st.pop(k, None)
            st["jobStatus"] = ""
            st["jobDeploymentStatus"] = "Suspended" if state == "Suspending" else ""
        elif state == "Suspended":
            if spec.get("suspend"):
                return wrote
            st["jobStatus"] = ""
            st["jobDeploymentStatus"] = ""
        elif state in ("Complete", "Failed"):
            return self._finished(rj, spec, st, now) or wrote
        else:
            return wrote
        self._count_and_retry(spec, st)
        return self._write(rj, old, st) or wrote

    # -- steps --------------------------------------------------------------------------

    @staticmethod
    def _suspending(spec: dict[str, Any], st: dict[str, Any]) -> bool:
        """``suspend`` moves only Initializing and Running to Suspending, as in KubeRay."""
        if spec.get("suspend") and st.get("jobDeploymentStatus") in ("Initializing", "Running"):
            st["jobDeploymentStatus"] = "Suspending"
            return True
        return False

    def _deadlines(
        self, spec: dict[str, Any], st: dict[str, Any], now: float, pre: bool, active: bool = True
    ) -> bool:
        """``activeDeadlineSeconds`` (and, before Running, ``preRunningDeadlineSeconds``)
        counted from ``startTime``; Failed with KubeRay's reason and message when past."""
        start_text = st.get("startTime")
        if not start_text:
            return False
        start = parse_time(start_text).timestamp()
        checks = []
        if active and spec.get("activeDeadlineSeconds") is not None:
            checks.append(("activeDeadlineSeconds", "DeadlineExceeded"))
        if pre and spec.get("preRunningDeadlineSeconds") is not None:
            checks.append(("preRunningDeadlineSeconds", "PreRunningDeadlineExceeded"))
        for field, reason in checks:
            limit = int(spec[field])
            if now < start + limit:
                continue
            st["jobDeploymentStatus"] = "Failed"
            st["reason"] = reason
            st["message"] = (
                f"The RayJob has passed the {field}. StartTime: {start_text}. "
                f"{field[0].upper()}{field[1:]}: {limit}"
            )
            return True
        return False

    def _arm_deadlines(self, rj: Obj) -> None:
        spec = rj.get("spec") or {}
        start_text = get_path(rj, "status", "startTime")
        if not start_text:
            return
        start = parse_time(start_text).timestamp()
        for field in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
            if spec.get(field) is not None:
                self.wake_at(
                    start + int(spec[field]), rj["metadata"]["namespace"], rj["metadata"]["name"]
                )

    def _get_or_create_cluster(self, rj: Obj, st: dict[str, Any]) -> Obj | None:
        ns = rj["metadata"]["namespace"]
        name = st["rayClusterName"]
        rc = self.cluster.store.get(RC, ns, name)
        if rc is not None:
            return rc
        spec = rj.get("spec") or {}
        if spec.get("clusterSelector"):
            self._event(
                rj,
                "Warning",
                "RayClusterNotFound",
                f"RayCluster {ns}/{name} set in the clusterSelector is not found. "
                "It must be created manually",
            )
            return None
        labels = dict(rj["metadata"].get("labels") or {})
        labels.update(
            {
                "ray.io/originated-from-cr-name": rj["metadata"]["name"],
                "ray.io/originated-from-crd": "RayJob",
                "ray.io/job-submission-mode": spec.get("submissionMode") or "K8sJobMode",
            }
        )
        rc = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": labels,
                "annotations": dict(rj["metadata"].get("annotations") or {}),
                "ownerReferences": [owner_ref(rj)],
            },
            "spec": copy.deepcopy(spec.get("rayClusterSpec") or {}),
        }
        try:
            self.cluster.create_object(self.cluster.rt(RC), rc)
        except ApiError as exc:
            self._event(
                rj,
                "Warning",
                "FailedToCreateRayCluster",
                f"Failed to create RayCluster {ns}/{name}: {exc.message}",
            )
            return None
        self._event(rj, "Normal", "CreatedRayCluster", f"Created RayCluster {ns}/{name}")
        return self.cluster.store.get(RC, ns, name)

    def _dashboard_url(self, rc: Obj) -> str | None:
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        svc = self.cluster.store.get("services", ns, f"{name}-head-svc")
        if svc is None:
            return None
        for p in get_path(svc, "spec", "ports", default=[]):
            if p.get("name") == "dashboard":
                return f"{name}-head-svc.{ns}.svc.cluster.local:{p['port']}"
        return None

    def _ensure_submitter(self, rj: Obj, st: dict[str, Any], rc: Obj) -> bool:
        """The submitter Job ``<rayjob name>`` exists (created if not); False on error."""
        ns, name = rj["metadata"]["namespace"], rj["metadata"]["name"]
        if self.cluster.store.get(batchjob.KEY, ns, name) is not None:
            return True
        spec = rj.get("spec") or {}
        backoff = get_path(spec, "submitterConfig", "backoffLimit")
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": rayjob_labels(name),
                "ownerReferences": [owner_ref(rj)],
            },
            "spec": {
                "backoffLimit": 2 if backoff is None else int(backoff),
                "template": submitter_template(rj, st, rc),
            },
        }
        try:
            self.cluster.create_object(self.cluster.rt(batchjob.KEY), job)
        except ApiError as exc:
            self._event(
                rj,
                "Warning",
                "FailedToCreateRayJobSubmitter",
                f"Failed to create new Kubernetes Job {ns}/{name}: {exc.message}",
            )
            return False
        self._event(rj, "Normal", "CreatedRayJobSubmitter", f"Created Kubernetes Job {ns}/{name}")
        return True

    def _running(self, rj: Obj, spec: dict[str, Any], st: dict[str, Any], now: float) -> None:
        ns = rj["metadata"]["namespace"]
        rc = self._get_or_create_cluster(rj, st)
        if rc is None or not self._reconcile_service(rj, rc):
            return
        mode = spec.get("submissionMode") or "K8sJobMode"
        finished: str | None = None
        if mode == "K8sJobMode":
            done, finished = check_submitter(self.cluster.store, rj, st)
            if done:
                return
        real = self.cluster.realray
        if real is not None and real.is_real(ns, rc["metadata"]["name"]):
            # A real driver's start and end have no timer: its head is asked again shortly
            # (also before its submitter has submitted it, or the job would show RUNNING
            # only once its submitter ended).
            self.wake_at(now + REAL_JOB_POLL_SECONDS, ns, rj["metadata"]["name"])
        run = self.cluster.rayruntime.job(ns, rc["metadata"]["name"], st.get("jobId", ""))
        if run is None:
            if mode == "HTTPMode":
                self.cluster.rayruntime.submit(ns, rc["metadata"]["name"], st["jobId"], rj)
            elif finished is not None:
                st["jobDeploymentStatus"] = "Failed"
                st["reason"] = "AppFailed"
                st["message"] = "Submitter completed but Ray job not found in RayCluster."
            return
        self._follow(st, rc, run, now, mode != "K8sJobMode" or finished is not None)

    @staticmethod
    def _follow(
        st: dict[str, Any], rc: Obj, run: DriverRun, now: float, submitter_done: bool
    ) -> None:
        """Copy the Ray job's state into the status; terminal once the Ray job is and
        (with a submitter) the submitter Job finished, as KubeRay refines it."""
        status = run.status(now)
        deploy, reason = "Running", ""
        if status in ("SUCCEEDED", "FAILED", "STOPPED") and submitter_done:
            deploy = "Complete"
            if status == "FAILED":
                deploy, reason = "Failed", "AppFailed"
        st["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})
        st["jobStatus"] = status
        st["jobDeploymentStatus"] = deploy
        if reason:
            st["reason"] = reason
        else:
            st.pop("reason", None)
        st["message"] = run.message_at(now)
        info: dict[str, str] = {}
        if now >= run.start:
            info["startTime"] = stamp(run.start)
        ended = run.end_time(now)
        if ended is not None:
            info["endTime"] = stamp(ended)
        st["rayJobInfo"] = info

    def _reconcile_service(self, rj: Obj, rc: Obj) -> bool:
        """KubeRay's ``reconcileServices``: a head service ``<rayjob>-head-svc`` owned by the
        RayJob with the RayCluster head service's ports and selector, re-pointed when the
        RayCluster changes (not with ``clusterSelector``). False when it could not be made."""
        if (rj.get("spec") or {}).get("clusterSelector"):
            return True
        ns, name = rj["metadata"]["namespace"], rj["metadata"]["name"]
        head = self.cluster.store.get("services", ns, f"{rc['metadata']['name']}-head-svc")
        if head is None:
            return True  # KubeRay builds it from the RayCluster; ours appears with the head
        rt = self.cluster.rt("services")
        svc_name = f"{name}-head-svc"
        spec = {
            k: copy.deepcopy(v)
            for k, v in head["spec"].items()
            if k in ("ports", "selector", "type")
        }
        old = self.cluster.store.get("services", ns, svc_name)
        if old is not None:
            if (old["spec"].get("selector") or {}) == spec.get("selector"):
                return True
            old["spec"].update(spec)
            self.cluster.update_object(rt, old)
            self._event(rj, "Normal", "UpdatedService", f"Updated the service {ns}/{svc_name}")
            return True
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": svc_name,
                "namespace": ns,
                "labels": {
                    "ray.io/originated-from-cr-name": name,
                    "ray.io/originated-from-crd": "RayJob",
                    "ray.io/node-type": "head",
                    "ray.io/identifier": f"{name}-head",
                },
                "ownerReferences": [owner_ref(rj)],
            },
            "spec": spec,
        }
        try:
            self.cluster.create_object(rt, svc)
        except ApiError as exc:
            self._event(
                rj,
                "Warning",
                "FailedToCreateService",
                f"Failed to create the service {ns}/{svc_name}, {exc.message}",
            )
            return False
        self._event(rj, "Normal", "CreatedService", f"Created the service {ns}/{svc_name}")
        return True

    def _release(self, rj: Obj, st: dict[str, Any]) -> None:
        """Delete the RayCluster (unless selected) and the submitter Job, with events."""
        ns, name = rj["metadata"]["namespace"], rj["metadata"]["name"]
        self._delete_cluster(rj, st)
        job = self.cluster.store.get(batchjob.KEY, ns, name)
        if job is not None and not job["metadata"].get("deletionTimestamp"):
            self.cluster.delete_object(self.cluster.rt(batchjob.KEY), job)
            self._event(
                rj, "Normal", "DeletedRayJobSubmitter", f"Deleted submitter K8s Job {ns}/{name}"
            )

    def _delete_cluster(self, rj: Obj, st: dict[str, Any]) -> None:
        if (rj.get("spec") or {}).get("clusterSelector"):
            return
        ns = rj["metadata"]["namespace"]
        rc = self.cluster.store.get(RC, ns, st.get("rayClusterName", ""))
        if rc is not None and not rc["metadata"].get("deletionTimestamp"):
            self.cluster.delete_object(self.cluster.rt(RC), rc)
            self._event(
                rj, "Normal", "DeletedRayCluster", f"Deleted cluster {ns}/{rc['metadata']['name']}"
            )

    def _finished(self, rj: Obj, spec: dict[str, Any], st: dict[str, Any], now: float) -> bool:
        """Complete/Failed: shutdownAfterJobFinishes deletes the RayCluster after the TTL."""
        if spec.get("clusterSelector") or not spec.get("shutdownAfterJobFinishes"):
            return False
        end_text = st.get("endTime")
        if not end_text:
            return False
        due = parse_time(end_text).timestamp() + int(spec.get("ttlSecondsAfterFinished") or 0)
        if now < due:
            self.wake_at(due, rj["metadata"]["namespace"], rj["metadata"]["name"])
            return False
        rc = self.cluster.store.get(RC, rj["metadata"]["namespace"], st.get("rayClusterName", ""))
        if rc is None:
            return False
        self._delete_cluster(rj, st)
        return True

    @staticmethod
    def _count_and_retry(spec: dict[str, Any], st: dict[str, Any]) -> None:
        """KubeRay's ``checkBackoffLimitAndUpdateStatusIfNeeded``."""
        failed = int(st.get("failed") or 0)
        succeeded = int(st.get("succeeded") or 0)
        if st.get("jobDeploymentStatus") == "Failed":
            failed += 1
        if st.get("jobStatus") == "SUCCEEDED" and st.get("jobDeploymentStatus") == "Complete":
            succeeded += 1
        st["failed"] = failed
        st["succeeded"] = succeeded
        limit = spec.get("backoffLimit")
        if (
            st.get("jobDeploymentStatus") == "Failed"
            and limit is not None
            and failed < int(limit) + 1
            and st.get("reason") not in ("DeadlineExceeded", "JobStatusCheckTimeoutExceeded")
        ):
            st["jobDeploymentStatus"] = "Retrying"

    def _write(self, rj: Obj, old: dict[str, Any], st: dict[str, Any], force: bool = False) -> bool:
        """KubeRay's ``updateRayJobStatus``: write only when a state field moved."""

        def cluster_view(s: dict[str, Any]) -> Any:
            rcs = dict(s.get("rayClusterStatus") or {})
            rcs.pop("lastUpdateTime", None)
            return rcs

        moved = (
            force
            or (old.get("jobStatus") or "") != (st.get("jobStatus") or "")
            or (old.get("jobDeploymentStatus") or "") != (st.get("jobDeploymentStatus") or "")
            or cluster_view(old) != cluster_view(st)
        )
        if not moved:
            return False
        if st.get("jobDeploymentStatus") in ("Complete", "Failed") and old.get(
            "jobDeploymentStatus"
        ) != st.get("jobDeploymentStatus"):
            st["endTime"] = stamp(self.cluster.clock.time())
        st["observedGeneration"] = rj["metadata"].get("generation", 1)
        # KubeRay's status strings are omitempty: "" (JobStatusNew, no message) is absent.
        rj["status"] = {k: v for k, v in st.items() if v != "" and v is not None}
        self.cluster.update_object(self.cluster.rt(KEY), rj)
        return True
