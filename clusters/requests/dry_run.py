"""The dry-run verdict as one service-level read, shared by the API and the dashboard.

Both ``POST /api/v1/tenants/{t}/clusters/dry-run/`` and the dashboard's live verdict
panel call :func:`dry_run_verdict`, so "fits now / will queue / never fits" and the
alternatives are computed in one place (STYLE 4). It writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

from django.core.exceptions import ValidationError

from clusters import admission as adm
from clusters.admission.snapshot import FITS_NOW, NEVER_FITS
from clusters.admission.verdict_text import NEVER_FITS_HEADLINE
from clusters.kube.manifests import cluster_manifests
from clusters.models import ClusterRequest
from clusters.queue.backends import manifest_options
from clusters.queue.dry_run_cache import recorded_snapshot
from clusters.queue.snapshot_reads import pending_of
from clusters.queue.writeback import place_on
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from clusters.rows.usage import BUDGET_OVER_MESSAGE
from controlplane.exceptions import ServiceConflict
from tenants.models import GpuFlavor, Tenant
from tenants.selectors import role_in_tenant

DRY_RUN_NAME = "dry-run-cluster"
# The candidate is not a row: an id no saved request can have keeps it apart in the pass.
_CANDIDATE_ID = -1


def dry_run_verdict(
    *,
    tenant: Tenant,
    owner: Any,
    spec: ClusterSpec,
    role: str | None = None,
    kind_check: Callable[[ClusterSpec], ClusterRequest] | None = None,
    default_name: str = DRY_RUN_NAME,
) -> dict[str, Any]:
    """Would this request start now, queue (where, until when) or never fit?

    ``spec`` is the request as a create would send it. First the very checks
    submission runs, in its order (:func:`.services.cluster_request_check`): what
    submission would refuse is refused here with the same exception
    (``PermissionDenied``, ``ValidationError`` naming the fields, ``ServiceConflict``
    ``user_cap``), except that a request that
    could never fit is the ``never_fits`` verdict with admission's reasons. Then the
    same decision function the admission pass runs, on the current snapshot with this
    request added; alternatives are the same request on the other flavors of the
    catalogue (:meth:`ClusterSpec.on_flavor`), where submission would accept it.
    ``role`` is the owner's role in the tenant when the caller holds it (read once here
    otherwise, not once per flavor). ``kind_check`` is a kind's own check of a shape
    (its create's, returning the unsaved row) in place of the cluster's; a request named
    by neither ``spec`` nor the kind is shown as ``default_name`` (empty: as checked).
    """
    role = role or role_in_tenant(user=owner, tenant=tenant)

    def check(candidate: ClusterSpec) -> ClusterRequest:
        if kind_check is not None:
            return kind_check(candidate)
        return services.cluster_request_check(actor=owner, tenant=tenant, spec=candidate, role=role)

    never: list[tuple[str, str]] = []
    try:
        cluster = check(spec)
    except services.NeverFits as exc:
        never, cluster = exc.reasons, exc.cluster
    # Said before submission: the create service lowers it the same way (build_request).
    budget_note = BUDGET_OVER_MESSAGE if services.budget_lowered(cluster, spec) else ""
    if not spec.name and default_name:
        cluster.name = default_name  # submission generates one
    # The snapshot and its recorded pass, kept while nothing they read has changed
    # (clusters.queue.dry_run_cache), so a verdict forks the pass instead of re-running it.
    snapshot, recorded = recorded_snapshot()
    alternatives = []
    accepted = spec.flavor_names()
    for flavor in GpuFlavor.objects.exclude(name__in=accepted).order_by("name"):
        try:
            other = check(spec.on_flavor(flavor))
        except (ValidationError, ServiceConflict):
            continue  # submission would refuse it on that flavor
        alternatives.append(pending_of(other, pk=_CANDIDATE_ID))
    verdict = adm.dry_run(
        snapshot, pending_of(cluster, pk=_CANDIDATE_ID), alternatives, recorded=recorded
    )
    if never:
        # Submission's reasons, from the same ledger (the full snapshot agrees unless a
        # quota changed in between; submission's word is the one that counts).
        verdict = replace(
            verdict,
            verdict=NEVER_FITS,
            reasons=[adm.VerdictReason(code, message) for code, message in never],
            position=None,
            flavor_position=None,
            eta=None,
            headline=NEVER_FITS_HEADLINE,
        )
    if verdict.verdict == FITS_NOW and verdict.flavor:
        place_on(cluster, verdict.flavor)  # its manifests as it would start
    return {
        "verdict": verdict.verdict,
        "headline": verdict.headline,
        "reasons": [asdict(reason) for reason in verdict.reasons],
        "summary": verdict.summary,
        "position": verdict.position,
        "flavor_position": verdict.flavor_position,
        "eta": verdict.eta,
        "eta_text": adm.format_eta(verdict.eta, snapshot.now)
        if verdict.verdict == "will_queue"
        else "",
        "alternatives": [asdict(alt) for alt in verdict.alternatives],
        # The flavor it would start on now (the first of its accepted flavors that fits),
        # and while it would wait, its standing on each of them.
        "flavor": verdict.flavor if verdict.verdict == FITS_NOW else None,
        # ... and the Kubernetes cluster of the fleet it would start on.
        "kube_cluster": verdict.kube_cluster if verdict.verdict == FITS_NOW else None,
        "flavors": [
            {**asdict(f), "eta_text": adm.format_eta(f.eta, snapshot.now)} for f in verdict.flavors
        ],
        "budget_note": budget_note,
        # When the queue was read: a large one's verdict may come from the last reading.
        "as_of": snapshot.now,
        "manifests": cluster_manifests(cluster, **manifest_options()),
    }
