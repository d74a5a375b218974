"""The interactive cluster's entry in the registry (clusters.kinds.raycluster.kind)."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.domain.workload_kinds import DEFAULT_WORKLOAD, kind_named, kind_of
from clusters.kinds.raycluster import engine
from clusters.kinds.raycluster.kind import KIND
from clusters.models import ClusterRequest


def test_the_registry_finds_it_by_workload_and_by_row() -> None:
    assert kind_named("cluster") is KIND
    assert kind_of(ClusterRequest(workload="cluster")) is KIND
    assert KIND.workload == DEFAULT_WORKLOAD  # a request that names no kind is a cluster


def test_it_is_interactive_reclaimable_and_starts_provisioning() -> None:
    assert KIND.interactive and KIND.reclaimable
    assert KIND.started == State.PROVISIONING
    assert KIND.behaviour is engine
    assert (KIND.api_version, KIND.object_kind, KIND.plural) == (
        "ray.io/v1",
        "RayCluster",
        "rayclusters",
    )
