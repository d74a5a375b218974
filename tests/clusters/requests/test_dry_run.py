"""The verdict before submission (clusters.requests.dry_run.dry_run_verdict), called as
the API and the dashboard call it: the checks submission runs, then the admission pass
on today's queue with the request added. Nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from clusters.models import ClusterRequest
from clusters.requests.dry_run import dry_run_verdict
from clusters.rows.spec import ClusterSpec
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_a_request_within_the_quota_fits_now_with_its_manifest(
    acme: Any, bob: Any, h100: Any
) -> None:
    verdict = dry_run_verdict(
        tenant=acme, owner=bob, spec=ClusterSpec(kind="dev", flavor=h100, workers=2)
    )
    assert verdict["verdict"] == "fits_now" and verdict["reasons"] == []
    (obj,) = verdict["manifests"]
    assert obj["kind"] == "RayCluster" and obj["spec"]["workerGroupSpecs"][0]["replicas"] == 2
    assert not ClusterRequest.objects.exists() and not AuditEvent.objects.exists()


def test_a_request_beyond_what_the_tenant_may_ever_hold_never_fits(
    acme: Any, alice: Any, h100: Any
) -> None:
    verdict = dry_run_verdict(
        tenant=acme, owner=alice, spec=ClusterSpec(kind="prod", flavor=h100, workers=4)
    )
    # 4 whole h100 nodes are 32 GPUs; acme may hold 16 and borrow 8.
    assert verdict["verdict"] == "never_fits" and verdict["reasons"]
    assert not ClusterRequest.objects.exists()


def test_what_submission_refuses_the_verdict_refuses(acme: Any, vera: Any, h100: Any) -> None:
    with pytest.raises(PermissionDenied):
        dry_run_verdict(tenant=acme, owner=vera, spec=ClusterSpec(kind="dev", flavor=h100))
