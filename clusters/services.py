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
from clusters.admission import words
from clusters.models import ClusterKind, ClusterRequest
from clusters.states import LIVE, State
from clusters.transitions import note, transition
from controlplane.exceptions import ServiceConflict
from tenants.audit import audit_record
from tenants.models import GpuFlavor, Role, Tenant
from tenants.selectors import role_in_tenant


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
    """Refuse a dev request that would put the owner over the tenant's per-engineer caps.

    Counted over the owner's live dev clusters (queued and suspended ones included: each
    may hold GPUs again without asking), the same count whoever asks.
    """
    if kind != ClusterKind.DEV:
        return
    count, held = user_dev_usage(tenant=tenant, owner=owner)
    if count + 1 > tenant.max_dev_clusters_per_user:
        raise ServiceConflict(
            f"You already have {words.count(count, 'dev cluster')} in {tenant.slug}; the "
            f"limit is {tenant.max_dev_clusters_per_user}. Delete one first.",
            code="user_cap",
        )
    if held + gpus > tenant.max_dev_gpus_per_user:
        raise ServiceConflict(
            f"This request would give you {words.count(held + gpus, 'dev GPU')} in "
            f"{tenant.slug}; the limit is {tenant.max_dev_gpus_per_user}.",
            code="user_cap",
        )


class NeverFits(ValidationError):
    """A request that could not start even on an idle fleet, by the catalogue and the
    tenant's quotas: refused with a 400 naming every reason.

    ``reasons`` are admission's ``(code, message)`` pairs (the dry-run's ``never_fits``
    reasons); ``cluster`` is the unsaved request they are about.
    """

    error_code = "never_fits"  # the API's error code (400)

    def __init__(self, reasons: list[tuple[str, str]], cluster: ClusterRequest) -> None:
        super().__init__([message for _, message in reasons])
        self.reasons = reasons
        self.cluster = cluster


def requester_refusal(*, tenant: Tenant, role: str | None, kind: str = ClusterKind.DEV) -> str:
    """Why ``role`` may not request a ``kind`` cluster in ``tenant``, in plain words."""
    needed = "admin" if kind == ClusterKind.PROD else "engineer"
    what = "a production cluster" if kind == ClusterKind.PROD else "a cluster"
    held = f"you are {'an' if role in (Role.ADMIN, Role.ENGINEER) else 'a'} {role}"
    if role is None:
        held = "you are not a member"
    return f"Requesting {what} needs the {needed} role in {tenant.name}; {held}."


def may_request(*, role: str | None, kind: str) -> bool:
    """Engineers request dev clusters; production clusters need a tenant admin."""
    needed = Role.ADMIN if kind == ClusterKind.PROD else Role.ENGINEER
    return role is not None and Role.rank(role) >= Role.rank(needed)


def request_never_fits(cluster: ClusterRequest) -> list[tuple[str, str]]:
    """Why an unsaved request could never be admitted, by the same rules the admission
    pass applies (fleet size, the tenant's and its cohort's quotas, the per-engineer GPU
    cap); empty when it could."""
    from clusters.admission.ledger import Ledger
    from clusters.queueing import pending_of, policy_snapshot

    snapshot = policy_snapshot(tenant=cluster.tenant, flavor=cluster.flavor)
    return Ledger(snapshot).never_fits(pending_of(cluster, pk=-1))


def _name_taken(*, tenant: Tenant, name: str) -> bool:
    return (
        ClusterRequest.objects.unscoped()
        .filter(tenant=tenant, name=name)
        .exclude(state=State.DELETED)
        .exists()
    )


def cluster_request_check(
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
    """Every check a request must pass to be queued, in order; returns the unsaved row.

    :func:`cluster_request_create` runs it under the tenant's lock and the dry-run
    verdict (:mod:`clusters.verdicts`) runs it before asking admission, so the verdict
    cannot promise what submission then refuses. In order:

    1. role: a production cluster needs a tenant admin, any other an engineer
       (``PermissionDenied``);
    2. fields: the name (format, reserved words, not taken by a cluster that is not
       deleted), the shape and the TTL, every offending field at once
       (``ValidationError``);
    3. catalogue and tenant policy: could it ever start on this fleet within the
       tenant's quotas (:class:`NeverFits`, a ``ValidationError``);
    4. the per-engineer caps (``ServiceConflict`` with code ``user_cap``).
    """
    role = role_in_tenant(user=actor, tenant=tenant)
    if not may_request(role=role, kind=kind):
        raise PermissionDenied(requester_refusal(tenant=tenant, role=role, kind=kind))
    errors: dict[str, list[str]] = {}
    try:
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
    except ValidationError as exc:
        errors = dict(exc.message_dict)
    if name and "name" not in errors and _name_taken(tenant=tenant, name=name):
        errors["name"] = [_taken_message(tenant=tenant, name=name)]
    if errors:
        raise ValidationError(errors)
    never = request_never_fits(cluster)
    if never:
        raise NeverFits(never, cluster)
    check_user_caps(tenant=tenant, owner=actor, kind=kind, gpus=cluster.gpus)
    return cluster


def _taken_message(*, tenant: Tenant, name: str) -> str:
    return f"A cluster named {name!r} already exists in {tenant.slug}; choose another name."


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
    """Check a request (:func:`cluster_request_check`) and queue it.

    The tenant row is locked while the checks run, so two concurrent requests by one
    engineer cannot both slip under a cap. On commit the admission pass is nudged.
    """
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
        cluster = cluster_request_check(
            actor=actor,
            tenant=tenant,
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
        try:
            with transaction.atomic():
                cluster.save()
        except IntegrityError:
            # A generated name that collided (or a race the lock did not cover).
            raise ValidationError(
                {"name": _taken_message(tenant=tenant, name=cluster.name)}
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
    role = role_in_tenant(user=actor, tenant=cluster.tenant)
    if role == Role.ADMIN:
        return True
    return role == Role.ENGINEER and cluster.owner_id == getattr(actor, "pk", None)


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


def can_extend(cluster: ClusterRequest) -> bool:
    """Whether the cluster has a lifetime to extend: it is live and has a TTL."""
    return cluster.state in LIVE and bool(cluster.ttl_hours)


def cluster_extend(*, actor: Any, cluster: ClusterRequest, hours: int) -> ClusterRequest:
    """Push the expiry back by ``hours``, never beyond the tenant's maximum TTL.

    A cluster without a TTL never expires: there is nothing to extend, and giving it
    one here would shorten its life instead (409 ``no_ttl``).
    """
    _require_manage(actor=actor, cluster=cluster)
    hours = shapes.validate_extend_hours(hours)
    with transaction.atomic():
        cluster = _locked(cluster)
        if cluster.state not in LIVE:
            raise ServiceConflict(
                f"A {cluster.state} cluster cannot be extended.", code="invalid_state"
            )
        if not can_extend(cluster):
            raise ServiceConflict(
                f"{cluster.name} has no time to live: it runs until it is deleted, so there "
                "is nothing to extend.",
                code="no_ttl",
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
