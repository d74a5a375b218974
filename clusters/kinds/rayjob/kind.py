"""The batch job as the registry knows it."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.domain.workload_kinds import WAIT, Details, Kind
from clusters.kinds.rayjob.states import JOB_FINISHED, JOB_RELEASES, JOB_TRANSITIONS

KIND = Kind(
    workload="job",
    api_version="ray.io/v1",
    object_kind="RayJob",
    transitions=JOB_TRANSITIONS,
    releases=JOB_RELEASES,
    started=State.STARTING,
    started_message="its Ray cluster is starting",
    admitted_message="starting its RayJob",
    applied_message="RayJob unsuspended; its Ray cluster is starting",
    engine="clusters.kinds.rayjob.engine",
    api="clusters.kinds.rayjob.api.JobViewSet",
    ray_cluster_spec_at=("spec", "rayClusterSpec"),
    finished=JOB_FINISHED,
    # Preempted with notice, it is queued again and resumes from its checkpoint.
    preemptible=True,
    # A run ends by itself, and requeueing it would throw its progress away (it starts
    # again from the beginning elsewhere): it runs to its end where it is. A drain in
    # the "requeue" mode sends it back to the queue all the same.
    drain=WAIT,
    list_related=("job", "job__host"),
    list_prefetch=("usage_spans",),
    details=Details(
        model="clusters.models.Job",
        relation="job",
        # What a fold reads of the run (a cluster's row has none).
        folded=(
            "host_id",
            "ray_job_id",
            "ray_cluster_name",
            "job_status",
            "started_at",
            "log_tail IS NULL",
        ),
        host="host_id",
        deadline="active_deadline_seconds",
    ),
)
