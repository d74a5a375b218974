"""Moving a cluster request between states: the one helper every writer goes through.

:func:`transition` checks the move against the transition map, claims the row with a
conditional UPDATE (``WHERE state = <the state we read>``) so that two workers, or a
worker and a user, cannot both act on the same old state, and records a ClusterEvent.
It returns ``False`` when somebody else got there first — callers treat that as "done
by another", never as an error (STYLE 6).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.domain.states import ACQUIRES, State
from clusters.domain.workload_kinds import kind_named, kind_of
from clusters.models import ClusterEvent, ClusterRequest, Growth, IdleSpan, Surge, UsageSpan
from clusters.rows import transition_metrics

# Where a request's surge has no more use (its GPUs given back for good).
_ENDED = frozenset({State.DELETED, State.FAILED})


def _unplaced(current: str) -> dict[str, Any]:
    """What a move back to the queue from ``current`` does to the row's placement: a
    resumed request (from ``suspended``) keeps the member it ran on, where what it left
    is, and admission prefers that member; any other is placed afresh. Under Kueue every
    queued request's object goes to the home member (MultiKueue's manager), whose Kueue
    places it, so none keeps a member."""
    if current == State.SUSPENDED and settings.QUEUE_MODE != "kueue":
        return {}
    return {"kube_cluster": None}


def transition(
    cluster: ClusterRequest,
    to: str,
    *,
    reason: str,
    actor: Any = None,
    message: str = "",
    **fields: Any,
) -> bool:
    """Move ``cluster`` from its current (in-memory) state to ``to``; see module docstring.

    Extra ``fields`` are written in the same UPDATE. On success the in-memory instance is
    updated too. ``attempts`` is reset, since a new state is progress.
    """
    current = cluster.state
    kind = kind_of(cluster)
    kind.check_transition(current, to)
    now = timezone.now()
    values = {"state": to, "progress_at": now, "updated_at": now, "attempts": 0, **fields}
    if to == State.QUEUED:
        # Back in line (resumed, evicted): nodes asked for an earlier admission are not
        # this one's; it asks again if it needs to.
        values.update(capacity_state="", capacity_request="", capacity_message="")
        values.update(_unplaced(current))
    held_before = cluster.holds_gpus
    held_after = True if to in ACQUIRES else False if to in kind.releases else held_before
    values["holds_gpus"] = held_after
    if held_before and not held_after:
        values["gpus_released_at"] = now
    if "state_reason" not in values:
        values["state_reason"] = message
    with transaction.atomic():
        claimed = ClusterRequest.objects.filter(pk=cluster.pk, state=current).update(**values)
        if not claimed:
            return False
        _event(cluster, actor, current, to, reason, message)
        _ledger(cluster, held_before, held_after, now, ended=to in _ENDED)
        transition_metrics.observe(
            [(cluster, current, cluster.progress_at or cluster.created_at)],
            to,
            reason=reason,
            now=now,
        )
    for key, value in values.items():
        setattr(cluster, key, value)
    return True


def transition_many(
    clusters: list[ClusterRequest],
    to: str,
    *,
    reason: str,
    message: str = "",
    **fields: Any,
) -> list[ClusterRequest]:
    """:func:`transition` for many rows at once, in a constant number of queries.

    For the moves the engine makes in bulk (a reconcile pass that finds a thousand
    clusters ready, or their deletions finished): the rows still in the state they were
    read in are locked and moved with one UPDATE per starting state (and GPU holding),
    and their events are inserted in bulk. Rows somebody else moved meanwhile are left
    alone, as :func:`transition` leaves them; the rows moved are returned, updated in
    memory. A move that gives GPUs back closes the rows' usage and idle spans in bulk as
    :func:`transition` does one by one; a move that takes them (admission) opens one
    usage span per row, inserted in bulk (the rows' tenant, flavor and owner should be
    loaded with them: each span names the owner and the flavor).
    """
    groups: dict[tuple[str, bool, str], list[ClusterRequest]] = {}
    for cluster in clusters:
        kind_of(cluster).check_transition(cluster.state, to)
        key = (cluster.state, cluster.holds_gpus, cluster.workload)
        groups.setdefault(key, []).append(cluster)
    now = timezone.now()
    moved: list[ClusterRequest] = []
    released: list[int] = []
    acquired: list[ClusterRequest] = []
    with transaction.atomic():
        for (current, held_before, workload), group in groups.items():
            held_after = to in ACQUIRES or (held_before and to not in kind_named(workload).releases)
            values = {"state": to, "progress_at": now, "updated_at": now, "attempts": 0}
            if to == State.QUEUED:
                values.update(capacity_state="", capacity_request="", capacity_message="")
                values.update(_unplaced(current))
            values.update(fields)
            values["holds_gpus"] = held_after
            if held_before and not held_after:
                values["gpus_released_at"] = now
            values.setdefault("state_reason", message)
            wanted = {c.pk: c for c in group}
            claimed = set(
                ClusterRequest.objects.select_for_update(no_key=True)
                .filter(pk__in=wanted, state=current)
                .values_list("pk", flat=True)
            )
            if not claimed:
                continue
            ClusterRequest.objects.filter(pk__in=claimed).update(**values)
            rows = [wanted[pk] for pk in sorted(claimed)]
            ClusterEvent.objects.bulk_create(
                ClusterEvent(
                    cluster_id=c.pk,
                    from_state=current,
                    to_state=to,
                    reason=reason,
                    message=message[:500],
                )
                for c in rows
            )
            transition_metrics.observe(
                [(c, current, c.progress_at or c.created_at) for c in rows],
                to,
                reason=reason,
                now=now,
            )
            if held_before and not held_after:
                released.extend(claimed)
            if held_after and not held_before:
                acquired.extend(rows)
            for cluster in rows:
                for name, value in values.items():
                    setattr(cluster, name, value)
            moved.extend(rows)
        if acquired:
            UsageSpan.objects.bulk_create(usage_span(cluster, now) for cluster in acquired)
        if released:
            UsageSpan.objects.filter(cluster_id__in=released, ended_at__isnull=True).update(
                ended_at=now
            )
            IdleSpan.objects.filter(cluster_id__in=released, ended_at__isnull=True).update(
                ended_at=now
            )
            _surges_released(released, ended=to in _ENDED)
    return moved


def release_gpus(cluster: ClusterRequest, *, message: str) -> bool:
    """Give a finished run's GPUs back once its pods are gone, without a state change.

    A run's end states (:attr:`Kind.finished`) keep its GPUs: they count until the pods
    that hold them are gone, as for a deleted cluster. The claim is
    conditional (``WHERE holds_gpus``), so two reconcile passes release once; the usage
    span is closed and the moment recorded in ``gpus_released_at``.
    """
    now = timezone.now()
    with transaction.atomic():
        claimed = ClusterRequest.objects.filter(
            pk=cluster.pk, holds_gpus=True, state=cluster.state
        ).update(holds_gpus=False, gpus_released_at=now, updated_at=now)
        if not claimed:
            return False
        _event(cluster, None, cluster.state, cluster.state, "gpus_released", message)
        _ledger(cluster, True, False, now, ended=True)
    cluster.holds_gpus = False
    cluster.gpus_released_at = now
    return True


def release_gpus_many(clusters: list[ClusterRequest], *, message: str) -> list[ClusterRequest]:
    """:func:`release_gpus` for many finished runs at once, in a constant number of
    queries per state they are in (a reconcile pass that sees hundreds of runs' pods go).

    Each row is claimed only while it still holds GPUs in the state it was read in, as
    :func:`release_gpus` claims one; the rows released are returned, updated in memory.
    """
    by_state: dict[str, dict[int, ClusterRequest]] = {}
    for cluster in clusters:
        by_state.setdefault(cluster.state, {})[cluster.pk] = cluster
    now = timezone.now()
    released: list[ClusterRequest] = []
    with transaction.atomic():
        for state, wanted in by_state.items():
            claimed = sorted(
                ClusterRequest.objects.select_for_update(no_key=True)
                .filter(pk__in=wanted, holds_gpus=True, state=state)
                .values_list("pk", flat=True)
            )
            if not claimed:
                continue
            ClusterRequest.objects.filter(pk__in=claimed).update(
                holds_gpus=False, gpus_released_at=now, updated_at=now
            )
            released.extend(wanted[pk] for pk in claimed)
        if not released:
            return []
        ids = [cluster.pk for cluster in released]
        ClusterEvent.objects.bulk_create(
            ClusterEvent(
                cluster_id=cluster.pk,
                from_state=cluster.state,
                to_state=cluster.state,
                reason="gpus_released",
                message=message[:500],
            )
            for cluster in released
        )
        UsageSpan.objects.filter(cluster_id__in=ids, ended_at__isnull=True).update(ended_at=now)
        IdleSpan.objects.filter(cluster_id__in=ids, ended_at__isnull=True).update(ended_at=now)
        _surges_released(ids, ended=True)
    for cluster in released:
        cluster.holds_gpus = False
        cluster.gpus_released_at = now
    return released


def note(cluster: ClusterRequest, *, reason: str, message: str, actor: Any = None) -> ClusterEvent:
    """Record a notable moment that is not a state change (a warning, an extension)."""
    return _event(cluster, actor, cluster.state, cluster.state, reason, message)


def first_note(cluster: ClusterRequest, *, reason: str, message: str, actor: Any) -> ClusterEvent:
    """The note a new request's timeline begins with, unsaved: the create inserts it with
    the row (``controlplane.inserts`` fills in ``cluster_id``)."""
    return _unsaved(cluster, actor, cluster.state, cluster.state, reason, message)


def _event(
    cluster: ClusterRequest, actor: Any, from_state: str, to_state: str, reason: str, message: str
) -> ClusterEvent:
    event = _unsaved(cluster, actor, from_state, to_state, reason, message)
    event.save(force_insert=True)
    return event


def _unsaved(
    cluster: ClusterRequest, actor: Any, from_state: str, to_state: str, reason: str, message: str
) -> ClusterEvent:
    user = actor if getattr(actor, "is_authenticated", False) else None
    return ClusterEvent(
        cluster_id=cluster.pk,
        actor=user,
        actor_name=user.get_username() if user else "system",
        from_state=from_state,
        to_state=to_state,
        reason=reason,
        message=message[:500],
    )


def _ledger(
    cluster: ClusterRequest, held_before: bool, held_after: bool, now: Any, *, ended: bool
) -> None:
    """Open a usage span when the request takes its GPUs, close it when it gives them back."""
    if held_after and not held_before:
        usage_span(cluster, now).save()
    elif held_before and not held_after:
        UsageSpan.objects.filter(cluster_id=cluster.pk, ended_at__isnull=True).update(ended_at=now)
        # Idle time ends with the GPUs (clusters/engine/idle.py keeps the idle ledger).
        IdleSpan.objects.filter(cluster_id=cluster.pk, ended_at__isnull=True).update(ended_at=now)
        _surges_released([cluster.pk], ended=ended)


def _surges_released(ids: list[int], *, ended: bool) -> None:
    """The requests gave their GPUs back, their surges' too (their usage spans are closed
    with the requests'). A request that ``ended`` (deleted, failed, its run over) has no
    use for its surge; otherwise a surge whose change was carried out is over, and one
    admitted but not carried out waits in line again, so that its change is not lost.
    A growth ends with its request's GPUs, whatever the reason (it is asked for again
    by a request that runs again and still needs it)."""
    Growth.objects.filter(pk__in=ids).delete()
    surges = Surge.objects.filter(pk__in=ids)
    if ended:
        surges.delete()
        return
    surges.filter(applied_at__isnull=False).delete()
    surges.filter(admitted_at__isnull=False).update(admitted_at=None)


def usage_span(cluster: ClusterRequest, now: Any, *, surge: Surge | None = None) -> UsageSpan:
    """The usage span a request opens when it takes its GPUs, or its ``surge`` when that
    is admitted (unsaved)."""
    return UsageSpan(
        tenant_id=cluster.tenant_id,
        cluster_id=cluster.pk,
        username=cluster.owner.get_username(),
        flavor_name=(surge or cluster).flavor.name,
        kind=cluster.kind,
        gpus=(surge or cluster).gpus,
        started_at=now,
        surge=surge is not None,
    )
