"""A reconcile pass that only says what it would do: the dry run an operator reads
before letting the engine loose on a cluster, say after restoring a database backup. In a
fleet it is rehearsed over every member, each its own pass (:func:`rehearse_fleet`).

The pass is the real one (:func:`clusters.engine.reconciler.reconcile_once`'s code) with
two differences: the gateway it gets reads from the API server but records every write
(apply, create, patch, delete) instead of sending it, and the database transaction it
runs in is rolled back, so the rows' moves it made are listed and then undone (with the
nudges and notifications that would have followed their commit). What it would have
applied is forgotten again, so that the next real pass in this process applies it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from django.db import transaction

from clusters.engine import reconciler
from clusters.engine.member_scope import MemberScope
from clusters.kube import bundles
from clusters.kube.gateway import Gateway
from clusters.models import ClusterEvent, KubeCluster
from clusters.queue.backends import queue_backend


@dataclass
class Plan:
    """What one pass would do: Kubernetes writes, deletions, and moves of rows."""

    writes: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    moves: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The plan as an operator reads it, deletions first."""
        out = [f"would delete {d}" for d in self.deletes]
        out += [f"would write {w}" for w in self.writes]
        out += [f"would move {m}" for m in self.moves]
        out += [f"error: {e}" for e in self.errors]
        return out or ["nothing to do"]


class RecordingGateway:
    """Reads go to the real gateway; writes are recorded in the plan and never sent.

    A write answers what the API server would in the common case (the object as sent;
    for a deletion, whether the object is there), which is all the reconciler reads.
    """

    def __init__(self, real: Gateway, plan: Plan) -> None:
        self._real = real
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)  # version, get, list, pod_log: reads

    @staticmethod
    def _name(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        where = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{obj['kind']} {where}{meta['name']}"

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._plan.writes.append(f"apply {self._name(obj)}")
        return obj

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._plan.writes.append(f"create {self._name(obj)}")
        return obj

    def merge_patch(
        self, api_version: str, kind: str, name: str, patch: dict[str, Any], namespace: str
    ) -> dict[str, Any]:
        self._plan.writes.append(f"patch {kind} {namespace}/{name}")
        return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
    ) -> bool:
        # A deletion of what is not there changes nothing (the real one answers False):
        # the plan lists only objects that would go.
        if self._real.get(api_version, kind, name, namespace) is None:
            return False
        self._plan.deletes.append(f"{kind} {namespace + '/' if namespace else ''}{name}")
        return True


def rehearse_fleet() -> dict[str, Plan]:
    """What the pass over every member of the fleet would do now, by member name, in
    placement order (without registered members: settings' cluster, named ``""``)."""
    members = list(KubeCluster.objects.order_by("placement_order", "name"))
    if not members:
        return {"": reconcile_dry_run()}
    return {member.name: reconcile_dry_run(member=member) for member in members}


def reconcile_dry_run(gw: Gateway | None = None, *, member: KubeCluster | None = None) -> Plan:
    """What a reconcile pass over ``member`` (``None``: the home member) would do now,
    without doing any of it."""
    plan = Plan()
    scope = MemberScope.of(member)
    real = gw or scope.gateway()
    recorder = cast(Gateway, RecordingGateway(real, plan))
    with transaction.atomic():
        last = ClusterEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        report = reconciler.reconcile_once(recorder, scope=scope)
        for event in (
            ClusterEvent.objects.filter(pk__gt=last).select_related("cluster").order_by("pk")
        ):
            if event.from_state != event.to_state:
                plan.moves.append(
                    f"{event.cluster.namespace}/{event.cluster.name} "
                    f"{event.from_state or 'new'} -> {event.to_state} ({event.reason})"
                )
        transaction.set_rollback(True)
    plan.errors = list(report.errors)
    # The bundles it "applied" were never sent: a real pass must not skip them.
    for tenant_id in {c.tenant_id for c in _all_rows()}:
        bundles.forget_bundle(tenant_id, real.member)
    queue_backend().forget_applied()
    return plan


def _all_rows() -> list[Any]:
    from clusters.models import ClusterRequest

    return list(ClusterRequest.objects.unscoped().not_deleted().only("tenant_id"))
