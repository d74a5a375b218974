"""A service's GPU-hours through the real loop: its admission opens a usage span, its
deletion closes it once its pods are gone, and the tenant's usage report counts it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from clusters.models import ClusterRequest, UsageSpan
from tests.clusters.engine.conftest import kubesim, wait_for, worker
from tests.clusters.kinds.rayservice.samples import STABLE_DIFFUSION

__all__ = ["kubesim", "worker"]  # the engine tests' fixtures

SERVICES = "/api/v1/tenants/acme/services/"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().get(name=name)


def _spans(row: ClusterRequest) -> list[UsageSpan]:
    return list(UsageSpan.objects.unscoped().filter(cluster_id=row.pk))


def test_a_services_gpu_hours_span_its_admission_to_its_release(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    api = as_user(bob)
    body = {"name": "sd", "flavor": "l4", "workers": 1, "serve_config": STABLE_DIFFUSION}
    assert api.post(SERVICES, body, format="json").status_code == 201

    wait_for(lambda: _row("sd").state == "ready", timeout=120, what="the service ready")
    row = _row("sd")
    (span,) = _spans(row)
    assert span.ended_at is None  # held while it serves
    assert (span.username, span.flavor_name, span.gpus) == ("bob", "l4", row.gpus)

    assert api.delete(SERVICES + "sd/").status_code == 202
    wait_for(lambda: _row("sd").state == "deleted", timeout=120, what="the service deleted")
    row = _row("sd")
    (span,) = _spans(row)
    assert span.ended_at is not None and span.ended_at == row.gpus_released_at  # pods gone

    # The report counts the span: the same GPU-hours, for its owner and flavor.
    hours = span.gpus * Decimal((span.ended_at - span.started_at).total_seconds()) / 3600
    report = api.get("/api/v1/tenants/acme/usage/?days=7").json()
    assert report["total_gpu_hours"] == float(round(hours, 3))
    assert [u["user"] for u in report["by_user"]] == ["bob"]
    assert [f["flavor"] for f in report["by_flavor"]] == ["l4"]
