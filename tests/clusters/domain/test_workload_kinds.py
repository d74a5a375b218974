"""The registry of workload kinds (clusters.domain.workload_kinds)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from clusters.domain.states import State
from clusters.domain.workload_kinds import (
    KIND_MODULES,
    Details,
    deadline_paths,
    derived,
    details_tables,
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


def test_kinds_with_a_table_of_their_own_declare_it() -> None:
    assert [(d.table, d.key) for d in details_tables()] == [
        ("clusters_job", "request_id"),
        ("clusters_service", "request_id"),
    ]
    assert deadline_paths() == ("job__active_deadline_seconds",)


def test_what_is_derived_from_the_registry_is_rebuilt_when_it_changes() -> None:
    built: list[int] = []

    def build() -> int:
        built.append(len(details_tables()))
        return built[-1]

    assert derived("test.count", build) == derived("test.count", build) == 2
    extra = replace(
        kind_named("cluster"),
        workload="extra",
        details=Details(model="clusters.models.Job", relation="job", deadline="x"),
    )
    register(extra)
    try:
        assert derived("test.count", build) == 3
        assert deadline_paths() == ("job__active_deadline_seconds", "job__x")
    finally:
        unregister("extra")
    assert derived("test.count", build) == 2 and built == [2, 3, 2]
