"""Reads of the fleet's members for the pages, the API and the command."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from clusters.domain.states import State
from clusters.domain.workload_kinds import REQUEUE, kind_named
from clusters.engine.member_drain import RUNNING_THERE, held_by_hosting
from clusters.kube.connection import home_member
from clusters.models import ClusterRequest, DrainMode, FlavorStock, KubeCluster, Schedulable


def kube_cluster_list() -> QuerySet[KubeCluster]:
    """Every member in placement order, with its allow-list loaded."""
    return KubeCluster.objects.prefetch_related("allowed_tenants").order_by(
        "placement_order", "name"
    )


def kube_cluster_references(*, member: KubeCluster) -> tuple[int, int]:
    """How many requests not yet deleted are placed on ``member``, and how many waiting
    ones ask for it by name: while either is not zero it cannot be removed."""
    rows = ClusterRequest.objects.unscoped().exclude(state=State.DELETED)
    return (
        rows.filter(kube_cluster=member).count(),
        rows.filter(wanted_kube_cluster=member, kube_cluster__isnull=True).count(),
    )


def kube_cluster_stock(*, member: KubeCluster) -> QuerySet[FlavorStock]:
    """Each flavor's nodes in ``member``, by flavor name."""
    return member.stock.select_related("flavor").order_by("flavor__name")


@dataclass(frozen=True)
class DrainProgress:
    """How far a member's drain is: the workloads still there by what happens to each
    (``requeue``: about to go back to the queue; ``wait``: run to their end there;
    ``deleting``: on their way out; ``suspended``: hold nothing, resume elsewhere), and
    how many requests moved off it wait to be placed again."""

    requeue: int = 0
    wait: int = 0
    deleting: int = 0
    suspended: int = 0
    awaiting_placement: int = 0

    @property
    def remaining(self) -> int:
        """Workloads that still run there (the suspended hold nothing)."""
        return self.requeue + self.wait + self.deleting


def drain_progress(members: Iterable[KubeCluster]) -> dict[int, DrainProgress]:
    """The :class:`DrainProgress` of each draining member of ``members``, by id, in one
    query (and one for the home member, which also runs the rows not placed yet)."""
    draining = {m.pk: m for m in members if m.schedulable == Schedulable.DRAINING}
    if not draining:
        return {}
    home = home_member()
    where = Q(kube_cluster_id__in=draining)
    if home is not None and home.pk in draining:
        where |= Q(kube_cluster__isnull=True)
    counts = (
        ClusterRequest.objects.unscoped()
        .filter(where, state__in=RUNNING_THERE | {State.SUSPENDED})
        .values("kube_cluster_id", "workload", "state")
        .annotate(n=Count("pk"))
    )
    tally: dict[int, dict[str, int]] = {pk: {} for pk in draining}
    for row in counts:
        pk = row["kube_cluster_id"] or (home.pk if home is not None else 0)
        member = draining[pk]
        if row["state"] == State.SUSPENDED:
            what = "suspended"
        elif row["state"] == State.DELETING:
            what = "deleting"
        else:
            action = kind_named(row["workload"]).drain_action(
                member.drain_mode or DrainMode.DEFAULT
            )
            what = "requeue" if action == REQUEUE else "wait"
        tally[pk][what] = tally[pk].get(what, 0) + row["n"]
    # Rows ``gangway submit --on`` ties to their member wait, whatever the mode.
    for placed, workload in _held_by_hosting(where):
        pk = placed or (home.pk if home is not None else 0)
        mode = draining[pk].drain_mode or DrainMode.DEFAULT
        if kind_named(workload).drain_action(mode) == REQUEUE:
            tally[pk]["requeue"] -= 1
            tally[pk]["wait"] = tally[pk].get("wait", 0) + 1
    return {
        pk: DrainProgress(**tally[pk], awaiting_placement=len(member.moving))
        for pk, member in draining.items()
    }


def _held_by_hosting(where: Q) -> list[tuple[int | None, str]]:
    """Member and kind of the running rows in ``where`` that a drain leaves in place
    because of hosted jobs (:func:`held_by_hosting`); two small queries."""
    rows = list(
        ClusterRequest.objects.unscoped()
        .filter(where, state__in=RUNNING_THERE - {State.DELETING})
        .filter(Q(hosted_jobs__isnull=False) | Q(job__host__isnull=False))
        .distinct()
        .only("pk", "kube_cluster_id", "workload")
    )
    if not rows:
        return []
    held = held_by_hosting(rows)
    return [(r.kube_cluster_id, r.workload) for r in rows if r.pk in held]
