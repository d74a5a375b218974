"""Requests' growths (:class:`~clusters.models.Growth`) as the admission pass sees them.

A waiting growth is queued demand of its request (same tenant, owner, kind and priority;
in line from when it was asked for), a gang of its workers; an admitted one holds its
GPUs as a :class:`~clusters.admission.Running` that a reclaim may take back, at once
(``suspend_at`` now): the request shrinks to its guaranteed size instead of being
suspended. In the pure pass a growth goes by ``-(GROWTH_IDS + request id)``.
"""

from __future__ import annotations

from datetime import datetime
from typing import cast

from clusters import admission as adm
from clusters.domain.states import State
from clusters.models import ClusterKind, ClusterRequest, Growth
from clusters.queue import surge_demand
from clusters.rows import growths
from clusters.rows.spec import ClusterSpec

WAITS = "growth by {what} waits: {why}"


def growth_id(request_pk: int) -> int:
    """The id a request's growth goes by in the pure pass."""
    return -(adm.GROWTH_IDS + request_pk)


def request_of(pass_id: int) -> int | None:
    """The request whose growth ``pass_id`` is (``None``: not a growth's id)."""
    if pass_id >= 0:
        return None
    what, request = adm.extra_of(pass_id)
    return request if what == "growth" else None


def read(now: datetime) -> tuple[list[adm.Pending], list[adm.Running]]:
    """Every growth of a request that holds GPUs: those waiting, those held."""
    waiting: list[adm.Pending] = []
    holding: list[adm.Running] = []
    rows = (
        Growth.objects.filter(request__holds_gpus=True)
        .exclude(request__state=State.DELETING)
        .select_related("flavor", "request", "request__tenant", "request__flavor")
    )
    for growth in rows:
        request = growth.request
        demand = surge_demand.asking(growth_id(request.pk), request, growth)
        if growth.admitted_at is None:
            waiting.append(
                adm.Pending(
                    **demand,
                    created_at=growth.created_at,
                    workers=growth.workers,
                    worker_gpus=ClusterSpec.of(request).worker_gpus(),
                )
            )
            continue
        holding.append(
            adm.Running(
                **demand,
                admitted_at=growth.admitted_at,
                nodes=growth.workers if request.kind == ClusterKind.PROD else 0,
                suspend_at=now,
            )
        )
    return waiting, holding


def write_back(decision: adm.Decision, *, now: datetime) -> list[int]:
    """Admit the growths the pass admitted, write the standing of those left waiting
    (conditional: one given back or admitted meanwhile is left alone) and take back those
    a reclaim chose. Returns the requests whose growth was admitted."""
    admitted = [pk for i in decision.admitted if (pk := request_of(i)) is not None]
    waiting = {pk: s for i, s in decision.waiting.items() if (pk := request_of(i)) is not None}
    for reclaim in decision.reclaim:
        pk = request_of(reclaim.id)
        row = ClusterRequest.objects.unscoped().filter(pk=pk).first() if pk else None
        if row is not None:
            growths.give_back(row, reason="growth_reclaimed", message=reclaim.message)
    if not admitted and not waiting:
        return []
    found = {
        g.pk: g
        for g in Growth.objects.filter(pk__in=[*admitted, *waiting], admitted_at__isnull=True)
        .select_related("flavor", "request", "request__owner", "request__tenant")
        .select_related("request__flavor")
    }
    surge_demand.write_standings(
        found,
        waiting,
        lambda growth, why: WAITS.format(what=growths.words(cast(Growth, growth)), why=why),
    )
    return growths.admit([found[pk] for pk in admitted if pk in found], now=now)
