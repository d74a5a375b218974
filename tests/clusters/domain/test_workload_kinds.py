"""The registry of workload kinds (clusters.domain.workload_kinds)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from clusters.domain.states import State
from clusters.domain.workload_kinds import (
    KIND_MODULES,
    interactive_workloads,
    kind_named,
    kind_of,
    kinds,
    register,
    unregister,
)


def test_every_kind_module_is_registered_under_its_workload() -> None:
    assert list(kinds()) == ["cluster", "job", "service"]
    assert len(KIND_MODULES) == len(kinds())
    assert interactive_workloads() == ["cluster"]


def test_a_row_without_a_workload_is_of_the_first_kind() -> None:
    assert kind_of(SimpleNamespace()) is kind_named("cluster")
    assert kind_of(SimpleNamespace(workload="job")) is kind_named("job")


def test_an_unknown_workload_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        kind_named("rayservice")


def test_register_and_unregister_a_kind() -> None:
    extra = replace(kind_named("cluster"), workload="extra", interactive=False)
    register(extra)
    try:
        assert kind_named("extra") is extra
        assert "extra" not in interactive_workloads()
        assert extra.can_transition(State.QUEUED, State.ADMITTED)
    finally:
        unregister("extra")
    assert "extra" not in kinds()
