"""The admission pass's writes: admitted rows, waiting rows' standing, earmarks, reclaim.

:func:`admit` moves admitted rows to ``admitted``; :func:`apply_waiting` writes each
waiting row's position, reason, message and ETA; :func:`apply_earmarks` keeps the mark
on requests that reclaimed capacity is promised to; :func:`apply_reclaim` gives reclaim
victims notice and preempts them once their grace has passed. Every write is conditional on
the row's state, so a request deleted while a pass ran is never resurrected.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from clusters import admission as adm
from clusters.admission.topology_room import level_word, packing_level
from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_of
from clusters.models import ClusterRequest, KubeCluster
from clusters.queue.snapshot_reads import QueuedRow
from clusters.rows import lifecycle, preemption
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import note, transition, transition_many
from tenants.models import GpuFlavor


def apply_waiting(queued: list[QueuedRow], decision: adm.Decision) -> None:
    """Write position, reason, message and ETA on every request left waiting (if changed).

    On PostgreSQL one UPDATE joins the new values, sent as one JSON document (encoding
    it is far cheaper than quoting 15,000-element arrays one element at a time), so
    15,000 rows cost one statement; elsewhere a pipelined statement per row. Either way
    only rows still ``queued`` are touched.
    """
    changed = []
    waiting = decision.waiting
    for row in queued:
        status = waiting.get(row.id)
        if status is None:
            continue
        values = (
            status.position,
            status.flavor_position,
            status.reason,
            status.message[:500],
            status.eta,
            flavor_standing(status) if status.flavors else [],
        )
        if values != row.queue:
            row.queue = values
            changed.append(row)
    if not changed:
        return
    table = ClusterRequest._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {table} AS t SET queue_position = v.pos, "
                "queue_flavor_position = v.fpos, queue_reason = v.reason, "
                "queue_message = v.message, queue_eta = v.eta, queue_flavors = v.flavors "
                "FROM json_to_recordset(%s::json) AS v(id bigint, pos integer, "
                "fpos integer, reason text, message text, eta timestamptz, flavors jsonb) "
                "WHERE t.id = v.id AND t.state = %s",
                [_as_json(changed), State.QUEUED.value],
            )
            return
        cursor.executemany(
            f"UPDATE {table} SET queue_position = %s, queue_flavor_position = %s, "
            "queue_reason = %s, queue_message = %s, queue_eta = %s, queue_flavors = %s "
            "WHERE id = %s AND state = %s",
            [(*_params(r.queue), r.id, State.QUEUED.value) for r in changed],
        )


def _as_json(rows: list[QueuedRow]) -> str:
    """The rows' queue fields as the JSON records the UPDATE above reads."""
    return json.dumps(
        [
            {
                "id": r.id,
                "pos": pos,
                "fpos": fpos,
                "reason": reason,
                "message": message,
                "eta": eta.isoformat() if eta is not None else None,
                "flavors": flavors,
            }
            for r in rows
            for pos, fpos, reason, message, eta, flavors in (r.queue,)
        ]
    )


def flavor_standing(status: adm.QueueStatus) -> list[dict[str, Any]]:
    """A waiting request's standing on each flavor it accepts, as ``queue_flavors``
    stores it (empty for a request of one flavor)."""
    return [
        {
            "flavor": f.flavor,
            "position": f.position,
            "reason": f.reason,
            "message": f.message[:500],
            "eta": f.eta.isoformat() if f.eta else None,
        }
        for f in status.flavors
    ]


def _params(queue: tuple[Any, ...]) -> tuple[Any, ...]:
    """The queue fields as SQL parameters (the standing as JSON text)."""
    return (*queue[:-1], json.dumps(queue[-1]))


def apply_earmarks(decision: adm.Decision, *, now: datetime) -> None:
    """Keep the mark on the requests reclaimed capacity is promised to, drop it elsewhere.

    The next pass reads it (``Pending.earmarked``), so the promise outlives this pass;
    admission clears it (:func:`admit`).
    """
    queued = ClusterRequest.objects.unscoped().filter(state=State.QUEUED)
    queued.filter(pk__in=decision.earmarked, earmarked_at__isnull=True).update(earmarked_at=now)
    queued.filter(earmarked_at__isnull=False).exclude(pk__in=decision.earmarked).update(
        earmarked_at=None
    )


def apply_reclaim(decision: adm.Decision, *, now: datetime) -> list[int]:
    """Give newly chosen victims notice, preempt those whose grace ran out, reprieve the
    rest (docs/preemption.md).

    A victim's grace is its class's notice (``Reclaim.notice_seconds``; None:
    ``RECLAIM_GRACE_SECONDS``). At the deadline a cluster is suspended (never deleted,
    USERS 9) and a job is requeued to resume from its last checkpoint. Returns the ids
    preempted by this pass.
    """
    chosen = {r.id: r for r in decision.reclaim}
    preemption.withdraw_notice(keep=list(chosen))
    warned = ClusterRequest.objects.unscoped().filter(reclaim_after__isnull=False)
    already = {row.pk: row for row in warned.filter(pk__in=list(chosen))}
    preempted: list[int] = []
    for victim_id, reclaim in chosen.items():
        row = already.get(victim_id)
        if row is None:
            row = ClusterRequest.objects.unscoped().filter(pk=victim_id).first()
            if row is not None:
                _give_notice(row, reclaim, now=now)
        elif row.reclaim_after and row.reclaim_after <= now and _preempt(row, reclaim):
            preempted.append(row.pk)
    return preempted


def _grace(reclaim: adm.Reclaim) -> timedelta:
    """How long a victim has between its notice and its preemption."""
    seconds = reclaim.notice_seconds
    return timedelta(seconds=settings.RECLAIM_GRACE_SECONDS if seconds is None else float(seconds))


def _give_notice(row: ClusterRequest, reclaim: adm.Reclaim, *, now: datetime) -> None:
    """The notice, its deadline and the owner's event (``reclaim_warning`` for a cluster
    reclaimed as before, ``preemption_notice`` otherwise)."""
    deadline = now + _grace(reclaim)
    job = kind_of(row).workload == "job"
    cause = reclaim.cause
    if job:
        then = (
            f"It will be stopped and requeued at {deadline:%H:%M} UTC unless capacity frees "
            "up first; save a checkpoint and report it (docs/preemption.md) so its next run "
            "resumes from there."
        )
    else:
        then = (
            f"It will be suspended (not deleted) at {deadline:%H:%M} UTC unless capacity "
            "frees up first."
        )
    event = "reclaim_warning" if cause == "reclaim" and not job else "preemption_notice"
    # What the run is told (its pods, the endpoint): why, in one sentence; the pass's
    # message goes on to say what happens to a cluster.
    reason = (
        f"{reclaim.tenant} is borrowing {reclaim.flavor} GPUs that {reclaim.for_tenant} "
        "now needs within its own quota."
        if cause == "reclaim"
        else reclaim.message
    )
    said = reason if job else reclaim.message
    preemption.give_notice(
        row, deadline=deadline, reason=reason, event=event, message=f"{said} {then}"
    )


def _preempt(row: ClusterRequest, reclaim: adm.Reclaim) -> bool:
    """Preempt a victim whose grace ran out, whether or not it checkpointed: a running
    cluster is suspended, a running job requeued. Whether it was."""
    why = (
        f"its class was outranked by {reclaim.for_tenant}'s request"
        if reclaim.cause == "priority"
        else f"to give {reclaim.for_tenant} its quota back"
    )
    if kind_of(row).workload == "job":
        return preemption.requeue_preempted(row, why=why)
    if row.state not in (State.PROVISIONING, State.READY):
        return False
    lifecycle.suspend(row, reason="reclaimed", message=f"suspended {why}")
    ClusterRequest.objects.filter(pk=row.pk).update(
        reclaim_after=None, notice_at=None, notice_reason="", preemptions=F("preemptions") + 1
    )
    return True


def place_on(row: ClusterRequest, flavor_name: str | None) -> dict[str, Any]:
    """Put ``row`` on the flavor it was admitted on, with its demand there (a request
    that accepts several flavors); the fields to write, empty when nothing changes."""
    if not flavor_name or flavor_name == row.flavor.name:
        return {}
    flavor = GpuFlavor.objects.get(name=flavor_name)
    need = ClusterSpec.of(row).only_on(flavor).demand()
    fields = {"flavor": flavor, "gpus": need.gpus, "cpu": need.cpu, "memory_gib": need.memory_gib}
    # In memory first: the usage span opened by the transition reads the row.
    for key, value in fields.items():
        setattr(row, key, value)
    return fields


def admit(
    rows: list[ClusterRequest],
    *,
    now: datetime,
    placed: dict[int, str] | None = None,
    clusters: dict[int, str] | None = None,
    notes: dict[int, str] | None = None,
    domains: dict[int, str] | None = None,
) -> list[int]:
    """Move the admitted rows to ``admitted`` (conditional: a row deleted meanwhile stays)
    on the flavor the pass chose for each (``placed``: a request that accepts several
    flavors is recorded on the one it was admitted on, with its demand there) and on the
    member of the fleet it chose (``clusters``: names; ``notes``: where and why not
    elsewhere, for the timeline), pinned to the topology domain it chose (``domains``:
    given by the built-in pass, which then clears it on every row it did not pin)."""
    cleared: dict[str, Any] = {
        "admitted_at": now,
        "queue_position": None,
        "queue_flavor_position": None,
        "queue_reason": "",
        "queue_message": "",
        "queue_eta": None,
        "queue_flavors": [],
        "earmarked_at": None,
        # What failed while it waited (say, asking for nodes) is not its error now.
        "last_error": "",
    }
    member_ids = _member_ids(set((clusters or {}).values()))
    # Rows that write the same values move together (transition_many: a constant number
    # of queries per group); a burst of a thousand requests is a handful of groups. A
    # row placed on another of its flavors writes its own demand there, alone.
    groups: dict[tuple[datetime | None, str, int | None, str | None], list[ClusterRequest]] = (
        defaultdict(list)
    )
    moved: set[int] = set()
    for row in rows:
        placement = place_on(row, (placed or {}).get(row.pk))
        expires = now + timedelta(hours=row.ttl_hours) if row.ttl_hours else None
        member = member_ids.get((clusters or {}).get(row.pk, ""))
        domain = None if domains is None else domains.get(row.pk, "")
        if domain is not None:
            # In memory too: the provision task's manifests read the row.
            row.topology_domain = domain
            placement = {**placement, "topology_domain": domain} if placement else placement
        message = _admitted_message(row, (notes or {}).get(row.pk, ""))
        if placement:
            if transition(
                row,
                State.ADMITTED,
                reason="admitted",
                message=message,
                expires_at=expires,
                **cleared,
                **placement,
                **({"kube_cluster_id": member} if member else {}),
            ):
                moved.add(row.pk)
        else:
            groups[(expires, message, member, domain)].append(row)
    for (expires, message, member, domain), group in groups.items():
        moved.update(
            row.pk
            for row in transition_many(
                group,
                State.ADMITTED,
                reason="admitted",
                message=message,
                expires_at=expires,
                **cleared,
                **({"kube_cluster_id": member} if member else {}),
                **({"topology_domain": domain} if domain is not None else {}),
            )
        )
    return [row.pk for row in rows if row.pk in moved]


def _member_ids(names: set[str]) -> dict[str, int]:
    """The members named, by name (one query, none without names)."""
    if not names:
        return {}
    return dict(KubeCluster.objects.filter(name__in=names).values_list("name", "pk"))


def _admitted_message(row: ClusterRequest, note: str = "") -> str:
    """What its timeline says; which flavor, when it accepted several (``row.flavor`` is
    then the one it was placed on), and which cluster of a fleet of several (``note``)."""
    admitted = (
        f"admitted on {row.flavor.name}" if len(row.accepted_flavors or []) > 1 else "admitted"
    )
    if note:
        admitted += f" to run in {note}"
    if row.topology_domain and row.topology_level:
        admitted += f", pinned to {level_word(row.topology_level)} {row.topology_domain}"
    elif row.topology_domain:
        level = level_word(packing_level(row.flavor.topology or ()))
        admitted += f", packed into {level} {row.topology_domain}"
    return f"{admitted}; {kind_of(row).admitted_message}"


# Capacity on demand: how long after a failed ProvisioningRequest the pass asks again.
CAPACITY_RETRY_AFTER = timedelta(minutes=5)


def ask_for_capacity(decision: adm.Decision, *, now: datetime) -> list[int]:
    """Mark the requests the quota admits but the current nodes cannot hold, on a flavor
    whose node group can grow, as asking the cluster autoscaler for their nodes (a
    failed ask is repeated after :data:`CAPACITY_RETRY_AFTER`); returns their ids, for
    the task that writes each ProvisioningRequest (:mod:`clusters.engine.scale_up`)."""
    growable = [f.pk for f in GpuFlavor.objects.all() if f.can_grow]
    blocked = [pk for pk, status in decision.waiting.items() if status.reason == adm.CAPACITY]
    if not growable or not blocked:
        return []
    asked = []
    rows = (
        ClusterRequest.objects.unscoped()
        .filter(pk__in=blocked, state=State.QUEUED, flavor_id__in=growable)
        .exclude(capacity_state__in=("requested", "provisioned"))
        .select_related("flavor")
    )
    for row in rows:
        if (
            row.capacity_state == "failed"
            and row.capacity_requested_at
            and (now - row.capacity_requested_at < CAPACITY_RETRY_AFTER)
        ):
            continue
        attempt = row.capacity_attempts + 1
        name = f"{row.name}-nodes-{attempt}"
        with transaction.atomic():
            claimed = ClusterRequest.objects.filter(
                pk=row.pk, state=State.QUEUED, capacity_state=row.capacity_state
            ).update(
                capacity_state="requested",
                capacity_request=name,
                capacity_requested_at=now,
                capacity_message="",
                capacity_attempts=attempt,
                last_error="",
            )
            if claimed:
                note(
                    row,
                    reason="nodes_requested",
                    message=f"asked the cluster autoscaler for new {row.flavor.name} nodes "
                    f"({name})",
                )
        if claimed:
            asked.append(row.pk)
    return asked


def apply_capacity_words(*, now: datetime) -> None:
    """The queue reason and message of the requests that ask for nodes, or failed to get
    them: what they wait for, since when, and the autoscaler's own words."""
    rows = (
        ClusterRequest.objects.unscoped()
        .filter(state=State.QUEUED, capacity_state__in=("requested", "failed"))
        .select_related("flavor")
    )
    for row in rows:
        asked = row.capacity_requested_at or now
        if row.capacity_state == "requested" and row.last_error:
            # Its ProvisioningRequest is not written (clusters/engine/scale_up.py): the
            # autoscaler was never asked, so nothing of its answer is awaited.
            reason = adm.WAITING_FOR_NODES
            message = (
                f"Waiting for nodes: could not ask the cluster autoscaler for new "
                f"{row.flavor.name} nodes: {row.last_error}. Trying again every few seconds."
            )
        elif row.capacity_state == "requested":
            minutes = max(int((now - asked).total_seconds() // 60), 0)
            reason = adm.WAITING_FOR_NODES
            message = (
                f"Waiting for nodes: asked the cluster autoscaler for new {row.flavor.name} "
                f"nodes at {asked:%H:%M} UTC ({minutes} min ago): "
                f"{row.capacity_message or 'waiting for its answer'}"
            )
        else:
            reason = adm.CAPACITY
            message = (
                f"The cluster autoscaler could not add {row.flavor.name} nodes: "
                f"{row.capacity_message}. It is asked again after "
                f"{asked + CAPACITY_RETRY_AFTER:%H:%M} UTC."
            )
        if (reason, message[:500]) != (row.queue_reason, row.queue_message):
            ClusterRequest.objects.filter(pk=row.pk, state=State.QUEUED).update(
                queue_reason=reason, queue_message=message[:500]
            )
