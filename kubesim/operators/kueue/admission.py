"""Kueue's admission: the queues' order, quota reservation, and the queues' status.

Pending Workloads wait in their ClusterQueue in priority then creation order. A pass
admits, per ClusterQueue, each that fits (after preemption where allowed); BestEffortFIFO
lets a later Workload past one that does not fit, StrictFIFO blocks behind it. Admitted:
``status.admission``, ``QuotaReserved``/``Admitted``, the job unsuspended with the
flavors' node labels; not fitting: ``QuotaReserved`` False with the reason. An elastic
job's scale-up slice takes over its old slice's quota (``slices.py``). The queues'
status is rewritten after each pass.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import quantity
from kubesim.operators.kueue.common import (
    ADMISSION_CONDITIONS,
    CQ,
    LQ,
    WL,
    condition,
    is_finished,
)
from kubesim.operators.kueue.devices import pod_set_devices
from kubesim.operators.kueue.preemption import preempt_for
from kubesim.operators.kueue.provisioning import (
    UNSATISFIED,
    checks_for,
    inactive_checks,
    initial_states,
)
from kubesim.operators.kueue.quota import Usage, assign, flavor_quotas, reserved
from kubesim.operators.kueue.slices import replace, replaced_slice, slice_flavors, without
from kubesim.operators.kueue.start import start_job
from kubesim.operators.kueue.workloads import set_pending
from kubesim.store import Obj
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView
    from kubesim.operators.kueue import Kueue


def pending_by_cq(cluster: ClusterView) -> dict[str, list[Obj]]:
    """The Workloads waiting in each ClusterQueue (by name; "" when their LocalQueue does
    not exist), in the order Kueue admits them: priority, then age."""
    out: dict[str, list[Obj]] = {}
    for wl in cluster.store.iter(WL):
        if get_path(wl, "status", "admission") or not wl["spec"].get("active", True):
            continue
        if get_path(wl, "status", "requeueState", "requeueAt"):
            continue  # backing off after a PodsReady timeout
        lq = cluster.store.get(LQ, wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))
        cq_name = get_path(lq, "spec", "clusterQueue", default="") if lq else ""
        out.setdefault(cq_name, []).append(wl)
    for items in out.values():
        items.sort(
            key=lambda w: (
                -int(w["spec"].get("priority") or 0),
                w["metadata"]["creationTimestamp"],
                int(w["metadata"]["resourceVersion"]),
            )
        )
    return out


def admit_all(kueue: Kueue) -> bool:
    """One admission pass over every ClusterQueue, preempting where its policy allows,
    then the queues' status. True when anything was written."""
    cluster = kueue.cluster
    busy = False
    use = reserved(cluster)
    for cq_name, pending in pending_by_cq(cluster).items():
        cq = cluster.store.get(CQ, "", cq_name) if cq_name else None
        strict = get_path(cq, "spec", "queueingStrategy") == "StrictFIFO"
        blocked = False
        inactive = inactive_checks(cluster, cq) if cq is not None else None
        for wl in pending:
            if inactive is not None:
                msg = f"ClusterQueue {cq_name} is inactive"
                busy = set_pending(cluster, wl, "Inadmissible", msg) or busy
                continue
            if cq is None:
                lq = wl["spec"].get("queueName", "")
                msg = (
                    f"ClusterQueue {cq_name} doesn't exist"
                    if cq_name
                    else f"LocalQueue {lq} doesn't exist"
                )
                busy = set_pending(cluster, wl, "Inadmissible", msg) or busy
                continue
            refused = device_problem(cluster, wl)
            if refused:
                busy = set_pending(cluster, wl, "Inadmissible", refused) or busy
                continue
            # An elastic job's scale-up slice counts the quota of the slice it replaces
            # as its own, on that slice's flavors.
            replaced = replaced_slice(cluster, wl, cq_name)
            base = without(use, replaced) if replaced is not None else use
            only = slice_flavors(replaced) if replaced is not None else None
            assignment, why = (
                (None, ("Workload is waiting behind an older one in a StrictFIFO queue"))
                if blocked
                else assign(cluster, wl, cq, base, only=only)
            )
            if (
                assignment is None
                and not blocked
                and replaced is None
                and preempt_for(kueue, wl, cq, use)
            ):
                base = use = reserved(cluster)
                assignment, why = assign(cluster, wl, cq, use)
            if assignment is None:
                blocked = blocked or strict
                busy = set_pending(cluster, wl, "Pending", why) or busy
                continue
            use = base
            _admit(cluster, wl, cq_name, assignment)
            if replaced is not None:
                replace(kueue, replaced, wl)
            busy = True
    _write_queue_status(cluster, use)
    return busy


def device_problem(cluster: ClusterView, wl: Obj) -> str:
    """Why Kueue cannot count ``wl``'s DRA claims (``devices.py``), or ``""``."""
    for index, ps in enumerate(wl["spec"].get("podSets") or []):
        _, why = pod_set_devices(cluster, wl["metadata"]["namespace"], index, ps)
        if why:
            return why
    return ""


def _admit(cluster: ClusterView, wl: Obj, cq_name: str, assignment: list[dict[str, Any]]) -> None:
    """Reserve quota for ``wl`` in ClusterQueue ``cq_name`` with ``assignment``. Without
    admission checks it is admitted at once and its job started; with some it waits,
    ``Admitted`` False, until they are Ready (``provisioning.py``)."""
    checks = checks_for(cluster.store.get(CQ, "", cq_name), assignment)
    old = get_path(wl, "status", "conditions", default=[])
    conditions = [
        condition(
            "QuotaReserved",
            True,
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq_name}",
            old,
        ),
        condition("Admitted", False, *UNSATISFIED, old)
        if checks
        else condition("Admitted", True, "Admitted", "The workload is admitted", old),
    ]
    for c in old:
        if c.get("type") in ADMISSION_CONDITIONS:
            continue
        if c.get("type") in ("Evicted", "Preempted") and c.get("status") == "True":
            # As Kueue does on a new reservation: the eviction is history now.
            c = condition(
                c["type"], False, "QuotaReserved", f"Previously: {c.get('message', '')}", old
            )
        conditions.append(c)
    status: dict[str, Any] = {
        "admission": {"clusterQueue": cq_name, "podSetAssignments": assignment},
        "conditions": conditions,
    }
    if checks:
        status["admissionChecks"] = initial_states(wl, checks, conditions[0]["lastTransitionTime"])
    wl["status"] = status
    cluster.update_object(cluster.rt(WL), wl)
    if checks:
        cluster.kueue.need_checks = True
        cluster.record_event(
            wl,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq_name}",
            "kueue-admission",
        )
        return
    start_job(cluster, wl, cq_name)


def _write_queue_status(cluster: ClusterView, use: Usage) -> None:
    """ClusterQueue and LocalQueue status: pending, reserving and admitted counts, flavor
    usage."""
    pending = pending_by_cq(cluster)
    reserving: Counter[str] = Counter()
    lq_reserving: Counter[tuple[str, str]] = Counter()
    # Admitted: reserved and past every admission check (the same without checks).
    admitted: Counter[str] = Counter()
    lq_admitted: Counter[tuple[str, str]] = Counter()
    for wl in cluster.store.iter(WL):
        adm = get_path(wl, "status", "admission")
        if adm and not is_finished(wl):
            lq_key = (wl["metadata"]["namespace"], wl["spec"].get("queueName", ""))
            reserving[adm["clusterQueue"]] += 1
            lq_reserving[lq_key] += 1
            if any(
                c.get("type") == "Admitted" and c.get("status") == "True"
                for c in get_path(wl, "status", "conditions", default=[])
            ):
                admitted[adm["clusterQueue"]] += 1
                lq_admitted[lq_key] += 1
    for cq in list(cluster.store.iter(CQ)):
        name = cq["metadata"]["name"]
        quota = flavor_quotas(cq)
        flavors: dict[str, list[dict[str, str]]] = {}
        for (fl, res), (nominal, _) in quota.items():
            used = use.get(name, Counter())[(fl, res)]
            flavors.setdefault(fl, []).append(
                {
                    "name": res,
                    "total": quantity.format_resource(res, used),
                    "borrowed": quantity.format_resource(res, max(0, used - nominal)),
                }
            )
        usage = [{"name": fl, "resources": rs} for fl, rs in flavors.items()]
        status = {
            "pendingWorkloads": len(pending.get(name, [])),
            "reservingWorkloads": reserving[name],
            "admittedWorkloads": admitted[name],
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "conditions": _status_conds(cq, inactive_checks(cluster, cq)),
        }
        if cq.get("status") != status:
            cq["status"] = status
            cluster.update_object(cluster.rt(CQ), cq)
    for lq in list(cluster.store.iter(LQ)):
        key = (lq["metadata"]["namespace"], lq["metadata"]["name"])
        cq_name = get_path(lq, "spec", "clusterQueue", default="")
        n_pending = sum(
            1
            for w in pending.get(cq_name, [])
            if (w["metadata"]["namespace"], w["spec"].get("queueName")) == key
        )
        status = {
            "pendingWorkloads": n_pending,
            "reservingWorkloads": lq_reserving[key],
            "admittedWorkloads": lq_admitted[key],
            "conditions": _status_conds(lq),
        }
        if lq.get("status") != status:
            lq["status"] = status
            cluster.update_object(cluster.rt(LQ), lq)


def _status_conds(obj: Obj, inactive: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """A queue's conditions: ``Active``, unless a ClusterQueue's admission checks are
    missing or inactive (``inactive``: reason and message)."""
    old = get_path(obj, "status", "conditions", default=[])
    if inactive is not None:
        return [condition("Active", False, *inactive, old)]
    return [condition("Active", True, "Ready", "Can admit new workloads", old)]
