"""The Ray Serve service's entry in the registry (clusters.kinds.rayservice.kind)."""

from __future__ import annotations

from clusters.domain.states import State
from clusters.domain.workload_kinds import (
    details_tables,
    grows,
    idle_reclaimers,
    interactive_workloads,
    kind_named,
    row_relations,
)
from clusters.kinds.rayservice import engine, scale_to_zero
from clusters.kinds.rayservice.kind import KIND
from clusters.models import Service


def test_the_registry_finds_it_with_its_names_and_engine() -> None:
    assert kind_named("service") is KIND
    assert (KIND.noun, KIND.section, KIND.plural) == ("service", "services", "rayservices")
    assert (KIND.api_version, KIND.object_kind) == ("ray.io/v1", "RayService")
    assert KIND.behaviour is engine
    assert KIND.started == State.STARTING
    assert KIND.ray_cluster_spec_at == ("spec", "rayClusterConfig")


def test_it_grows_scales_to_zero_and_is_neither_interactive_nor_reclaimable() -> None:
    assert grows("service") and not grows("job")
    assert "service" not in interactive_workloads()
    assert not KIND.interactive and not KIND.reclaimable
    assert scale_to_zero.reclaim_idle in idle_reclaimers()


def test_its_details_are_the_service_table_and_load_with_its_rows() -> None:
    details = KIND.details
    assert details is not None and details in details_tables()
    assert (details.relation, details.table, details.key) == (
        "service",
        Service._meta.db_table,
        "request_id",
    )
    assert {"service", "surge", "growth"} <= set(row_relations())
    assert KIND.list_related == ("service", "surge__flavor", "growth__flavor")


def test_the_folded_columns_are_the_service_s() -> None:
    assert KIND.details is not None and KIND.details.folded
    columns = {f.name for f in Service._meta.get_fields()}
    assert set(KIND.details.folded) <= columns
    # What the endpoint and the growth write are not the fold's to compare.
    assert not {"public", "requests_total", "worker_cap", "serve_config"} & set(KIND.details.folded)
