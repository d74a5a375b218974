"""What the access tables of the kinds other than the cluster share: bob's queued row of
a kind as a ``kwargs`` builder, and the collection routes (list, create, dry-run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clusters.models import ClusterRequest
from tenants.models import GpuFlavor
from tests.access.matrix import Case, Route, members

READERS = members(viewer=200, engineer=200, admin=200, platform=200)
WRITERS = members(viewer=403, engineer=200, admin=200, platform=200)


def bobs_queued(
    *, workload: str, name: str, details: Callable[[ClusterRequest], Any]
) -> Callable[[Any], dict[str, str]]:
    """A builder of bob's queued dev row ``name`` of ``workload`` in acme, its details
    written by ``details`` when the row is new (a queued row needs no Kubernetes API)."""

    def build(w: Any) -> dict[str, str]:
        request, created = ClusterRequest.objects.get_or_create(
            tenant=w.acme,
            name=name,
            defaults={
                "owner": w.actors["engineer"],
                "workload": workload,
                "kind": "dev",
                "flavor": GpuFlavor.objects.get(name="l4"),
                "workers": 1,
                "gpus": 1,
                "state": "queued",
            },
        )
        if created:
            details(request)
        return {"tenant_slug": "acme", "name": name}

    return build


def collection_routes(base: str, body: dict[str, Any]) -> dict[str, Route]:
    """``base`` (list by readers, create by engineers) and its ``dry-run/``."""
    return {
        base: Route(
            kwargs={"tenant_slug": "acme"},
            methods={
                "GET": Case(READERS),
                "POST": Case(
                    members(viewer=403, engineer=201, admin=201, platform=201),
                    body=lambda w: dict(body),
                ),
            },
        ),
        base + "dry-run/": Route(
            kwargs={"tenant_slug": "acme"},
            methods={"POST": Case(WRITERS, body=lambda w: dict(body))},
        ),
    }
