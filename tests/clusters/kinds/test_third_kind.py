"""A third workload kind touches no shared module: the toy kind of :mod:`.toy_kind`
(a ConfigMap, and a table of its own) is registered and runs create -> converge -> fold
-> delete against kubesim through the shared services, provisioning pass and reconciler
only; a write to its own table gets its row folded again."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from clusters import tasks
from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_of, register, unregister
from clusters.engine import provisioning
from clusters.engine.reconciler import reconcile_once
from clusters.models import ClusterRequest
from clusters.rows import lifecycle
from clusters.rows.transitions import transition
from tests.clusters.engine.conftest import running_kubesim
from tests.clusters.kinds import toy_kind


@pytest.fixture
def toy(transactional_db: Any) -> Iterator[None]:
    """The toy kind registered, and its own table there while it is."""
    with connection.schema_editor() as editor:
        editor.create_model(toy_kind.ToyDetails)
    register(toy_kind.KIND)
    try:
        yield
    finally:
        unregister(toy_kind.KIND.workload)
        with connection.schema_editor() as editor:
            editor.delete_model(toy_kind.ToyDetails)


def _configmap(settings: Any, row: ClusterRequest) -> dict[str, Any] | None:
    """The row's ConfigMap as kubectl reads it from kubesim, or None."""
    done = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            settings.KUBECONFIG,
            "get",
            "configmap",
            row.name,
            "-n",
            row.namespace,
            "-o",
            "json",
            "--ignore-not-found",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout) if done.stdout.strip() else None


def _applied_toy(make_cluster: Any, name: str) -> ClusterRequest:
    """An admitted toy, its details in their default colour, its ConfigMap applied."""
    row: ClusterRequest = make_cluster(workload="toy", name=name, state=State.ADMITTED)
    row.save()
    toy_kind.ToyDetails.objects.create(request_id=row.pk)
    provisioning.converge(row)
    return row


def test_a_third_kind_runs_through_the_shared_flow(
    toy: None, broker: Any, tmp_path: Path, settings: Any, make_cluster: Any
) -> None:
    with running_kubesim(tmp_path, settings):
        row = make_cluster(workload="toy", name="toy-one")
        row.save()
        assert kind_of(row) is toy_kind.KIND
        assert transition(row, State.ADMITTED, reason="admitted")  # the toy's own map
        assert row.holds_gpus

        provisioning.converge(row)
        row.refresh_from_db()
        assert row.state == State.PROVISIONING
        configmap = _configmap(settings, row)
        assert configmap is not None and configmap["data"] == {"workers": "1", "colour": "grey"}

        report = reconcile_once()
        assert row.pk in report.ready
        row.refresh_from_db()
        assert row.state == State.READY

        lifecycle.request_deletion(row)
        assert tasks.provision_requested() == 1  # the shared provision pass
        assert _configmap(settings, row) is None
        report = reconcile_once()
        assert row.pk in report.deleted
        row.refresh_from_db()
        assert row.state == State.DELETED and not row.holds_gpus


def test_an_unwanted_toy_object_is_an_orphan_and_others_are_left(
    toy: None, broker: Any, tmp_path: Path, settings: Any, make_cluster: Any
) -> None:
    with running_kubesim(tmp_path, settings):
        row = _applied_toy(make_cluster, "toy-two")
        ClusterRequest.objects.filter(pk=row.pk).delete()  # the row goes, its object stays
        report = reconcile_once()
        assert report.orphans == [f"{row.namespace}/toy-two"]
        assert _configmap(settings, row) is None


def test_a_write_to_the_toy_s_own_table_gets_its_row_folded_again(
    toy: None, broker: Any, tmp_path: Path, settings: Any, make_cluster: Any
) -> None:
    with running_kubesim(tmp_path, settings):
        row = _applied_toy(make_cluster, "toy-three")
        assert row.pk in reconcile_once().ready
        reconcile_once()  # folded without effect: its stamps are remembered
        quiet = reconcile_once()
        assert (quiet.folded, quiet.skipped) == (0, 1)

        # The shared light query joins the toy's table (its Details): the stamp moves.
        toy_kind.ToyDetails.objects.filter(pk=row.pk).update(colour="teal")
        again = reconcile_once()
        assert (again.folded, again.skipped) == (1, 0)
        configmap = _configmap(settings, row)
        assert configmap is not None and configmap["data"]["colour"] == "teal"
