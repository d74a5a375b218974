"""Draining a member of the fleet, and how long what left a member took to be placed again.

A drain is a state of the member's row (``schedulable`` draining, ``drain_mode``), and
every reconcile task takes a step towards it (:func:`fleet_step`): each running row there
is requeued or left to run to its end, as its kind says (``Kind.drain``), its owner told
once; the member is ``drained_at`` when nothing runs there. A crash mid-drain loses
nothing: the next step finds what is left. Requests moved off a member (requeued by a
drain, or sent back to the queue while it is unreachable) are followed until admission
places them again, and the time that took is kept as ``replace_seconds``.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from clusters.domain.states import State
from clusters.domain.workload_kinds import REQUEUE, Kind, kind_of
from clusters.engine.member_scope import MemberScope
from clusters.kube.errors import KubeError
from clusters.models import (
    ClusterEvent,
    ClusterRequest,
    DrainMode,
    Job,
    KubeCluster,
    Schedulable,
)
from clusters.rows import lifecycle
from clusters.rows.transitions import note

log = logging.getLogger(__name__)

# The event reason of a drain's move or notice (a ``member_drain`` notification).
REASON = "member_drain"
# Rows a drain moves or waits for: their objects are on the member.
RUNNING_THERE = lifecycle.REQUEUED_BY_DRAIN | {State.DELETING}


def requeue_message(member: KubeCluster, kind: Kind, *, asked_for_it: bool = False) -> str:
    """What the owner of a row a drain requeues is told (``asked_for_it``: the row
    named the member, so it waits for it rather than run elsewhere)."""
    then = (
        f"; it asked for {member.name}, so it waits until {member.name} takes work again"
        if asked_for_it
        else ", and will run again on another cluster"
    )
    return (
        f"The Kubernetes cluster {member.name} is being drained: this {kind.noun} was "
        f"stopped there and put back in the queue{then}."
    )


def wait_message(member: KubeCluster, kind: Kind) -> str:
    """What the owner of a row a drain waits for is told."""
    return (
        f"The Kubernetes cluster {member.name} is being drained: nothing new is placed "
        f"there, and this {kind.noun} runs to its end where it is."
    )


def hosting_message(member: KubeCluster, jobs: list[str]) -> str:
    """What the owner of a dev cluster a drain leaves running for its hosted jobs is told."""
    names = ", ".join(sorted(jobs))
    return (
        f"The Kubernetes cluster {member.name} is being drained: this cluster runs the "
        f"job{'s' if len(jobs) > 1 else ''} {names} (submitted with --on), so it stays "
        "until they end and is then put back in the queue to run on another cluster."
    )


def held_by_hosting(rows: list[ClusterRequest]) -> dict[int, list[str]]:
    """The rows of ``rows`` a drain must leave where they are, whatever its mode, because
    of ``gangway submit --on``: a hosted job (it runs on its host's Ray cluster and cannot
    move without it), and a host with hosted jobs still running (moving it would kill
    them). Returns each such row's id with the names of the running hosted jobs (empty
    for a hosted job itself); one query."""
    ids = [r.pk for r in rows]
    held: dict[int, list[str]] = {}
    for job_id, host_id, name, state in Job.objects.filter(
        Q(request_id__in=ids) | Q(host_id__in=ids), host__isnull=False
    ).values_list("request_id", "host_id", "request__name", "request__state"):
        if job_id in ids:
            held.setdefault(job_id, [])
        if host_id in ids and state in RUNNING_THERE - {State.DELETING}:
            held.setdefault(host_id, []).append(name)
    return held


def fleet_step() -> None:
    """A step of every member's drain, and of following what moved off every member
    (the reconcile task's, before its passes). One member's failure is logged and
    never stops the others'."""
    busy = Q(schedulable=Schedulable.DRAINING) | Q(reachable=False) | Q(moving_since__isnull=False)
    for member in KubeCluster.objects.filter(busy):
        try:
            if member.schedulable == Schedulable.DRAINING:
                drain_step(member)
            follow_moves(member.pk)
        except Exception:
            log.exception("drain step of member %s failed", member.name)


def drain_step(member: KubeCluster) -> list[ClusterRequest]:
    """Requeue or tell the owners of the rows still running on draining ``member``, and
    mark it drained when none is left; returns the rows it requeued. Safe to run twice:
    a requeue is a conditional move, a notice is sent once per drain."""
    scope = MemberScope.of(member)
    rows = list(
        ClusterRequest.objects.unscoped()
        .filter(scope.rows(), state__in=RUNNING_THERE)
        .select_related("tenant", "owner", "flavor")
        .order_by("pk")
    )
    mode = member.drain_mode or DrainMode.DEFAULT
    told = set(
        ClusterEvent.objects.filter(
            cluster_id__in=[r.pk for r in rows],
            reason=REASON,
            at__gte=member.drain_started_at or timezone.now(),
        ).values_list("cluster_id", flat=True)
    )
    moved: list[ClusterRequest] = []
    held = held_by_hosting(rows)
    for row in rows:
        kind = kind_of(row)
        if row.state == State.DELETING:
            continue  # going anyway
        if row.pk in held:
            if row.pk not in told:
                jobs = held[row.pk]
                message = hosting_message(member, jobs) if jobs else wait_message(member, kind)
                with transaction.atomic():
                    note(row, reason=REASON, message=message)
            continue
        if kind.drain_action(mode) == REQUEUE and kind.can_transition(row.state, State.QUEUED):
            named = row.wanted_kube_cluster_id == member.pk
            message = requeue_message(member, kind, asked_for_it=named)
            # Followed in the move's transaction: a crash between the two would lose
            # the move's time to re-place.
            with transaction.atomic():
                if lifecycle.requeue_drained(
                    row, member_id=member.pk, home=scope.home, message=message
                ):
                    _moving(member.pk, [row.pk], since=member.drain_started_at)
                    moved.append(row)
        elif row.pk not in told:
            with transaction.atomic():
                note(row, reason=REASON, message=wait_message(member, kind))
    if moved:
        _delete_left(member, scope, moved)
    left = ClusterRequest.objects.unscoped().filter(scope.rows(), state__in=RUNNING_THERE)
    if not left.exists():
        KubeCluster.objects.filter(
            pk=member.pk, schedulable=Schedulable.DRAINING, drained_at__isnull=True
        ).update(drained_at=timezone.now())
    return moved


def _delete_left(member: KubeCluster, scope: MemberScope, moved: list[ClusterRequest]) -> None:
    """Delete what the requeued rows left on the member now, rather than at its next
    pass: on the home member a queued row with no placement is still one of its own, so
    the pass would keep it until admission places the row elsewhere. A failure is
    left to the member's pass, which deletes objects no row of it wants."""
    if member.reachable is False:
        return
    gateway = scope.gateway()
    for row in moved:
        try:
            kind_of(row).behaviour.delete_object(gateway, row.namespace, row.name)
        except KubeError as exc:
            log.warning("deleting %s from drained %s failed: %s", row.name, member.name, exc)


def _moving(member_id: int, ids: list[int], *, since: datetime | None) -> None:
    """Follow ``ids`` as moved off the member (until admission places them again),
    counting from ``since`` if no move is followed yet."""
    with transaction.atomic():
        member = KubeCluster.objects.select_for_update().filter(pk=member_id).first()
        if member is None:
            return
        known = set(member.moving)
        if set(ids) <= known:
            return
        member.moving = sorted(known | set(ids))
        member.moving_since = member.moving_since or since or timezone.now()
        member.save(update_fields=["moving", "moving_since"])


def follow_moves(member_id: int) -> float | None:
    """Add to what moved off the member the requests that ran there and are queued again
    while it is unreachable or draining (admission places them elsewhere), and once
    every request followed has left the queue, record how long the last one took to be
    admitted elsewhere (``replace_seconds``, returned) and stop following."""
    with transaction.atomic():
        member = KubeCluster.objects.select_for_update().filter(pk=member_id).first()
        if member is None:
            return None
        followed = set(member.moving)
        since = member.moving_since
        if member.reachable is False or member.schedulable == Schedulable.DRAINING:
            back = set(
                ClusterRequest.objects.unscoped()
                .filter(kube_cluster_id=member.pk, state=State.QUEUED)
                .values_list("pk", flat=True)
            )
            if back - followed:
                followed |= back
                began = member.drain_started_at
                if member.reachable is False:
                    began = member.unreachable_since
                since = since or began or timezone.now()
        if not followed:
            return None
        rows = list(
            ClusterRequest.objects.unscoped()
            .filter(pk__in=followed)
            .values_list("state", "kube_cluster_id", "admitted_at")
        )
        if any(state == State.QUEUED for state, _, _ in rows):
            member.moving, member.moving_since = sorted(followed), since
            member.save(update_fields=["moving", "moving_since"])
            return None
        admitted = [
            at for _, placed, at in rows if placed not in (None, member.pk) and at is not None
        ]
        fields = ["moving", "moving_since"]
        member.moving, member.moving_since = [], None
        if admitted and since is not None:
            member.replace_seconds = max(0.0, (max(admitted) - since).total_seconds())
            fields.append("replace_seconds")
        member.save(update_fields=fields)
        return member.replace_seconds if admitted else None
