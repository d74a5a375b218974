"""Requests' surges (:class:`~clusters.models.Surge`) as the admission pass sees them.

A waiting surge is queued demand of its request: a :class:`~clusters.admission.Pending`
of the request's tenant, owner, kind and priority with the surge's GPUs, in line from
when the surge was recorded; an admitted one holds its GPUs as a
:class:`~clusters.admission.Running` that is never reclaimed (its request is running).
The pure pass keys requests by id, so a surge goes by its request's id negated
(:func:`surge_id`): it can wait or run beside its own request without the two meeting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from clusters import admission as adm
from clusters.domain.states import State
from clusters.models import ClusterKind, ClusterRequest, QueuedGpus, Surge
from clusters.rows import surges
from clusters.rows.spec import ClusterSpec

# The surge's own words, before the queue's: "upgrade waits for 8 h100 GPUs: <why>".
WAITS = "{what} waits for {gpus}: {why}"


def surge_id(request_pk: int) -> int:
    """The id a request's surge goes by in the pure pass."""
    return -request_pk


def is_surge(pass_id: int) -> bool:
    """Whether an id of the pass's decision is a surge's (:func:`surge_id`)."""
    return pass_id < 0 and adm.extra_of(pass_id)[0] == "surge"


@dataclass(frozen=True)
class SurgeDemand:
    """The surges the pass reads: those waiting (queued demand) and those holding GPUs,
    with whether each holding one's GPUs may not be on nodes yet (not carried out)."""

    waiting: list[adm.Pending]
    holding: list[tuple[adm.Running, bool]]


def _surges() -> list[Surge]:
    # Only a request that holds its own GPUs surges (a deleting one is giving them back).
    return list(
        Surge.objects.filter(request__holds_gpus=True)
        .exclude(request__state=State.DELETING)
        .select_related("flavor", "request", "request__tenant", "request__flavor")
    )


def asking(pass_id: int, request: ClusterRequest, extra: QueuedGpus) -> dict[str, Any]:
    """What a request's surge or growth asks for, as the pure pass's fields: its own
    GPUs, CPU and memory, its request's tenant, owner, kind and priority."""
    return {
        "id": pass_id,
        "tenant": request.tenant.slug,
        "owner": request.owner_id,
        "flavor": extra.flavor.name,
        "kind": request.kind,
        "gpus": Decimal(extra.gpus),
        "cpu": Decimal(extra.cpu),
        "memory_gib": Decimal(extra.memory_gib),
        "priority": request.priority,
    }


def write_standings(
    found: Mapping[int, QueuedGpus],
    waiting: Mapping[int, adm.QueueStatus],
    say: Callable[[QueuedGpus, str], str],
) -> None:
    """Write the standing of each waiting surge or growth in ``found`` (by request id)
    when it changed, its message ``say(row, the queue's message)``; conditional on it
    still waiting."""
    for pk, status in waiting.items():
        row = found.get(pk)
        if row is None:
            continue
        message = say(row, status.message)[:500]
        values = (status.position, status.reason, message, status.eta)
        stored = (row.queue_position, row.queue_reason, row.queue_message, row.queue_eta)
        if values != stored:
            type(row)._default_manager.filter(pk=pk, admitted_at__isnull=True).update(
                queue_position=status.position,
                queue_reason=status.reason,
                queue_message=message,
                queue_eta=status.eta,
            )


def read() -> SurgeDemand:
    """Every surge of a request that holds GPUs, as the pure pass reads it."""
    waiting: list[adm.Pending] = []
    holding: list[tuple[adm.Running, bool]] = []
    for surge in _surges():
        request = surge.request
        spec = ClusterSpec.of(request)
        workers = spec.charged_workers()
        demand = asking(surge_id(request.pk), request, surge)
        if surge.admitted_at is None:
            waiting.append(
                adm.Pending(
                    **demand,
                    created_at=surge.created_at,
                    workers=workers,
                    worker_gpus=spec.worker_gpus(),
                )
            )
            continue
        running = adm.Running(
            **demand,
            admitted_at=surge.admitted_at,
            nodes=workers if request.kind == ClusterKind.PROD else 0,
            reclaimable=False,
        )
        holding.append((running, surge.applied_at is None))
    return SurgeDemand(waiting, holding)


def write_back(decision: adm.Decision, *, now: datetime) -> list[int]:
    """Admit the surges the pass admitted and write the standing of those left waiting
    (conditional: a surge released or admitted meanwhile is left alone). Returns the
    requests whose surge was admitted."""
    admitted = [-i for i in decision.admitted if is_surge(i)]
    waiting = {-i: status for i, status in decision.waiting.items() if is_surge(i)}
    if not admitted and not waiting:
        return []
    found = {
        s.pk: s
        for s in Surge.objects.filter(pk__in=[*admitted, *waiting], admitted_at__isnull=True)
        .select_related("flavor", "request", "request__owner")
        .select_related("request__tenant")
    }
    write_standings(
        found,
        waiting,
        lambda surge, why: WAITS.format(
            what=cast(Surge, surge).purpose, gpus=surges.words(cast(Surge, surge)), why=why
        ),
    )
    return surges.admit([(found[pk], found[pk].request) for pk in admitted if pk in found], now=now)


def requests_only(ids: list[int]) -> list[int]:
    """The request ids among a decision's ids (without the surges' and growths')."""
    return [i for i in ids if i >= 0]
