"""MultiKueue mode: ``QUEUE_MODE=kueue`` with more than one member of the fleet.

The home member (:func:`clusters.kube.connection.home_member`) is Kueue's manager: every
request's object is written there and Kueue dispatches its Workload to a worker (every
other member) listed in its tenant's ``MultiKueueConfig``. This module reads the fleet
for that: the members, their roles and which workers each tenant's config lists.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_named
from clusters.kube import multikueue as mk
from clusters.kube.connection import gateway_for, kubeconfig_of
from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest, FlavorStock, KubeCluster, Schedulable


@dataclass
class Fleet:
    """The manager and the workers (in placement order), with each one's allow-list."""

    manager: KubeCluster
    workers: list[KubeCluster]
    allowed: dict[int, set[int]]  # member id -> tenant ids (empty: every tenant)

    def is_manager(self, gw: Gateway) -> bool:
        """Whether ``gw`` reaches the manager (settings' gateway names no member)."""
        return gw.member in ("", self.manager.name)

    def worker_named(self, name: str) -> KubeCluster | None:
        return next((w for w in self.workers if w.name == name), None)

    def open_to(self, member: KubeCluster, tenant: Any) -> bool:
        """Whether ``tenant`` may use ``member`` (its allow-list is empty or names it)."""
        allowed = self.allowed.get(member.pk) or set()
        return not allowed or int(tenant.pk) in allowed

    def config_of(self, tenant: Any) -> list[str]:
        """The workers a tenant's Workloads may be dispatched to, in placement order:
        those open to it and active (a cordoned or draining member takes nothing new)."""
        return [
            w.name
            for w in self.workers
            if w.schedulable == Schedulable.ACTIVE and self.open_to(w, tenant)
        ]

    def manager_objects(self, tenants: list[Any]) -> list[dict[str, Any]]:
        """The manager's MultiKueue objects: every worker's Secret and MultiKueueCluster
        (a cordoned one too: what runs there keeps its status in sync), then each
        tenant's config and check."""
        kubeconfigs: dict[str, dict[str, Any]] = {}
        for worker in self.workers:
            config = kubeconfig_of(worker)
            if isinstance(config, dict):
                kubeconfigs[worker.name] = config
        return mk.manager_objects(kubeconfigs, [(t, self.config_of(t)) for t in tenants])

    def manager_gateway(self) -> Gateway:
        return gateway_for(self.manager)


def fleet() -> Fleet | None:
    """The fleet in MultiKueue mode, else ``None`` (built-in queue, or a single member)."""
    if settings.QUEUE_MODE != "kueue":
        return None
    members = list(
        KubeCluster.objects.order_by("-from_settings", "placement_order", "name").prefetch_related(
            "allowed_tenants"
        )
    )
    if len(members) < 2:
        return None
    manager, workers = members[0], members[1:]
    workers.sort(key=lambda m: (m.placement_order, m.name))
    allowed = {m.pk: {t.pk for t in m.allowed_tenants.all()} for m in members}
    return Fleet(manager, workers, allowed)


def capacity_of(member: KubeCluster) -> dict[str, int]:
    """A worker's GPUs per flavor (its node group at its largest), from its stock rows."""
    found: dict[str, int] = {}
    for stock in FlavorStock.objects.filter(kube_cluster=member).select_related("flavor"):
        nodes = max(stock.node_count, stock.max_node_count or 0)
        found[stock.flavor.name] = nodes * int(stock.flavor.gpus_per_node)
    return found


def dispatched_objects(fleet: Fleet, backend: Any) -> dict[str, set[tuple[str, str]]]:
    """The manager's objects of the rows placed on workers that still want them, by
    kind (one query): MultiKueue keeps their copies from these, so they are no orphans
    on the manager; once a row stops wanting its object (deleted, suspended), the
    manager's pass deletes it as an orphan and MultiKueue removes the copies."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    rows = (
        ClusterRequest.objects.unscoped()
        .not_deleted()
        .filter(kube_cluster__in=[w.pk for w in fleet.workers])
        .values_list("workload", "state", "name", "tenant__namespace")
    )
    for workload, state, name, namespace in rows:
        kind = kind_named(workload)
        if state != State.DELETING and kind.behaviour.wants_object(state, backend):
            found[kind.object_kind].add((namespace, name))
    return found
