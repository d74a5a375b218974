"""The interactive Ray cluster as the registry knows it."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.domain.workload_kinds import REQUEUE, Kind
from clusters.kinds.raycluster.states import RELEASES, TRANSITIONS

KIND = Kind(
    workload="cluster",
    api_version="ray.io/v1",
    object_kind="RayCluster",
    transitions=TRANSITIONS,
    releases=RELEASES,
    started=State.PROVISIONING,
    started_message="waiting for its pods",
    admitted_message="applying its RayCluster",
    applied_message="RayCluster applied; waiting for its pods",
    reclaimable=True,
    preemptible=True,
    interactive=True,
    # An interactive cluster runs until somebody deletes it: waiting for it would hold
    # a drain open indefinitely, so it is suspended and requeued, and comes up elsewhere.
    drain=REQUEUE,
    engine="clusters.kinds.raycluster.engine",
)
