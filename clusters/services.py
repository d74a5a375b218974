"""Writes on cluster requests: create, delete, suspend, resume, extend, and Kueue's
evictions.

Each service is atomic, audits in the same transaction, moves state only through
:func:`clusters.transitions.transition`, and nudges the Celery tasks after commit (the
row is the desired state; a lost nudge only delays work, the sweeper picks it up).
Rules the API and the dashboard share live here and in :mod:`clusters.shapes`.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from clusters import shapes
from clusters.models import ClusterKind, ClusterRequest
from clusters.states import LIVE, State
from clusters.transitions import note, transition
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import GpuFlavor, Role, Tenant
from tenants.selectors import has_role


def _nudge_admission(cluster_id: int | None = None) -> None:
    """Ask for an admission pass after commit (in Kueue mode: write the RayCluster, which
    Kueue then queues)."""
    from clusters import tasks

    if settings.QUEUE_MODE == "kueue":
        if cluster_id is not None:
            transaction.on_commit(lambda: tasks.provision_cluster.delay(cluster_id))
        return
    transaction.on_commit(lambda: tasks.admission_pass.delay())


def _nudge_provision(cluster_id: int) -> None:
    from clusters import tasks

    transaction.on_commit(lambda: tasks.provision_cluster.delay(cluster_id))


def user_dev_usage(*, tenant: Tenant, owner: Any) -> tuple[int, Decimal]:
    """The owner's live dev clusters in the tenant and the GPUs they ask for."""
    row = (
        ClusterRequest.objects.unscoped()
        .filter(tenant=tenant, owner=owner, kind=ClusterKind.DEV, state__in=LIVE)
        .aggregate(n=Count("id"), g=Sum("gpus"))
    )
    return int(row["n"] or 0), Decimal(row["g"] or 0)


def check_user_caps(*, tenant: Tenant, owner: Any, kind: str, gpus: Decimal) -> None:
    """Refuse a dev request that would put the owner over the tenant's per-engineer caps."""
    if kind != ClusterKind.DEV:
        return
    count, held = user_dev_usage(tenant=tenant, owner=owner)
    if count + 1 > tenant.max_dev_clusters_per_user:
        raise ServiceConflict(
            f"You already have {count} dev cluster(s) in {tenant.slug}; the limit is "
            f"{tenant.max_dev_clusters_per_user}. Delete one first.",
            code="user_cap",
        )
    if held + gpus > tenant.max_dev_gpus_per_user:
        raise ServiceConflict(
            f"This request would give you {held + gpus:g} dev GPUs in {tenant.slug}; the "
            f"limit is {tenant.max_dev_gpus_per_user}.",
            code="user_cap",
        )


def build_request(
    *,
    tenant: Tenant,
    owner: Any,
    name: str | None,
    kind: str,
    flavor: GpuFlavor,
    workers: int,
    min_workers: int | None = None,
    max_workers: int | None = None,
    gpu_fraction: Decimal | None = None,
    ttl_hours: int | None = None,
    priority: int = 0,
) -> ClusterRequest:
    """An unsaved, validated request with its demand computed (shared with the dry-run)."""
    ttl_hours = shapes.resolve_ttl_hours(tenant=tenant, kind=kind, ttl_hours=ttl_hours)
    shapes.validate_request(
        tenant=tenant,
        flavor=flavor,
        kind=kind,
        workers=workers,
        min_workers=min_workers,
        max_workers=max_workers,
        gpu_fraction=gpu_fraction,
        ttl_hours=ttl_hours,
        name=name,
        image=settings.RAY_IMAGE_DEFAULT,
        kai_enabled=settings.KAI_ENABLED,
        kueue=settings.QUEUE_MODE == "kueue",
    )
    need = shapes.demand(
        kind=kind,
        flavor=shapes.flavor_spec(flavor),
        workers=workers,
        min_workers=min_workers,
        max_workers=max_workers,
        gpu_fraction=gpu_fraction,
    )
    return ClusterRequest(
        tenant=tenant,
        owner=owner,
        name=name
        or shapes.default_name(
            owner_username=owner.get_username(), kind=kind, suffix=secrets.token_hex(3)
        ),
        kind=kind,
        flavor=flavor,
        workers=workers,
        min_workers=min_workers,
        max_workers=max_workers,
        gpu_fraction=gpu_fraction,
        ttl_hours=ttl_hours,
        priority=priority,
        image=settings.RAY_IMAGE_DEFAULT,
        gpus=need.gpus,
        cpu=need.cpu,
        memory_gib=need.memory_gib,
    )


def cluster_request_create(
    *,
    actor: Any,
    tenant: Tenant,
    kind: str,
    flavor: GpuFlavor,
    workers: int,
    name: str | None = None,
    min_workers: int | None = None,
    max_workers: int | None = None,
    gpu_fraction: Decimal | None = None,
    ttl_hours: int | None = None,
    priority: int = 0,
) -> ClusterRequest:
    """Validate a request against the catalogue and policy, and queue it.

    Engineers may request dev clusters; production clusters need a tenant admin. The
    tenant row is locked while the per-engineer caps are checked, so two concurrent
    requests by one engineer cannot both slip under a cap. On commit the admission
    pass is nudged.
    """
    needed = Role.ADMIN if kind == ClusterKind.PROD else Role.ENGINEER
    if not has_role(user=actor, tenant=tenant, at_least=needed):
        raise PermissionDenied(
            "Production clusters need a tenant admin."
            if kind == ClusterKind.PROD
            else "Requesting clusters needs the engineer role."
        )
    cluster = build_request(
        tenant=tenant,
        owner=actor,
        name=name,
        kind=kind,
        flavor=flavor,
        workers=workers,
        min_workers=min_workers,
        max_workers=max_workers,
        gpu_fraction=gpu_fraction,
        ttl_hours=ttl_hours,
        priority=priority,
    )
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
        check_user_caps(tenant=tenant, owner=actor, kind=kind, gpus=cluster.gpus)
        taken = ClusterRequest.objects.filter(tenant=tenant, name=cluster.name)
        if taken.exclude(state=State.DELETED).exists():
            raise ValidationError({"name": f"A cluster named {cluster.name!r} already exists."})
        try:
            with transaction.atomic():
                cluster.save()
        except IntegrityError:
            raise ValidationError(
                {"name": f"A cluster named {cluster.name!r} already exists."}
            ) from None
        note(cluster, reason="requested", message=f"{kind} cluster requested", actor=actor)
        audit_record(
            actor=actor,
            action="cluster.create",
            obj=cluster,
            tenant=tenant,
            data={
                "kind": kind,
                "flavor": flavor.name,
                "workers": workers,
                "gpus": str(cluster.gpus),
            },
        )
        _nudge_admission(cluster.pk)
    return cluster


def can_manage(*, actor: Any, cluster: ClusterRequest) -> bool:
    """Engineers manage their own clusters; tenant admins manage every cluster.

    The services enforce it; the dashboard asks it only to decide which buttons to show.
    """
    if has_role(user=actor, tenant=cluster.tenant, at_least=Role.ADMIN):
        return True
    return cluster.owner_id == getattr(actor, "pk", None) and has_role(
        user=actor, tenant=cluster.tenant, at_least=Role.ENGINEER
    )


def _require_manage(*, actor: Any, cluster: ClusterRequest) -> None:
    if not can_manage(actor=actor, cluster=cluster):
        raise PermissionDenied("Only the cluster's owner or a tenant admin may change it.")


def _locked(cluster: ClusterRequest) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_for_update().get(pk=cluster.pk)


def cluster_delete(
    *, actor: Any, cluster: ClusterRequest, reason: str = "deleted"
) -> ClusterRequest:
    """Ask for the cluster's deletion; its GPUs are released once its pods are gone.

    Deleting a cluster that is already being deleted is a no-op. ``actor`` ``None``
    means the system (expiry uses reason ``expired``).
    """
    if actor is not None:
        _require_manage(actor=actor, cluster=cluster)
    with transaction.atomic():
        cluster = _locked(cluster)
        if cluster.state in (State.DELETING, State.DELETED):
            return cluster
        transition(
            cluster,
            State.DELETING,
            reason=reason,
            actor=actor,
            message="expired: its TTL ran out" if reason == "expired" else "deletion requested",
            deletion_reason=reason,
        )
        audit_record(
            actor=actor,
            action="cluster.delete",
            obj=cluster,
            tenant=cluster.tenant,
            data={"reason": reason},
        )
        _nudge_provision(cluster.pk)
    return cluster


def cluster_suspend(
    *, actor: Any, cluster: ClusterRequest, reason: str = "suspended", message: str = ""
) -> ClusterRequest:
    """Suspend a running cluster: its pods go, its GPUs return to the pool, the row stays."""
    if actor is not None:
        _require_manage(actor=actor, cluster=cluster)
    with transaction.atomic():
        cluster = _locked(cluster)
        if cluster.state == State.SUSPENDED:
            return cluster
        if cluster.state not in (State.PROVISIONING, State.READY):
            raise ServiceConflict(
                f"A {cluster.state} cluster cannot be suspended.", code="invalid_state"
            )
        transition(
            cluster,
            State.SUSPENDED,
            reason=reason,
            actor=actor,
            message=message or "suspended; its GPUs were released",
            suspended_at=timezone.now(),
            ready_at=None,
        )
        audit_record(actor=actor, action="cluster.suspend", obj=cluster, tenant=cluster.tenant)
        _nudge_provision(cluster.pk)
        _nudge_admission()
    return cluster


def cluster_requeue_evicted(
    *, cluster: ClusterRequest, reason: str, message: str, queue_reason: str
) -> ClusterRequest:
    """Kueue evicted a running cluster: back to ``queued`` with Kueue's reason.

    Its GPUs are released and its usage span closed by the move; the RayCluster stays
    (Kueue has suspended it and will admit it again). ``reason`` is Kueue's (e.g.
    ``Preempted``), ``message`` the Workload's; ``queue_reason`` the queue code shown
    until the next reconcile reads Kueue's verdict again.
    """
    with transaction.atomic():
        cluster = _locked(cluster)
        if cluster.state not in (State.ADMITTED, State.PROVISIONING, State.READY):
            return cluster
        text = (
            f"Kueue evicted it ({reason}): {message}" if message else f"Kueue evicted it ({reason})"
        )
        if not transition(
            cluster,
            State.QUEUED,
            reason=reason,
            message=f"{text}. Its GPUs were released; it waits to be admitted again."[:500],
            admitted_at=None,
            ready_at=None,
            # Its TTL starts again when Kueue admits it again (as after a resume).
            expires_at=None,
            expiry_warned_at=None,
            queue_position=None,
            queue_flavor_position=None,
            queue_reason=queue_reason,
            queue_message=f"Kueue: {message or reason}"[:500],
            queue_eta=None,
        ):
            return cluster
        audit_record(
            actor=None,
            action="cluster.evict",
            obj=cluster,
            tenant=cluster.tenant,
            data={"reason": reason, "message": message[:500]},
        )
    return cluster


def cluster_resume(*, actor: Any, cluster: ClusterRequest) -> ClusterRequest:
    """Resume a suspended cluster: it goes back through the queue like a new request."""
    _require_manage(actor=actor, cluster=cluster)
    with transaction.atomic():
        cluster = _locked(cluster)
        if cluster.state != State.SUSPENDED:
            raise ServiceConflict(
                f"Only a suspended cluster can be resumed; this one is {cluster.state}.",
                code="invalid_state",
            )
        if cluster.kind == ClusterKind.DEV:
            check_user_caps(
                tenant=cluster.tenant, owner=cluster.owner, kind=cluster.kind, gpus=Decimal(0)
            )
        transition(
            cluster, State.QUEUED, reason="resumed", actor=actor, message="back in the queue"
        )
        audit_record(actor=actor, action="cluster.resume", obj=cluster, tenant=cluster.tenant)
        _nudge_admission(cluster.pk)
    return cluster


def cluster_extend(*, actor: Any, cluster: ClusterRequest, hours: int) -> ClusterRequest:
    """Push the expiry back by ``hours``, never beyond the tenant's maximum TTL."""
    _require_manage(actor=actor, cluster=cluster)
    if hours < 1:
        raise ValidationError({"hours": "Extend by at least one hour."})
    with transaction.atomic():
        cluster = _locked(cluster)
        if cluster.state not in LIVE:
            raise ServiceConflict(
                f"A {cluster.state} cluster cannot be extended.", code="invalid_state"
            )
        start = cluster.admitted_at or timezone.now()
        limit = start + timedelta(hours=cluster.tenant.max_ttl_hours)
        base = cluster.expires_at or timezone.now()
        new_expiry = base + timedelta(hours=hours)
        if new_expiry > limit:
            raise ValidationError(
                {
                    "hours": f"That would pass the tenant's maximum lifetime of "
                    f"{cluster.tenant.max_ttl_hours} h (until {limit:%Y-%m-%d %H:%M} UTC)."
                }
            )
        ttl = (cluster.ttl_hours or 0) + hours
        ClusterRequest.objects.filter(pk=cluster.pk).update(
            ttl_hours=ttl,
            expires_at=new_expiry if cluster.expires_at else None,
            expiry_warned_at=None,  # warn again before the new expiry
        )
        cluster.ttl_hours = ttl
        if cluster.expires_at:
            cluster.expires_at = new_expiry
        note(cluster, reason="extended", message=f"extended by {hours} h", actor=actor)
        audit_record(
            actor=actor,
            action="cluster.extend",
            obj=cluster,
            tenant=cluster.tenant,
            data={"hours": hours},
        )
    return cluster
