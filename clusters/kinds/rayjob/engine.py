"""How a job's row and its RayJob are kept in step: apply the RayJob as the row asks,
and fold what KubeRay reports of the run back into the row.

A job moves ``queued -> admitted -> starting -> running -> succeeded | failed | stopped``
(DESIGN "States"). Its RayJob exists, suspended, from the moment it is queued; admission
unsuspends it and KubeRay brings up its Ray cluster, runs the driver and tears the
cluster down after. The row follows ``status.jobStatus`` and ``jobDeploymentStatus``,
keeps its GPUs until their pods are gone (:func:`clusters.rows.transitions.release_gpus`)
and keeps the end of the driver's output, so logs outlive the pods.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.domain.preemption import RESUME_FROM_ENV
from clusters.domain.states import LIVE, State
from clusters.engine.deletion import RELEASED_MESSAGE, delete_claim_templates, pods_of
from clusters.engine.deletion import finish_deletion as _finish_deletion
from clusters.engine.pass_state import Fold, Key, Seen
from clusters.kinds.rayjob.manifests import job_claim_templates, manifests, rayjob
from clusters.kinds.rayjob.states import JOB_FINISHED
from clusters.kube.bundles import BatchBundles, apply_into
from clusters.kube.gateway import Gateway, KubeError
from clusters.models import ClusterRequest, Job
from clusters.queue.backends import manifest_options, queue_backend
from clusters.queue.interface import QueueBackend, QueueView
from clusters.rows.transitions import release_gpus, transition

__all__ = ["manifests"]

log = logging.getLogger(__name__)

RAYJOB = ("ray.io/v1", "RayJob")
SUBMITTER_CONTAINER = "ray-job-submitter"
LOG_TAIL_LINES = 500
LOG_TAIL_BYTES = 64 * 1024
# How long a failing log read may hold back the deletion of a stopped or deleted job.
LOG_TAIL_PATIENCE = timedelta(seconds=60)
# Ray's job statuses (status.jobStatus) and where each leaves the row.
RAY_ENDS = {"SUCCEEDED": State.SUCCEEDED, "FAILED": State.FAILED, "STOPPED": State.STOPPED}


def job_of(cluster: ClusterRequest) -> Job:
    """The job details of a job request (read once per row object)."""
    return cluster.job


def queued_by_kueue(cluster: ClusterRequest) -> bool:
    """Whether Kueue (un)suspends this job's RayJob itself (Kueue mode, its own Ray cluster)."""
    return queue_backend().provisions_queued and job_of(cluster).host_id is None


def wanted_suspend(cluster: ClusterRequest) -> bool | None:
    """The RayJob's ``spec.suspend`` as the row's state asks: suspended while it waits
    in the built-in queue; ``None`` where Kueue suspends and unsuspends it itself."""
    if queued_by_kueue(cluster):
        return None
    return cluster.state == State.QUEUED


def job_manifest(cluster: ClusterRequest) -> dict[str, Any]:
    """The RayJob as applied now (suspended or not: :func:`wanted_suspend`)."""
    options = manifest_options()
    return rayjob(cluster, job_of(cluster), suspend=wanted_suspend(cluster), **options)


def apply(cluster: ClusterRequest, gw: Gateway, *, bundles: BatchBundles | None = None) -> None:
    """Apply the tenant bundle (``bundles``: a batch's), the claim templates of a DRA
    flavor, and the job's RayJob (idempotent)."""
    templates = job_claim_templates(cluster, job_of(cluster), **manifest_options())
    apply_into(cluster.tenant, gw, [*templates, job_manifest(cluster)], bundles=bundles)


def delete_object(gw: Gateway, namespace: str, name: str) -> None:
    """Ask Kubernetes to delete a RayJob (its RayCluster, submitter and pods follow)."""
    gw.delete("ray.io/v1", "RayJob", name, namespace)
    delete_claim_templates(gw, namespace, name)


def holding_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods that still hold resources: not finished (a completed submitter holds none)."""
    return [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]


def converge(
    cluster: ClusterRequest,
    gw: Gateway,
    *,
    bundles: BatchBundles | None = None,
    finish_deletion: bool = True,
) -> None:
    """Do what the job row's state asks of Kubernetes past admission (idempotent). A
    deleting job's deletion is always finished here once its RayJob and pods are gone."""
    state = cluster.state
    if state in (State.QUEUED, State.STARTING, State.RUNNING):
        apply(cluster, gw, bundles=bundles)
    elif state == State.STOPPED:
        keep_log_tail_before_deleting(cluster, gw)
        delete_object(gw, cluster.namespace, cluster.name)
        release_if_gone(cluster, gw)
    elif state in JOB_FINISHED:
        keep_log_tail(cluster, gw)  # once: an earlier read may have failed
        release_if_gone(cluster, gw)
    elif state == State.DELETING:
        keep_log_tail_before_deleting(cluster, gw)
        delete_object(gw, cluster.namespace, cluster.name)
        if gw.get(*RAYJOB, cluster.name, cluster.namespace) is None and not pods_of(gw, cluster):
            _finish_deletion(cluster)


def release_if_gone(cluster: ClusterRequest, gw: Gateway) -> None:
    """Release a finished job's GPUs once none of its pods holds any."""
    if cluster.holds_gpus and not holding_pods(pods_of(gw, cluster)):
        release_gpus(cluster, message=RELEASED_MESSAGE)


def keep_log_tail(
    cluster: ClusterRequest, gw: Gateway, pods: list[dict[str, Any]] | None = None
) -> None:
    """Keep the end of the driver's output on the row, once, before its pods go.

    ``log_tail`` is NULL until then; an empty string means there was nothing to keep
    (no output, or no submitter pod left), so a job is never read again after that.
    A failed read raises :class:`KubeError`: the caller's pass counts it as an error and
    a later pass reads again while the submitter pod is still there.
    ``pods``: the job's pods as a reconcile pass read them (else they are listed)."""
    job = job_of(cluster)
    if job.log_tail is not None:
        return
    text = read_driver_log(
        cluster, gw, tail_lines=LOG_TAIL_LINES, limit_bytes=LOG_TAIL_BYTES, pods=pods
    )
    Job.objects.filter(pk=cluster.pk, log_tail__isnull=True).update(log_tail=text or "")
    job.log_tail = text or ""


def keep_log_tail_before_deleting(
    cluster: ClusterRequest, gw: Gateway, pods: list[dict[str, Any]] | None = None
) -> None:
    """Keep the driver's output before the RayJob (and so its pods) is deleted; a read
    that keeps failing holds the deletion back for :data:`LOG_TAIL_PATIENCE` at most,
    after which the deletion goes ahead without it."""
    try:
        keep_log_tail(cluster, gw, pods)
    except KubeError as exc:
        if timezone.now() - cluster.updated_at < LOG_TAIL_PATIENCE:
            raise
        log.warning("log tail of %s given up: %s", cluster, exc.message)


def submitter_pod(
    cluster: ClusterRequest, gw: Gateway, pods: list[dict[str, Any]] | None = None
) -> dict[str, Any] | None:
    """The pod that submitted the driver and follows its output (newest if several).

    ``pods``: the job's pods as the caller read them (a reconcile pass, from its caches,
    rather than a request per finished job); listed when they hold none."""
    submitters = [
        p
        for p in (pods if pods is not None else pods_of(gw, cluster))
        if SUBMITTER_CONTAINER
        in {c.get("name") for c in (p.get("spec") or {}).get("containers", [])}
    ]
    if not submitters and pods is not None:
        return submitter_pod(cluster, gw)  # the caller's view may predate the pod
    submitters.sort(key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return submitters[-1] if submitters else None


def read_driver_log(
    cluster: ClusterRequest,
    gw: Gateway,
    *,
    tail_lines: int | None = None,
    limit_bytes: int | None = None,
    pods: list[dict[str, Any]] | None = None,
) -> str | None:
    """The driver's output through ``pods/log`` of the submitter; ``None`` without one.
    ``pods`` as for :func:`submitter_pod`."""
    pod = submitter_pod(cluster, gw, pods)
    if pod is None:
        return None
    return gw.pod_log(
        cluster.namespace,
        pod["metadata"]["name"],
        container=SUBMITTER_CONTAINER,
        tail_lines=tail_lines,
        limit_bytes=limit_bytes,
    )


def _time(value: Any) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) and value else None


def fold_job(
    cluster: ClusterRequest,
    rj: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    gw: Gateway,
    view: QueueView | None = None,
    release: list[ClusterRequest] | None = None,
    *,
    copy: bool = False,
) -> bool:
    """Fold one job's RayJob and pods into its row, or repair them; True when the job's
    GPUs were released (capacity freed). ``view`` is the queue backend's (Kueue's
    verdicts on waiting and running jobs). ``release``: a job whose GPUs may go back is
    put there instead, for the caller to release in bulk
    (:func:`clusters.rows.transitions.release_gpus_many`)."""
    state = cluster.state
    if state == State.DELETING or state in JOB_FINISHED:
        return _fold_ended(cluster, rj, pods, gw, release, copy=copy)
    if rj is None:
        if state == State.RUNNING:
            _end(cluster, State.FAILED, "vanished", "its RayJob vanished while the driver ran")
            return False
        apply(cluster, gw)  # queued, admitted or starting: (re)create it
        return False
    if _drifted(cluster, rj):
        apply(cluster, gw)
        return False
    kueue = queued_by_kueue(cluster)
    if state == State.QUEUED:
        if kueue and view is not None:
            view.fold_waiting(cluster)  # Kueue's position and reason, or its admission
        return False  # else the built-in queue decides; the provision task unsuspends
    if state == State.ADMITTED:
        return False
    if kueue and view is not None and view.fold_eviction(cluster):
        return True  # Kueue took its quota back: it waits again, its GPUs released
    _record_status(cluster, rj)
    status = rj.get("status") or {}
    ray_status = str(status.get("jobStatus") or "")
    deployment = str(status.get("jobDeploymentStatus") or "")
    message = str(status.get("message") or "")
    if ray_status in RAY_ENDS or deployment in ("Complete", "Failed"):
        end = RAY_ENDS.get(ray_status, State.FAILED if deployment == "Failed" else State.SUCCEEDED)
        reason = str(status.get("reason") or "") or end.value
        if deployment == "Failed" and end == State.SUCCEEDED:
            end = State.FAILED
        _end(
            cluster, end, reason, message or _default_message(end), gw=gw, status=status, pods=pods
        )
        return False
    if ray_status == "RUNNING" and state == State.STARTING:
        transition(
            cluster,
            State.RUNNING,
            reason="running",
            message="the driver is running",
        )
        Job.objects.filter(pk=cluster.pk, started_at__isnull=True).update(
            started_at=_time(status.get("startTime")) or timezone.now()
        )
    return False


def _suspend_drifted(cluster: ClusterRequest, rj: dict[str, Any]) -> bool:
    """Whether ``suspend`` disagrees with the row (a stale provision pass can land after
    admission's write; unsuspended while queued, it runs unadmitted): apply again."""
    wanted = wanted_suspend(cluster)
    return wanted is not None and bool((rj.get("spec") or {}).get("suspend")) != wanted


def _drifted(cluster: ClusterRequest, rj: dict[str, Any]) -> bool:
    """Whether the RayJob must be applied again: its ``suspend`` (:func:`_suspend_drifted`)
    or, while it waits, the checkpoint its next run starts from (docs/preemption.md)."""
    state = cluster.state
    if state in (State.QUEUED, State.STARTING, State.RUNNING) and _suspend_drifted(cluster, rj):
        return True
    return state == State.QUEUED and _resume_drifted(cluster, rj)


def _resume_drifted(cluster: ClusterRequest, rj: dict[str, Any]) -> bool:
    """Whether a waiting RayJob's GANGWAY_RESUME_FROM (its submitter's) is not the row's
    ``resume_from`` (a job preempted, or evicted by Kueue, after its RayJob was written)."""
    spec = rj.get("spec") or {}
    containers = ((spec.get("submitterPodTemplate") or {}).get("spec") or {}).get("containers")
    env = {e.get("name"): e.get("value") for e in ((containers or [{}])[0].get("env") or [])}
    return (env.get(RESUME_FROM_ENV) or "") != (cluster.resume_from or "")


def _fold_ended(
    cluster: ClusterRequest,
    rj: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    gw: Gateway,
    release: list[ClusterRequest] | None,
    *,
    copy: bool = False,
) -> bool:
    """A deleting, stopped or finished job: see its RayJob (and pods) off, then finish
    the deletion or release the GPUs (or leave them to ``release``). ``copy``: the RayJob
    is MultiKueue's copy, which goes with the manager's original."""
    state = cluster.state
    gone = rj is None or bool(rj["metadata"].get("deletionTimestamp"))
    if state in (State.DELETING, State.STOPPED) and not gone:
        keep_log_tail_before_deleting(cluster, gw, pods)
        if not copy:
            delete_object(gw, cluster.namespace, cluster.name)
        return False
    if state == State.DELETING:
        if rj is None and not pods:
            return _finish_deletion(cluster)
        return False
    if job_of(cluster).log_tail is None and pods:
        keep_log_tail(cluster, gw, pods)  # an earlier read failed: its pods are still here
    if cluster.holds_gpus and not holding_pods(pods):
        if release is not None:
            release.append(cluster)
            return False
        return release_gpus(cluster, message=RELEASED_MESSAGE)
    return False


def _default_message(end: State) -> str:
    return {
        State.SUCCEEDED: "the driver exited successfully",
        State.FAILED: "the job failed",
        State.STOPPED: "the job was stopped",
    }.get(end, "")


def _record_status(cluster: ClusterRequest, rj: dict[str, Any]) -> None:
    """Copy what KubeRay reports (job id, its RayCluster, Ray's status) when it changed."""
    status = rj.get("status") or {}
    job = job_of(cluster)
    fields = {
        "ray_job_id": str(status.get("jobId") or ""),
        "ray_cluster_name": str(status.get("rayClusterName") or ""),
        "job_status": str(status.get("jobStatus") or ""),
    }
    changed = {k: v for k, v in fields.items() if v and getattr(job, k) != v}
    if changed:
        Job.objects.filter(pk=cluster.pk).update(**changed)
        for key, value in changed.items():
            setattr(job, key, value)


def _end(
    cluster: ClusterRequest,
    end: State,
    reason: str,
    message: str,
    *,
    gw: Gateway | None = None,
    status: dict[str, Any] | None = None,
    pods: list[dict[str, Any]] | None = None,
) -> None:
    """Move a job to where it ended, recording Ray's message and the times, then keep
    the driver's output (with ``gw``; ``pods`` as for :func:`keep_log_tail`)."""
    status = status or {}
    now = timezone.now()
    # One transaction: nobody may read the job as ended without Ray's message and times
    # (a reader between the two writes saw "failed" with no reason).
    with transaction.atomic():
        if not transition(cluster, end, reason=reason[:64], message=message[:500]):
            return
        Job.objects.filter(pk=cluster.pk).update(
            message=message,
            started_at=_time(status.get("startTime")) or job_of(cluster).started_at or None,
            ended_at=_time(status.get("endTime")) or now,
        )
    if gw is not None:
        keep_log_tail(cluster, gw, pods)


def wants_provisioning(cluster: ClusterRequest) -> bool:
    """Every state but ``deleted`` asks something of Kubernetes (a RayJob, pods to see off)."""
    return cluster.state != State.DELETED


def wants_object(state: str, backend: QueueBackend) -> bool:
    """Every job row that is not deleted wants its RayJob (the others are orphans)."""
    return True


def needs_bundle(state: str) -> bool:
    """Whether a job in ``state`` needs its tenant's namespace bundle."""
    return state in LIVE


def orphan(obj: dict[str, Any]) -> bool:
    """A managed RayJob no row wants is always ours to delete."""
    return True


def deadline_seconds(cluster: ClusterRequest) -> int | None:
    """A job's ``active_deadline_seconds`` (a candidate's from its unsaved details)."""
    details = getattr(cluster, "_job_details", None)
    if details is None and cluster.pk is not None:
        try:
            details = cluster.job  # loaded with the row where the caller selected it
        except Job.DoesNotExist:
            return None
    return details.active_deadline_seconds if details is not None else None


def objects_stamp(seen: Seen, key: Key, pk: int) -> tuple[Any, ...]:
    """What a job's fold reads of Kubernetes, by resourceVersion: its RayJob and every
    pod of the job (its Ray pods and its submitter)."""
    rj = seen.object("RayJob", key)
    return (
        rj["metadata"]["resourceVersion"] if rj is not None else None,
        tuple(p["metadata"].get("resourceVersion") for p in seen.pods_by_id.get(pk, ())),
    )


def fold(cluster: ClusterRequest, fold: Fold) -> None:
    """Fold one job's RayJob and pods into its row (:func:`fold_job`), releasing its
    GPUs in bulk at the end of the pass."""
    report = fold.report
    rj = fold.seen.object("RayJob", fold.key)
    # A MultiKueue copy (on a worker) is MultiKueue's to write and delete: it deletes it
    # once the job finished, after copying its last status onto the manager's original.
    copy = fold.view.dispatched(cluster)
    if rj is None and copy and cluster.state != State.DELETING:
        rj = fold.view.original(cluster)
        if rj is None:
            if fold.view.fold_eviction(cluster):
                report.evicted.append(cluster.pk)
            return
    if fold_job(
        cluster,
        rj,
        fold.seen.pods_by_id.get(cluster.pk, []),
        fold.gw,
        fold.view,
        release=report.batch.to_release,
        copy=copy,
    ):
        report.released.append(cluster.pk)
