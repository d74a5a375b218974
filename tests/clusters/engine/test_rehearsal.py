"""``manage.py reconcile --dry-run``: the pass's plan is listed and nothing is done.

Kubernetes is made to disagree with the rows both ways (a wanted RayCluster gone, an
unwanted one present) with the worker stopped; the dry run lists the deletion and the
recreation, changes neither Kubernetes nor the rows, and the real pass then does exactly
what it listed.
"""

from __future__ import annotations

import copy
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterEvent, ClusterRequest
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from tests.clusters.engine.conftest import wait_for

pytestmark = pytest.mark.slow

MANAGED = "app.kubernetes.io/managed-by=gangway"


def _names() -> set[str]:
    return {
        rc["metadata"]["name"]
        for rc in get_gateway().list("ray.io/v1", "RayCluster", label_selector=MANAGED)
    }


def test_the_dry_run_lists_what_the_pass_would_do_and_does_none_of_it(
    worker: Any, kubesim: Any, alice: Any, acme: Any, h100: Any
) -> None:
    pks = [
        services.cluster_request_create(
            actor=alice, tenant=acme, spec=ClusterSpec(name=f"kept-{i}", flavor=h100)
        ).pk
        for i in range(2)
    ]
    wait_for(
        lambda: ClusterRequest.objects.unscoped().filter(pk__in=pks, state="ready").count() == 2,
        what="2 ready",
    )
    worker.stop()
    gw = get_gateway()
    stray = copy.deepcopy(gw.get("ray.io/v1", "RayCluster", "kept-1", "gw-acme"))
    gw.delete("ray.io/v1", "RayCluster", "kept-1", "gw-acme")
    wait_for(lambda: _names() == {"kept-0"}, what="kept-1 gone")
    meta = stray["metadata"]
    stray["metadata"] = {
        "name": "stray",
        "namespace": "gw-acme",
        "labels": {**meta["labels"], "gangway.dev/cluster-id": "999999"},
    }
    stray.pop("status", None)
    gw.apply(stray)
    events = ClusterEvent.objects.count()

    out = StringIO()
    call_command("reconcile", "--dry-run", stdout=out)
    lines = out.getvalue().splitlines()
    assert "would delete RayCluster gw-acme/stray" in lines
    assert any(line.endswith("RayCluster gw-acme/kept-1") for line in lines), lines
    assert not any("kept-0" in line and "delete" in line for line in lines), lines
    assert lines[-1].startswith("dry run: 1 deletions,") and "nothing was changed" in lines[-1], (
        lines
    )
    # Nothing happened: Kubernetes and the rows are as they were.
    assert _names() == {"kept-0", "stray"}
    assert ClusterEvent.objects.count() == events
    assert set(ClusterRequest.objects.unscoped().values_list("state", flat=True)) == {"ready"}

    out = StringIO()
    call_command("reconcile", stdout=out)
    assert "1 recreated" in out.getvalue() and "1 orphans deleted" in out.getvalue()
    wait_for(lambda: _names() == {"kept-0", "kept-1"}, what="the pass did what it listed")
