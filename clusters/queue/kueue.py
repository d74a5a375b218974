"""Kueue mode: Kueue decides admission, the control plane writes its queues and reads back.

In this mode (``QUEUE_MODE=kueue``) the control plane writes ResourceFlavors, one
ClusterQueue per tenant, a LocalQueue per tenant namespace and the WorkloadPriorityClasses
from its own tables, labels each RayCluster with its queue, and folds Kueue's verdicts
into the rows: a queued request becomes ``admitted`` when its Workload is admitted; while
it waits, its position comes from Kueue's visibility API and its reason from the
Workload's ``QuotaReserved`` condition; a running one that Kueue evicts goes back to
``queued`` with Kueue's reason. Users see the same fields in either mode. With several
members, MultiKueue places: see :mod:`clusters.queue.multikueue` and docs/fleet.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters.admission.snapshot import CAPACITY, WAITING_FOR_NODES
from clusters.domain.states import State
from clusters.domain.workload_kinds import kind_of, kinds
from clusters.kube import manifests, topology_queues
from clusters.kube.applied import AppliedCache
from clusters.kube.bundles import UnmanagedNamespace, ensure_bundle
from clusters.kube.conditions import condition
from clusters.kube.connection import gateway_for, home_member
from clusters.kube.gateway import Gateway
from clusters.kube.labels import managed_selector
from clusters.kube.multikueue import CONTROLLER, KUEUE_NAMESPACE, check_name, secret_name
from clusters.kube.queues import GPU, KUEUE_API, LOCAL_QUEUE_NAME
from clusters.models import ClusterRequest, KubeCluster
from clusters.queue import multikueue, usage_reads
from clusters.queue.interface import PassResult, QueueBackend, QueueView
from clusters.queue.writeback import admit
from clusters.rows import enqueue, lifecycle, preemption
from clusters.rows.transitions import transition
from tenants.models import GpuFlavor, PriorityClass, Quota, Tenant
from tenants.selectors import cohort_parents

log = logging.getLogger(__name__)

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
_applied = AppliedCache("kueue-queues")
_keys: set[str] = set()  # the members this process wrote Kueue's objects to


def ensure_queues(gw: Gateway) -> bool:
    """Apply the Kueue objects into ``gw``'s member when the tables changed since this
    process last did.

    A tenant whose namespace gangway does not own is left out (its LocalQueue would be
    written into that namespace); its requests fail with the reason when provisioned.
    In MultiKueue mode the manager gets the MultiKueue objects too and its ClusterQueues
    run the dispatch check; a worker gets the queues of the tenants open to it (MultiKueue
    creates no namespace or LocalQueue there), sized to what it has.
    """
    fleet = multikueue.fleet()
    manager = fleet is None or fleet.is_manager(gw)
    worker = None if manager or fleet is None else fleet.worker_named(gw.member)
    tenants = []
    for tenant in Tenant.objects.unscoped():
        if worker is not None and fleet is not None and not fleet.open_to(worker, tenant):
            continue  # a tenant's objects never land on a member it may not use
        try:
            ensure_bundle(tenant, gw)  # with the tenant's LocalQueue
        except UnmanagedNamespace as exc:
            log.warning("Kueue queues of tenant %s not written: %s", tenant.slug, exc.message)
            continue
        tenants.append(tenant)
    objects = manifests.kueue_objects(
        tenants,
        GpuFlavor.objects.all(),
        Quota.objects.unscoped().all(),
        cohort_parents(),
        dispatch={int(t.pk): check_name(t) for t in tenants} if fleet and manager else None,
        capacity=multikueue.capacity_of(worker) if worker is not None else None,
        usage_fair_sharing=usage_reads.half_life() is not None,
        platform_classes=PriorityClass.objects.all(),
    )
    if fleet is not None and manager:
        objects = fleet.manager_objects(tenants) + objects  # the checks before their queues

    def write(objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            gw.apply(obj)
        # A cohort that lost its parent is a root again: its Cohort goes, since applying
        # one without ``parentName`` would not take the old parent away everywhere.
        wanted = {o["metadata"]["name"] for o in objects if o["kind"] == "Cohort"}
        for found in gw.list(KUEUE_API, "Cohort", label_selector=managed_selector()):
            name = found["metadata"]["name"]
            if name not in wanted:
                gw.delete("kueue.x-k8s.io/v1beta2", "Cohort", name)
        if fleet is not None and manager:
            prune_multikueue(gw, objects)

    _keys.add(gw.member)
    return _applied.apply(f"kueue:{gw.member}", objects, write)


def prune_multikueue(gw: Gateway, objects: list[dict[str, Any]]) -> None:
    """Delete the manager's MultiKueue objects that no longer belong (a member removed,
    a tenant gone or left without workers), a removed worker's Secret with it."""
    wanted = {(o["kind"], o["metadata"]["name"]) for o in objects}

    def stale(kind: str) -> list[str]:
        found = gw.list(KUEUE_API, kind, label_selector=managed_selector())
        return [
            o["metadata"]["name"]
            for o in found
            if (kind, o["metadata"]["name"]) not in wanted
            # The capacity check is the workers' (and another controller's).
            and (o.get("spec") or {}).get("controllerName", CONTROLLER) == CONTROLLER
        ]

    for name in stale("MultiKueueConfig"):
        gw.delete("kueue.x-k8s.io/v1beta2", "MultiKueueConfig", name)
    for name in stale("AdmissionCheck"):
        gw.delete("kueue.x-k8s.io/v1beta2", "AdmissionCheck", name)
    for name in stale("MultiKueueCluster"):
        gw.delete("kueue.x-k8s.io/v1beta2", "MultiKueueCluster", name)
        gw.delete("v1", "Secret", secret_name(name), KUEUE_NAMESPACE)


def forget_queues() -> None:
    """Make the next :func:`ensure_queues` re-apply (the clusters may have lost them)."""
    for member in list(_keys):
        _applied.forget(f"kueue:{member}")


def workloads_by_cluster(gw: Gateway) -> dict[tuple[str, str], dict[str, Any]]:
    """Kueue Workloads keyed by (namespace, name of the workload kind's object they queue),
    from one LIST (a request's object is named after it)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    objects = {kind.object_kind for kind in kinds().values()}
    for workload in gw.list("kueue.x-k8s.io/v1beta2", "Workload"):
        meta = workload.get("metadata") or {}
        for owner in meta.get("ownerReferences") or []:
            if owner.get("kind") in objects:
                found[(meta.get("namespace", ""), owner.get("name", ""))] = workload
    return found


def is_admitted(workload: dict[str, Any]) -> bool:
    """Whether Kueue admitted the Workload (quota reserved and admission checks passed)
    and is not evicting it (an evicted Workload keeps ``Admitted`` until its job stopped)."""
    if condition(workload, "Evicted").get("status") == "True":
        return False
    return condition(workload, "Admitted").get("status") == "True"


def eviction(workload: dict[str, Any]) -> tuple[str, str] | None:
    """Kueue's reason and message when it took a running cluster's quota back, else None.

    Kueue marks an eviction with the ``Evicted`` condition (reason ``Preempted``,
    ``PodsReadyTimeout``, ``InactiveWorkload``, ...). A Workload that lost its reservation
    without one (Kueue replaced it, say) counts too, with ``QuotaReserved``'s reason.
    """
    evicted = condition(workload, "Evicted")
    if evicted.get("status") == "True":
        return str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "")
    if (workload.get("status") or {}).get("admission"):
        return None
    reserved = condition(workload, "QuotaReserved")
    return (
        str(reserved.get("reason") or "Pending"),
        str(reserved.get("message") or "its Workload no longer holds quota"),
    )


def fold_eviction(cluster: ClusterRequest, workload: dict[str, Any] | None) -> bool:
    """Put a running cluster that Kueue evicted back in the queue; True when it did.

    Kueue suspends the RayCluster and requeues its Workload: the row follows, gives its
    GPUs back (its usage span closes) and waits, with Kueue's reason, until Kueue admits
    it again (then it goes through ``admitted`` and ``provisioning`` with a new span).
    """
    found = eviction(workload) if workload is not None else None
    if found is None:
        return False
    reason, message = found
    held = cluster.state
    after = lifecycle.requeue_evicted(
        cluster,
        reason=reason,
        message=message,
        queue_reason=_reason(message),
    )
    if after.state == State.QUEUED and held != State.QUEUED:
        # Kueue gives no notice of its own preemptions; a job's next run still resumes
        # from the last checkpoint it reported (docs/preemption.md).
        preemption.count_eviction(after)
    return True


def pending_positions(gw: Gateway, namespaces: set[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """Pending Workloads' positions from the visibility API, one call per LocalQueue."""
    positions: dict[tuple[str, str], dict[str, Any]] = {}
    for namespace in sorted(namespaces):
        path = (
            f"{VISIBILITY}/namespaces/{namespace}/localqueues/{LOCAL_QUEUE_NAME}/pendingworkloads"
        )
        summary = gw.get_path(path, what=f"pending workloads of {namespace}") or {}
        for item in summary.get("items") or []:
            name = (item.get("metadata") or {}).get("name", "")
            positions[(namespace, name)] = item
    return positions


def _reason(message: str) -> str:
    lowered = message.lower()
    if 'topology "' in lowered:
        # Quota fits but no domain of the asked level has room (Topology Aware Scheduling).
        return CAPACITY
    if "cohort" in lowered or "borrow" in lowered:
        return "cohort_quota"
    if "quota" in lowered:
        return "tenant_quota"
    if "capacity" in lowered or "insufficient" in lowered:
        return "capacity"
    return "pending"


def admitted_flavor(workload: dict[str, Any]) -> str | None:
    """The GPU flavor Kueue admitted the Workload on (its ResourceFlavors are named as
    the catalogue's), or ``None`` when it names none."""
    admission = (workload.get("status") or {}).get("admission") or {}
    for assignment in admission.get("podSetAssignments") or []:
        flavor = (assignment.get("flavors") or {}).get(GPU)
        if flavor:
            return str(flavor)
    return None


def admitted_on(workload: dict[str, Any]) -> tuple[str, str]:
    """The member an admitted Workload runs on, and the words that say so.

    With MultiKueue, the worker that admitted its copy (``status.clusterName``: the
    MultiKueueClusters are named as the members); without, the member gangway writes
    Workloads to (the home member), which the words do not name.
    """
    name = str((workload.get("status") or {}).get("clusterName") or "")
    if name and KubeCluster.objects.filter(name=name).exists():
        return name, f" and dispatched by MultiKueue to {name}"
    home = home_member()
    return (home.name if home else ""), ""


def fold_queued(
    cluster: ClusterRequest,
    workload: dict[str, Any] | None,
    positions: dict[tuple[str, str], dict[str, Any]],
    node_labels: Callable[[str], dict[str, str]] | None = None,
) -> bool:
    """Fold Kueue's view of a queued request into its row; True when it was admitted.
    Admitted by topology (a level asked): the domain Kueue put the gang in is kept as
    the row's ``topology_domain`` (``node_labels``: a node's labels, where Kueue names
    only hosts)."""
    if workload is None:
        message = "waiting for Kueue to create its Workload"
        if cluster.queue_message != message:
            ClusterRequest.objects.filter(pk=cluster.pk, state=State.QUEUED).update(
                queue_reason="pending", queue_message=message
            )
        return False
    if is_admitted(workload):
        now = timezone.now()
        member, said = admitted_on(workload)
        if admit(
            [cluster],
            now=now,
            placed={cluster.pk: admitted_flavor(workload) or ""},
            clusters={cluster.pk: member} if member else None,
        ):
            domain = topology_queues.assigned_domain(
                workload, cluster.topology_level, node_labels or (lambda _node: {})
            )
            if domain:
                ClusterRequest.objects.filter(pk=cluster.pk).update(topology_domain=domain)
            kind = kind_of(cluster)
            transition(
                cluster,
                kind.started,
                reason="applied",
                message=f"admitted by Kueue{said}; {kind.started_message}",
            )
            return True
        return False
    waiting = _waiting_for_checks(workload)
    if waiting is not None:
        failed = waiting.startswith("The cluster autoscaler could not")
        ClusterRequest.objects.filter(pk=cluster.pk, state=State.QUEUED).update(
            queue_position=None,
            queue_flavor_position=None,
            queue_reason=CAPACITY if failed else WAITING_FOR_NODES,
            queue_message=waiting[:500],
            queue_eta=None,
        )
        return False
    meta = workload.get("metadata") or {}
    item = positions.get((meta.get("namespace", ""), meta.get("name", ""))) or {}
    cond = condition(workload, "QuotaReserved")
    message = str(cond.get("message") or "waiting in Kueue's queue")[:500]
    position = item.get("positionInLocalQueue")
    flavor_position = item.get("positionInClusterQueue")
    ClusterRequest.objects.filter(pk=cluster.pk, state=State.QUEUED).update(
        queue_position=position + 1 if isinstance(position, int) else None,
        queue_flavor_position=flavor_position + 1 if isinstance(flavor_position, int) else None,
        queue_reason=_reason(message),
        queue_message=f"Kueue: {message}",
        queue_eta=None,
    )
    return False


def _retrying(workload: dict[str, Any], checks: list[dict[str, Any]]) -> str | None:
    """Kueue's words when a check failed (the autoscaler could not provide the nodes) and
    Kueue put the Workload back in line to retry later; ``None`` otherwise."""
    evicted = condition(workload, "Evicted")
    if evicted.get("status") != "True" or evicted.get("reason") != "AdmissionCheck":
        return None
    said = "; ".join(str(c.get("message") or "") for c in checks if c.get("message"))
    again = (workload.get("status") or {}).get("requeueState", {}).get("requeueAt")
    when = f" Kueue tries again at {again}." if again else ""
    reason = said or str(evicted.get("message") or "")
    return f"The cluster autoscaler could not provide the nodes: {reason}.{when}"


def _waiting_for_checks(workload: dict[str, Any]) -> str | None:
    """What a Workload waits for once Kueue reserved its quota but an admission check
    (the capacity check: the cluster autoscaler adding nodes) is not ready yet; ``None``
    when it is not in that position. Says since when, so the wait can be read."""
    checks = (workload.get("status") or {}).get("admissionChecks") or []
    retrying = _retrying(workload, checks)
    if retrying is not None:
        return retrying
    if condition(workload, "QuotaReserved").get("status") != "True":
        return None
    pending = [c for c in checks if c.get("state") != "Ready"]
    if not pending:
        return None
    since = (
        min(
            (parse_datetime(str(c.get("lastTransitionTime") or "")) for c in pending),
            key=lambda t: t or timezone.now(),
        )
        or timezone.now()
    )
    minutes = max(int((timezone.now() - since).total_seconds() // 60), 0)
    said = "; ".join(str(c.get("message") or c.get("state") or "") for c in pending)
    return (
        f"Quota reserved; waiting for nodes from the cluster autoscaler since "
        f"{since:%H:%M} UTC ({minutes} min): {said}"
    )


class KueueView(QueueView):
    """Kueue's Workloads and pending positions, read once per reconcile pass.

    MultiKueue: on a worker (``manager``: its gateway), ``workloads`` are the manager's
    (its verdicts decide: an eviction there is one here) and the rows' objects are
    MultiKueue's copies; on the manager, ``kept`` are the originals of what it dispatched.
    """

    def __init__(
        self,
        workloads: dict[tuple[str, str], dict[str, Any]],
        positions: dict[tuple[str, str], dict[str, Any]],
        *,
        manager: Gateway | None = None,
        kept: dict[str, set[tuple[str, str]]] | None = None,
        nodes: Gateway | None = None,
    ) -> None:
        self.workloads = workloads
        self.positions = positions
        self._nodes = nodes  # where a topology assignment's hosts are read
        self._manager = manager  # on a worker: the manager, where the originals are
        self._kept = kept or {}

    def dispatched(self, cluster: ClusterRequest) -> bool:
        return self._manager is not None

    def original(self, cluster: ClusterRequest) -> dict[str, Any] | None:
        if self._manager is None:
            return None
        kind = kind_of(cluster)
        name, namespace = cluster.name, cluster.namespace
        return self._manager.get(kind.api_version, kind.object_kind, name, namespace)

    def also_wanted(self) -> dict[str, set[tuple[str, str]]]:
        return self._kept

    def fold_waiting(self, cluster: ClusterRequest) -> None:
        fold_queued(
            cluster,
            self.workloads.get((cluster.namespace, cluster.name)),
            self.positions,
            self._node_labels,
        )

    def _node_labels(self, name: str) -> dict[str, str]:
        node = self._nodes.get("v1", "Node", name) if self._nodes is not None else None
        return dict(((node or {}).get("metadata") or {}).get("labels") or {})

    def fold_eviction(self, cluster: ClusterRequest) -> bool:
        return fold_eviction(cluster, self.workloads.get((cluster.namespace, cluster.name)))


class KueueQueue(QueueBackend):
    """Kueue decides admission; the reconciler folds its verdicts into the rows."""

    name = "kueue"
    provisions_queued = True
    suspend_deletes = True
    # Kueue's verdicts (positions, admissions, evictions) live on its Workloads.
    folds_incrementally = False
    fixed_size_only = True

    def request_queued(self, cluster_id: int) -> None:
        # Kueue queues the RayCluster itself: write it (suspended until admitted).
        enqueue.provision(cluster_id)

    def admission_pass(self) -> PassResult:
        return PassResult(skipped=True)  # Kueue decides

    def observe(self, gw: Gateway, rows: list[ClusterRequest]) -> QueueView:
        ensure_queues(gw)
        fleet = multikueue.fleet()
        if fleet is not None and not fleet.is_manager(gw):
            # A worker's rows run on MultiKueue's copies; their Workloads on the manager
            # hold the verdicts, and nothing waits in a worker's queue (a copy does,
            # but the manager's Workload is the one the row follows).
            manager = fleet.manager_gateway()
            return KueueView(workloads_by_cluster(manager), {}, manager=manager)
        waiting = {c.namespace for c in rows if c.state == State.QUEUED}
        kept = multikueue.dispatched_objects(fleet, self) if fleet is not None else None
        return KueueView(
            workloads_by_cluster(gw), pending_positions(gw, waiting), kept=kept, nodes=gw
        )

    def writes_through(self, cluster: ClusterRequest, gw: Gateway) -> Gateway:
        if cluster.kube_cluster_id is None or not gw.member:
            # Not placed, or on settings' member: the home member, the manager if any.
            return gw
        home = home_member()
        if home is None or home.pk == cluster.kube_cluster_id:
            return gw
        # Placed on another member under Kueue: MultiKueue dispatched it there from the
        # manager, whose original it keeps the copy from; writing the copy would fight it.
        return gateway_for(home)

    def runs_a_copy(self, cluster: ClusterRequest) -> bool:
        fleet = multikueue.fleet()
        placed = cluster.kube_cluster_id
        return fleet is not None and placed is not None and placed != fleet.manager.pk

    def forget_applied(self) -> None:
        forget_queues()
