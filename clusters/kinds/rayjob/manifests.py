"""A job's object: its ``RayJob``, pure, rows in and dicts out. Its Ray cluster is the
RayCluster an interactive cluster of the same shape gets (one code path for the GPU
rules)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import yaml

from clusters.domain.images import resolve_image
from clusters.domain.preemption import RESUME_FROM_ENV
from clusters.kinds.raycluster.manifests import claim_templates, raycluster
from clusters.kube import labels as lbl
from clusters.kube import priority_classes
from clusters.kube.manifests import (
    SERVICE_ACCOUNT,
    VOID_ENV,
    Manifest,
    container_resources,
    container_security_context,
    pod_security_context,
    request_object,
)
from clusters.kube.preemption_pods import add_notice_channel
from clusters.kube.queues import LOCAL_QUEUE_NAME

SUBMITTER_CPU = Decimal("0.5")
SUBMITTER_MEMORY_GIB = Decimal("0.5")
# KubeRay's key for "run on this existing RayCluster" in ``clusterSelector``.
HOST_SELECTOR_KEY = "ray.io/cluster"


def _submitter_template(cluster: Any, image: str, pod_labels: dict[str, str]) -> Manifest:
    """The pod that runs ``ray job submit`` and follows the driver's output (KubeRay's
    K8sJobMode). KubeRay fills in the command; what is set here is what the platform
    requires of every pod: hardened, blind to GPUs, small, and labelled as ours so the
    reconciler finds it (and its logs) by the request's id."""
    container = {
        "name": "ray-job-submitter",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [dict(VOID_ENV)],
        "resources": container_resources(SUBMITTER_CPU, SUBMITTER_MEMORY_GIB),
        "securityContext": container_security_context(),
    }
    spec: Manifest = {
        "restartPolicy": "Never",
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security_context(),
        "containers": [container],
    }
    add_notice_channel(spec, [container], cluster)
    return {"metadata": {"labels": dict(sorted(pod_labels.items()))}, "spec": spec}


def rayjob(
    cluster: Any,
    job: Any,
    *,
    image: str | None = None,
    queue_mode: str = "builtin",
    kai_enabled: bool = False,
    suspend: bool | None = None,
) -> Manifest:
    """The ``ray.io/v1`` RayJob of one job request (saved or not).

    Its Ray cluster is the RayCluster a cluster request of the same shape would get
    (:func:`raycluster`: one code path, so the GPU rules hold for jobs too), torn down as
    soon as the driver ends (``shutdownAfterJobFinishes``; ``ttlSecondsAfterFinished``
    keeps it that long for inspection). A job with a host runs on that existing
    RayCluster (``clusterSelector``) and brings none. ``suspend`` is left out when the
    queue backend owns it (Kueue unsuspends what it admits).
    """
    chosen = resolve_image(cluster, image)
    labels = lbl.cluster_labels(cluster)
    object_labels = dict(labels)
    host = getattr(job, "host", None)
    notes: dict[str, str] = {}
    spec: Manifest = {
        "entrypoint": str(job.entrypoint),
        "submissionMode": "K8sJobMode",
        # A failed driver is a result to report, not something to run again unasked.
        "backoffLimit": 0,
    }
    runtime_env = _with_resume(cluster, dict(job.runtime_env or {}))
    if runtime_env:
        spec["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=True)
    if job.active_deadline_seconds:
        spec["activeDeadlineSeconds"] = int(job.active_deadline_seconds)
    if host is not None:
        # Kueue refuses to manage a RayJob that uses an existing cluster: it takes no
        # quota of its own, so it joins no queue.
        spec["clusterSelector"] = {HOST_SELECTOR_KEY: str(host.name)}
        spec["shutdownAfterJobFinishes"] = False
    else:
        if queue_mode == "kueue":
            object_labels[lbl.KUEUE_QUEUE_NAME] = LOCAL_QUEUE_NAME
            object_labels[lbl.KUEUE_PRIORITY_CLASS] = priority_classes.kueue_label(cluster)
        spec["shutdownAfterJobFinishes"] = True
        spec["ttlSecondsAfterFinished"] = int(job.ttl_seconds_after_finished or 0)
        # Shaped as the queue mode shapes a RayCluster (under Kueue, a request of several
        # flavors leaves the choice to Kueue); the RayCluster's own queue labels are not
        # part of its spec, and the RayJob carries them instead.
        own = raycluster(cluster, image=chosen, queue_mode=queue_mode, kai_enabled=kai_enabled)
        spec["rayClusterSpec"] = own["spec"]
        # KAI's pod grouper reads a gang's topology ask from its top owner: the RayJob.
        notes = dict(own["metadata"].get("annotations") or {})
    spec["submitterPodTemplate"] = _submitter_template(cluster, chosen, labels)
    if suspend is not None:
        spec["suspend"] = suspend
    obj = request_object("ray.io/v1", "RayJob", cluster, object_labels, spec)
    if notes:
        obj["metadata"]["annotations"] = notes
    return obj


def _with_resume(cluster: Any, runtime_env: dict[str, Any]) -> dict[str, Any]:
    """The job's runtime env, with GANGWAY_RESUME_FROM among its ``env_vars`` for a run
    resumed after a preemption (the driver sees it whatever the image's environment)."""
    resume = getattr(cluster, "resume_from", "") or ""
    if not resume:
        return runtime_env
    env_vars = dict(runtime_env.get("env_vars") or {})
    env_vars[RESUME_FROM_ENV] = str(resume)
    return {**runtime_env, "env_vars": env_vars}


def job_claim_templates(cluster: Any, job: Any, **options: Any) -> list[Manifest]:
    """The claim templates of the job's own Ray cluster (DRA flavors; none on a host)."""
    if getattr(job, "host", None) is not None:
        return []
    return claim_templates(cluster, **options)


def manifests(cluster: Any, **options: Any) -> list[Manifest]:
    """What is applied for one job: the claim templates of its Ray cluster, then its
    RayJob (a candidate's details are unsaved; ``options`` as for :func:`rayjob`)."""
    job = getattr(cluster, "_job_details", None) or cluster.job
    return [*job_claim_templates(cluster, job, **options), rayjob(cluster, job, **options)]
