"""``manage.py reconcile --dry-run`` in a fleet of two kubesim processes: each member's
pass is rehearsed against its own API server, its lines name the member, and nothing
is done on either; the real command then passes over both members."""

from __future__ import annotations

import copy
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from clusters import tasks
from clusters.kube.connection import gateway_for
from clusters.models import ClusterEvent, ClusterRequest
from tests.clusters.engine.fleet_sims import Member, admitted, fleet_of

pytestmark = pytest.mark.django_db(transaction=True)

RAYCLUSTERS = "rayclusters.ray.io"


@pytest.fixture(autouse=True)
def _quiet_broker(broker: Any) -> None:
    """Passes ask for more passes: those messages go to a queue nobody consumes."""


def _stray_beside(member: Member, row: ClusterRequest, name: str) -> None:
    """A managed RayCluster in ``member`` that no row wants (another row's id)."""
    gw = gateway_for(member.row)
    stray = copy.deepcopy(gw.get("ray.io/v1", "RayCluster", row.name, row.namespace))
    meta = stray["metadata"]
    stray["metadata"] = {
        "name": name,
        "namespace": row.namespace,
        "labels": {**meta["labels"], "gangway.dev/cluster-id": "999999"},
    }
    stray.pop("status", None)
    gw.apply(stray)


def test_the_dry_run_rehearses_every_member_and_changes_none(
    tmp_path: Path, settings: Any, acme: Any, bob: Any, h100: Any
) -> None:
    with fleet_of(tmp_path, settings, "onprem", "cloud") as fleet:
        home = admitted(acme, bob, h100, "home", fleet["onprem"])
        away = admitted(acme, bob, h100, "away", fleet["cloud"])
        tasks.provision_clusters([home.pk, away.pk])
        _stray_beside(fleet["onprem"], home, "stray-onprem")
        _stray_beside(fleet["cloud"], away, "stray-cloud")
        ns = acme.namespace
        before = {name: member.objects(RAYCLUSTERS) for name, member in fleet.items()}
        assert before == {
            "onprem": {(ns, "home"), (ns, "stray-onprem")},
            "cloud": {(ns, "away"), (ns, "stray-cloud")},
        }
        events = ClusterEvent.objects.count()

        out = StringIO()
        call_command("reconcile", "--dry-run", stdout=out)
        lines = out.getvalue().splitlines()
        assert f"onprem: would delete RayCluster {ns}/stray-onprem" in lines, lines
        assert f"cloud: would delete RayCluster {ns}/stray-cloud" in lines, lines
        # Each member's pass sees only its own objects: neither stray is the other's.
        assert not any("onprem:" in line and "stray-cloud" in line for line in lines), lines
        assert not any("cloud:" in line and "stray-onprem" in line for line in lines), lines
        assert lines[-1].startswith("dry run over 2 clusters: 2 deletions,"), lines
        assert lines[-1].endswith("nothing was changed"), lines
        # Nothing happened on either member, nor to the rows.
        assert {name: member.objects(RAYCLUSTERS) for name, member in fleet.items()} == before
        assert ClusterEvent.objects.count() == events

        out = StringIO()
        call_command("reconcile", stdout=out)
        done = out.getvalue().splitlines()
        assert [line.split(":")[0] for line in done] == ["reconciled onprem", "reconciled cloud"]
        assert all("1 orphans deleted" in line for line in done), done
        assert fleet["onprem"].objects(RAYCLUSTERS) == {(ns, "home")}
        assert fleet["cloud"].objects(RAYCLUSTERS) == {(ns, "away")}
