"""The dry-run verdict as one service-level read, shared by the API and the dashboard.

Both ``POST /api/v1/tenants/{t}/clusters/dry-run/`` and the dashboard's live verdict
panel call :func:`dry_run_verdict`, so "fits now / will queue / never fits" and the
alternatives are computed in one place (STYLE 4). It writes nothing.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError

from clusters import admission as adm
from clusters import services
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterKind
from clusters.queueing import build_snapshot, pending_of
from tenants.models import GpuFlavor, Role, Tenant
from tenants.selectors import has_role

DRY_RUN_NAME = "dry-run-cluster"
# The candidate is not a row: an id no saved request can have keeps it apart in the pass.
_CANDIDATE_ID = -1


def manifest_options() -> dict[str, Any]:
    """How manifests are rendered in this deployment (queueing mode, KAI)."""
    return {"queue_mode": settings.QUEUE_MODE, "kai_enabled": settings.KAI_ENABLED}


def dry_run_verdict(*, tenant: Tenant, owner: Any, attrs: dict[str, Any]) -> dict[str, Any]:
    """Would this request start now, queue (where, until when) or never fit?

    ``attrs`` is a parsed create body (``kind``, ``flavor`` as a :class:`GpuFlavor`,
    ``workers`` and the optional fields). The verdict comes from the same decision
    function the admission pass runs, on the current snapshot with this request added;
    alternatives are the same request on the other flavors of the catalogue. Raises
    :class:`PermissionDenied` for a production shape asked by a non-admin and
    :class:`ValidationError` for an invalid shape.
    """
    if attrs["kind"] == ClusterKind.PROD and not has_role(
        user=owner, tenant=tenant, at_least=Role.ADMIN
    ):
        raise PermissionDenied("Only tenant admins may request production clusters.")
    shape = {
        "kind": attrs["kind"],
        "workers": attrs["workers"],
        "min_workers": attrs.get("min_workers"),
        "max_workers": attrs.get("max_workers"),
        "gpu_fraction": attrs.get("gpu_fraction"),
        "ttl_hours": attrs.get("ttl_hours"),
    }
    cluster = services.build_request(
        tenant=tenant,
        owner=owner,
        name=attrs.get("name") or DRY_RUN_NAME,
        flavor=attrs["flavor"],
        **shape,
    )
    snapshot, _ = build_snapshot()
    # A dev alternative drops what only fits the asked flavor (fractions, autoscaling).
    other_shape = (
        {**shape, "gpu_fraction": None, "min_workers": None, "max_workers": None}
        if attrs["kind"] == ClusterKind.DEV
        else shape
    )
    alternatives = []
    for flavor in GpuFlavor.objects.exclude(pk=attrs["flavor"].pk):
        try:
            other = services.build_request(
                tenant=tenant, owner=owner, name=DRY_RUN_NAME, flavor=flavor, **other_shape
            )
        except ValidationError:
            continue  # this shape is not valid on that flavor
        alternatives.append(pending_of(other, pk=_CANDIDATE_ID))
    verdict = adm.dry_run(snapshot, pending_of(cluster, pk=_CANDIDATE_ID), alternatives)
    return {
        "verdict": verdict.verdict,
        "reasons": [asdict(reason) for reason in verdict.reasons],
        "summary": verdict.summary,
        "position": verdict.position,
        "flavor_position": verdict.flavor_position,
        "eta": verdict.eta,
        "eta_text": adm.format_eta(verdict.eta, snapshot.now)
        if verdict.verdict == "will_queue"
        else "",
        "alternatives": [asdict(alt) for alt in verdict.alternatives],
        "manifests": cluster_manifests(cluster, **manifest_options()),
    }
