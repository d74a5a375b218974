"""The batch job's entry in the registry (clusters.kinds.rayjob.kind)."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.domain.workload_kinds import interactive_workloads, kind_named
from clusters.kinds.rayjob import engine
from clusters.kinds.rayjob.kind import KIND


def test_the_registry_finds_it_and_it_is_neither_interactive_nor_reclaimable() -> None:
    assert kind_named("job") is KIND
    assert not KIND.interactive and not KIND.reclaimable
    assert "job" not in interactive_workloads()
    assert KIND.started == State.STARTING
    assert KIND.behaviour is engine
    assert KIND.list_related == ("job", "job__host")
