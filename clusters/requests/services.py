"""Engineers' writes on cluster requests: create, delete, suspend, resume, extend.

Each service checks that the actor may act (:mod:`clusters.requests.rules`), is atomic, audits
in the same transaction, moves state only through :func:`clusters.rows.transitions.transition`
(the moves the system makes too live in :mod:`clusters.rows.lifecycle`), and asks for work
after commit (the row is the desired state; a lost nudge only delays work, the sweeper
picks it up). A request arrives as a :class:`clusters.rows.spec.ClusterSpec` and is checked
once, by :func:`cluster_request_check`, which the dry-run shares.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from clusters.admission.ledger import Ledger
from clusters.domain import request_validation, shapes, workload_kinds
from clusters.domain.states import LIVE, State
from clusters.domain.workload_kinds import Kind
from clusters.engine import idle
from clusters.models import ClusterEvent, ClusterKind, ClusterRequest
from clusters.queue.backends import queue_backend
from clusters.queue.class_reads import Classes
from clusters.queue.snapshot_reads import pending_of, policy_snapshot
from clusters.queue.writeback import place_on
from clusters.requests import rules
from clusters.requests.locked_reads import LockedReads, lock_and_read
from clusters.requests.placement_wish import placement_errors
from clusters.requests.priority_class import UNREAD, request_priority_class
from clusters.rows import lifecycle
from clusters.rows.cost_caps import check_hard_caps
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import first_note, note, transition
from clusters.rows.usage import budget_deprioritises, budget_status
from controlplane.exceptions import ServiceConflict
from controlplane.inserts import insert_together
from tenants.audit import audit_entry, audit_record
from tenants.models import AuditEvent, GpuFlavor, Quota, Role, Tenant
from tenants.selectors import role_in_tenant, unknown_flavor_message


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


# How many flavors one request may accept: enough for a preference and its fallbacks,
# few enough that a waiting request's standing on each stays readable.
MAX_FLAVORS = 4


def resolve_flavors(names: list[str]) -> list[GpuFlavor]:
    """The catalogue rows of ``flavors`` (names in order of preference), or a
    ``ValidationError`` on ``flavors``: none, more than :data:`MAX_FLAVORS`, one named
    twice, or names the catalogue lacks (saying which it has)."""
    if not names:
        raise ValidationError({"flavors": ["Name at least one GPU flavor."]})
    if len(names) > MAX_FLAVORS:
        raise ValidationError(
            {"flavors": [f"A request may accept at most {MAX_FLAVORS} GPU flavors."]}
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValidationError(
            {"flavors": [f"Each flavor may be named once; {', '.join(twice)} appears twice."]}
        )
    found = GpuFlavor.objects.in_bulk(names, field_name="name")
    unknown = [name for name in names if name not in found]
    if unknown:
        raise ValidationError({"flavors": [unknown_flavor_message(name) for name in unknown]})
    return [found[name] for name in names]


def request_never_fits(
    cluster: ClusterRequest, *, own_quota: list[Quota] | None = None
) -> list[tuple[str, str]]:
    """Why an unsaved request could never be admitted (the pass's rules); empty if it
    could. The tenant's own quota is asked first, in one query (none when ``own_quota``
    was read already): a cohort only raises what a tenant may hold, so one that fits
    alone fits."""
    pending = pending_of(cluster, pk=-1, classes=Classes.of_one(cluster.priority_class))
    alone = policy_snapshot(
        tenant=cluster.tenant, flavor=cluster.flavor, alone=True, own_quota=own_quota
    )
    if not Ledger(alone).never_fits(pending):
        return []
    snapshot = policy_snapshot(tenant=cluster.tenant, flavor=cluster.flavor)
    return Ledger(snapshot).never_fits(pending)


def name_taken(*, tenant: Tenant, name: str) -> bool:
    """Whether a cluster or job that is not deleted has ``name`` in ``tenant``.

    Plain SQL: every create asks it under the tenant's lock, and compiling the ORM's
    query cost five times its execution."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {ClusterRequest._meta.db_table} "
            "WHERE tenant_id = %s AND name = %s AND state <> %s LIMIT 1",
            [tenant.pk, name, State.DELETED],
        )
        return cursor.fetchone() is not None


def cluster_request_check(
    *,
    actor: Any,
    tenant: Tenant,
    spec: ClusterSpec,
    role: str | None = None,
    check_name: bool = True,
    reads: LockedReads | None = None,
) -> ClusterRequest:
    """Every check a request must pass to be queued, in order; returns the unsaved row.

    :func:`cluster_request_create` runs it under the tenant's lock and the dry-run
    verdict (:mod:`clusters.requests.dry_run`) runs it before asking admission, so the
    verdict cannot promise what submission then refuses. In order:

    1. role: a production cluster needs a tenant admin, any other an engineer
       (``PermissionDenied``);
    2. fields: the name (format, reserved words, not taken by a cluster that is not
       deleted), the shape and the TTL, every offending field at once
       (``ValidationError``);
    3. catalogue and tenant policy: could it ever start on this fleet within the
       tenant's quotas (:class:`NeverFits`, a ``ValidationError``);
    4. the per-engineer caps (``ServiceConflict`` with code ``user_cap``);
    5. the hard monthly cost caps of the tenant and the engineer (``ServiceConflict``
       with code ``cost_cap``, :mod:`clusters.rows.cost_caps`).

    ``role`` is the actor's role in the tenant when the caller already holds it (the
    API resolves it with the tenant); it is read here when omitted. ``check_name``
    ``False`` leaves whether the name is taken to the caller (jobs check it their way).
    ``reads``: what the create read with the tenant's lock (:mod:`.locked_reads`).
    """
    if tenant.archived_at is not None:
        raise ServiceConflict(
            f"{tenant.slug} is archived and takes no new requests; a platform admin can "
            "restore it.",
            code="tenant_archived",
        )
    role = role or role_in_tenant(user=actor, tenant=tenant)
    if not rules.may_request(role=role, kind=spec.kind):
        raise PermissionDenied(rules.requester_refusal(tenant=tenant, role=role, kind=spec.kind))
    if spec.priority and role != Role.ADMIN:
        raise PermissionDenied(
            "Only the tenant's admins set a request's priority; leave it out (0)."
        )
    others = _fallback_flavors(spec)
    errors: dict[str, list[str]] = {}
    try:
        spec = replace(
            spec,
            priority_class=request_priority_class(
                tenant=tenant,
                role=role,
                chosen=spec.priority_class,
                default=reads.default_class if reads is not None else UNREAD,
            ),
        )
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        cluster = build_request(tenant=tenant, owner=actor, spec=spec)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    on_others = _check_other_flavors(
        actor=actor, tenant=tenant, spec=spec, others=others, errors=errors
    )
    errors.update(placement_errors(tenant=tenant, spec=spec))
    name = spec.name
    if check_name and name and "name" not in errors and _taken(tenant, name, reads):
        errors["name"] = [_taken_message(tenant=tenant, name=name)]
    if errors:
        raise ValidationError(errors)
    never = request_never_fits(cluster, own_quota=reads.quotas if reads is not None else None)
    if on_others:
        never = [(code, f"On {spec.flavor.name}: {m}") for code, m in never]
        for flavor, row in on_others:
            never += [(code, f"On {flavor.name}: {m}") for code, m in request_never_fits(row)]
    if never:
        raise NeverFits(never, cluster)
    rules.check_user_caps(
        tenant=tenant,
        owner=actor,
        kind=spec.kind,
        gpus=cluster.gpus,
        usage=reads.dev_usage if reads is not None else None,
    )
    # Money caps (docs/cost.md).
    check_hard_caps(
        tenant=tenant, owner=actor, any_cap=reads.hard_caps if reads is not None else None
    )
    return cluster


def _taken(tenant: Tenant, name: str, reads: LockedReads | None) -> bool:
    if reads is not None and reads.name == name:
        return reads.name_taken
    return name_taken(tenant=tenant, name=name)


def kind_request_check(
    *, kind: Kind, details: Any, details_attr: str, errors: dict[str, list[str]], **check: Any
) -> ClusterRequest:
    """:func:`cluster_request_check` for a row of another kind (a job, a service): the
    kind's own field ``errors`` are told with the shared ones, and the row (also the one a
    :class:`NeverFits` carries for the verdict) is the kind's, with its unsaved details and
    no time to live: such a row ends by itself or when it is deleted."""

    def mark(row: ClusterRequest) -> None:
        row.workload = kind.workload
        row.ttl_hours = None
        setattr(row, details_attr, details)

    # The spec is the kind's: how the row is charged may depend on its kind.
    check["spec"] = replace(check["spec"], workload=kind.workload)
    try:
        request = cluster_request_check(**check)
    except NeverFits as exc:
        if errors:
            raise ValidationError(errors) from None
        mark(exc.cluster)
        raise
    except ValidationError as exc:
        raise ValidationError({**exc.message_dict, **errors}) from None
    if errors:
        raise ValidationError(errors)
    mark(request)
    return request


def kind_request_save(
    request: ClusterRequest, details: Any, *, event: ClusterEvent, audit: AuditEvent
) -> None:
    """Save a checked row of a kind (:func:`kind_request_check`) with its details, its
    first event and the audit of its create (:func:`insert_request`), in the caller's
    transaction; a name another row took meanwhile is a 400 on ``name``."""
    try:
        insert_request(request, details=details, event=event, audit=audit)
    except IntegrityError:
        nouns = [kind.noun for kind in workload_kinds.kinds().values()]
        said = ", ".join(nouns[:-1]) + f" or {nouns[-1]}" if len(nouns) > 1 else nouns[0]
        raise ValidationError(
            {"name": f"A {said} named {request.name!r} already exists."}
        ) from None


def insert_request(
    request: ClusterRequest, *, event: ClusterEvent, audit: AuditEvent, details: Any = None
) -> None:
    """Insert a new request, its kind's details, its first event (``first_note``) and the
    audit of its create (:func:`create_audit`): one statement on PostgreSQL
    (``controlplane.inserts``), each naming the request's new id."""
    followers: list[tuple[Any, str]] = [(event, "cluster"), (audit, "object_id")]
    if details is not None:
        followers.insert(0, (details, "request"))
    insert_together(request, followers)
    if details is not None:
        details.request = request


def _check_other_flavors(
    *,
    actor: Any,
    tenant: Tenant,
    spec: ClusterSpec,
    others: list[GpuFlavor],
    errors: dict[str, list[str]],
) -> list[tuple[GpuFlavor, ClusterRequest]]:
    """The request on each flavor it accepts after its first, as unsaved rows; their
    faults are added to ``errors``, prefixed with the flavor.

    A request that accepts several flavors is checked on each (shape, never-fits) and
    refused if any could never take it: a fallback that can never start would only
    mislead. Faults that are the same on every flavor are reported once."""
    on_others: list[tuple[GpuFlavor, ClusterRequest]] = []
    for flavor in others:
        try:
            on_others.append(
                (flavor, build_request(tenant=tenant, owner=actor, spec=spec.only_on(flavor)))
            )
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                known = errors.setdefault(field, [])
                known.extend(f"On {flavor.name}: {m}" for m in messages if m not in known)
    if others and spec.kind == ClusterKind.PROD and queue_backend().fixed_size_only:
        sizes = {spec.flavor.gpus_per_node, *(f.gpus_per_node for f in others)}
        if len(sizes) > 1:
            # Under Kueue one pod template must fit whichever flavor it picks, and a
            # production worker's GPU limit is its node's GPUs.
            errors.setdefault("flavors", []).append(
                "Under Kueue a production cluster may accept several flavors only if "
                "their nodes have as many GPUs each."
            )
    return on_others


def _fallback_flavors(spec: ClusterSpec) -> list[GpuFlavor]:
    """The flavors ``spec`` accepts after its first, checked as :func:`resolve_flavors`
    checks them (the API has already; the dashboard and other callers may not)."""
    names = list(spec.flavor_names())
    if names[0] != spec.flavor.name:
        raise ValidationError({"flavors": ["The first accepted flavor must be the flavor."]})
    return resolve_flavors(names)[1:] if len(names) > 1 else []


def _taken_message(*, tenant: Tenant, name: str) -> str:
    return f"A cluster named {name!r} already exists in {tenant.slug}; choose another name."


def build_request(*, tenant: Tenant, owner: Any, spec: ClusterSpec) -> ClusterRequest:
    """An unsaved, validated request with its demand computed (shared with the dry-run).

    The image is the one asked for, else the default (stored, so that a later change
    of the default does not change a running cluster's image); ``env`` is stored sorted.
    A dev request of a tenant at or over its monthly GPU-hour budget under the
    "deprioritise" policy gets ``CLUSTER_PRIORITY_MIN`` (:func:`budget_lowered` tells).
    """
    ttl_hours = shapes.resolve_ttl_hours(tenant=tenant, kind=spec.kind, ttl_hours=spec.ttl_hours)
    request_validation.validate_request(
        tenant=tenant,
        flavor=spec.flavor,
        **spec.shape(),
        ttl_hours=ttl_hours,
        name=spec.name,
        image=spec.image or None,
        kai_enabled=settings.KAI_ENABLED,
        kueue=queue_backend().fixed_size_only,
        env=spec.env,
        container_gpus=spec.container_gpus,
    )
    need = spec.demand()
    name = spec.name or shapes.default_name(
        owner_username=owner.get_username(), kind=spec.kind, suffix=secrets.token_hex(3)
    )
    return ClusterRequest(
        tenant=tenant,
        owner=owner,
        **{
            **spec.as_fields(),
            "name": name,
            "ttl_hours": ttl_hours,
            "accepted_flavors": list(spec.flavor_names()),
            "image": spec.image or settings.RAY_IMAGE_DEFAULT,
            "env": dict(sorted(spec.env.items())),
            "priority": (
                settings.CLUSTER_PRIORITY_MIN
                if budget_deprioritises(tenant=tenant, kind=spec.kind)
                else spec.priority
            ),
        },
        gpus=need.gpus,
        cpu=need.cpu,
        memory_gib=need.memory_gib,
    )


def budget_lowered(cluster: ClusterRequest, spec: ClusterSpec) -> bool:
    """Whether :func:`build_request` lowered the priority for the tenant's budget."""
    return cluster.priority != spec.priority


def note_budget(cluster: ClusterRequest, *, actor: Any) -> ClusterEvent:
    """Record in the request's timeline why it queues at the lowest priority."""
    status = budget_status(tenant=cluster.tenant)
    used = f"{status.percent}% of its {status.budget:,} GPU-hour budget" if status else "its budget"
    return note(
        cluster,
        reason="over_budget",
        message=f"Queued at the lowest priority ({cluster.priority}): {cluster.tenant.slug} "
        f"has used {used} this month, and the budget policy is to deprioritise.",
        actor=actor,
    )


def cluster_request_create(
    *, actor: Any, tenant: Tenant, spec: ClusterSpec, role: str | None = None
) -> ClusterRequest:
    """Check a request (:func:`cluster_request_check`, ``role`` as there) and queue it.

    The tenant row is locked while the checks run, so two concurrent requests by one
    engineer cannot both slip under a cap. On commit the queue backend is asked to
    admit it.
    """
    with transaction.atomic():
        reads = lock_and_read(tenant=tenant, owner=actor, name=spec.name or "", flavor=spec.flavor)
        cluster = cluster_request_check(
            actor=actor, tenant=tenant, spec=spec, role=role, reads=reads
        )
        event = first_note(
            cluster, reason="requested", message=f"{spec.kind} cluster requested", actor=actor
        )
        audit = create_audit(
            actor=actor,
            action="cluster.create",
            request=cluster,
            tenant=tenant,
            flavors=list(spec.flavor_names()),
            image=cluster.image,
            # Names only: values may be what a member would rather not see copied.
            env=sorted(cluster.env),
            container_gpus=cluster.container_gpus,
            notebook=cluster.notebook,
            ssh=cluster.ssh,
        )
        try:
            # No savepoint of its own: a failed insert only ever leaves this transaction
            # by the ValidationError below, which rolls the whole of it back.
            insert_request(cluster, event=event, audit=audit)
        except IntegrityError:
            # A generated name that collided (or a race the lock did not cover).
            raise ValidationError(
                {"name": _taken_message(tenant=tenant, name=cluster.name)}
            ) from None
        events = [event]
        if budget_lowered(cluster, spec):
            events.append(note_budget(cluster, actor=actor))
        # Its whole timeline so far, newest first (as ``selectors.with_recent_events``):
        # the answer shows the request as it was committed without reading it back.
        cluster.recent_events = events[::-1]  # type: ignore[attr-defined]
        queue_backend().request_queued(cluster.pk)
    return cluster


def create_audit(
    *, actor: Any, action: str, request: ClusterRequest, tenant: Tenant, **more: Any
) -> AuditEvent:
    """The audit record of a new request of any kind, unsaved (:func:`insert_request`
    writes it with the row): its kind, flavor, workers and GPUs, and ``more`` that its
    kind adds."""
    return audit_entry(
        actor=actor,
        action=action,
        obj=request,
        tenant=tenant,
        data={
            "kind": request.kind,
            "flavor": request.flavor.name,
            "workers": request.workers,
            "gpus": str(request.gpus),
            **more,
        },
    )


def _require_manage(*, actor: Any, cluster: ClusterRequest, role: str | None = None) -> None:
    if not rules.can_manage(actor=actor, cluster=cluster, role=role):
        raise PermissionDenied("Only the cluster's owner or a tenant admin may change it.")


def cluster_delete(
    *, actor: Any, cluster: ClusterRequest, reason: str = "deleted", role: str | None = None
) -> ClusterRequest:
    """Ask for the cluster's deletion (:func:`clusters.rows.lifecycle.request_deletion`);
    its GPUs are released once its pods are gone. ``actor`` ``None`` means the system;
    ``role`` is the actor's role when the caller already holds it (read when omitted)."""
    if actor is not None:
        _require_manage(actor=actor, cluster=cluster, role=role)
    return lifecycle.request_deletion(cluster, actor=actor, reason=reason)


def cluster_suspend(
    *,
    actor: Any,
    cluster: ClusterRequest,
    reason: str = "suspended",
    message: str = "",
    why: str = "",
    role: str | None = None,
) -> ClusterRequest:
    """Suspend a running cluster (:func:`clusters.rows.lifecycle.suspend`): its pods go, its
    GPUs return to the pool, the row stays. ``why`` is a person's reason, which the
    owner reads in the timeline as "suspended by <actor>: <why>". ``role`` as for
    :func:`cluster_delete`."""
    if actor is not None:
        _require_manage(actor=actor, cluster=cluster, role=role)
    why = " ".join(why.split())
    if why and actor is not None:
        message = f"suspended by {actor.get_username()}: {why}"
    return lifecycle.suspend(cluster, actor=actor, reason=reason, message=message)


def cluster_resume(
    *, actor: Any, cluster: ClusterRequest, role: str | None = None
) -> ClusterRequest:
    """Resume a suspended cluster: it goes back through the queue like a new request.
    ``role`` as for :func:`cluster_delete`."""
    _require_manage(actor=actor, cluster=cluster, role=role)
    with transaction.atomic():
        cluster = lifecycle.locked_in(
            cluster, State.SUSPENDED, "Only a suspended cluster can be resumed"
        )
        rules.check_user_caps(
            tenant=cluster.tenant,
            owner=cluster.owner,
            kind=cluster.kind,
            gpus=cluster.gpus,
            excluding=cluster.pk,  # a suspended cluster already counts against the caps
        )
        # Back in the queue on its first preference (it may have run on another).
        accepted = list(cluster.accepted_flavors or [])
        placed = place_on(cluster, accepted[0]) if len(accepted) > 1 else {}
        transition(
            cluster,
            State.QUEUED,
            reason="resumed",
            actor=actor,
            message="back in the queue",
            **placed,
        )
        audit_record(actor=actor, action="cluster.resume", obj=cluster, tenant=cluster.tenant)
        queue_backend().request_queued(cluster.pk)
    return cluster


def can_extend(cluster: ClusterRequest) -> bool:
    """Whether the cluster has a lifetime to extend: it is live and has a TTL."""
    return cluster.state in LIVE and bool(cluster.ttl_hours)


def cluster_extend(
    *, actor: Any, cluster: ClusterRequest, hours: int, role: str | None = None
) -> ClusterRequest:
    """Push the expiry back by ``hours``, never beyond the tenant's maximum TTL.

    A cluster without a TTL never expires: there is nothing to extend, and giving it
    one here would shorten its life instead (409 ``no_ttl``). ``role`` as for
    :func:`cluster_delete`.
    """
    _require_manage(actor=actor, cluster=cluster, role=role)
    hours = shapes.validate_extend_hours(hours)
    with transaction.atomic():
        cluster = lifecycle.locked(cluster)
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


def cluster_keepalive(
    *, actor: Any, cluster: ClusterRequest, role: str | None = None
) -> ClusterRequest:
    """ "Keep alive": count now as use of a ready cluster, so its idle clock starts again
    and a pending idle warning is withdrawn (the cluster is warned again only after a
    whole new idle period). ``role`` as for :func:`cluster_delete`."""
    _require_manage(actor=actor, cluster=cluster, role=role)
    now = timezone.now()
    with transaction.atomic():
        cluster = lifecycle.locked_in(
            cluster, State.READY, "Only a ready cluster can be kept alive"
        )
        idle.mark_used(cluster.pk, now)
        cluster.last_active_at = now
        cluster.idle_warned_at = None
        note(
            cluster,
            reason="kept_alive",
            message="kept alive: the idle clock starts again",
            actor=actor,
        )
        audit_record(actor=actor, action="cluster.keepalive", obj=cluster, tenant=cluster.tenant)
    return cluster
