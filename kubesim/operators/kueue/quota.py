"""ClusterQueue quota arithmetic: what is reserved, what is left, and flavor assignment.

Each pod set of a Workload gets, per resource group, the first flavor of the ClusterQueue's
group whose ResourceFlavor ``nodeLabels`` agree with the pod set's nodeSelector, whose
``nodeTaints`` it tolerates, and whose quota fits every resource of the group it asks
for: nominal quota, plus what the cohort's other queues leave unused within
``borrowingLimit`` (the cohort's whole tree: see ``common.cohort_root``, with the quota
of the tree's Cohort objects themselves). A pod's DRA
devices count under the resource Kueue's Configuration maps their DeviceClass to
(``devices.py``). On a TAS flavor the pod set must fit its topology too (``topology.py``).
Quantities are integers in each resource's base unit (see
``quantity.py``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import quantity
from kubesim.admission import pod_totals
from kubesim.operators.kueue import topology as tas
from kubesim.operators.kueue.common import COHORT, CQ, RF, WL, cohort_root, is_finished
from kubesim.operators.kueue.devices import pod_set_devices
from kubesim.operators.kueue.provisioning import checks_for
from kubesim.store import Obj
from kubesim.taints import tolerates
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

# Reserved quota per ClusterQueue name: (flavor, resource) -> amount.
Usage = dict[str, Counter[tuple[str, str]]]


def reserved(cluster: ClusterView) -> Usage:
    """Reserved quota per ClusterQueue as (flavor, resource) -> amount."""
    use: Usage = {}
    for wl in cluster.store.iter(WL):
        adm = get_path(wl, "status", "admission")
        if not adm or is_finished(wl):
            continue
        use.setdefault(adm["clusterQueue"], Counter()).update(workload_usage(wl))
    return use


def workload_usage(wl: Obj) -> Counter[tuple[str, str]]:
    """What admitted Workload ``wl`` reserves, as (flavor, resource) -> amount: each pod
    set's admitted usage, scaled down when its count in the spec is now lower (an elastic
    job that shrank in place), as Kueue counts it."""
    used: Counter[tuple[str, str]] = Counter()
    counts = {ps.get("name"): int(ps.get("count", 1)) for ps in wl["spec"].get("podSets") or []}
    for psa in get_path(wl, "status", "admission", "podSetAssignments", default=[]):
        admitted = int(psa.get("count") or counts.get(psa["name"], 1))
        now_count = min(counts.get(psa["name"], admitted), admitted)
        for res, flavor in (psa.get("flavors") or {}).items():
            amount = quantity.amount(res, (psa.get("resourceUsage") or {}).get(res, "0"))
            if now_count < admitted and admitted:
                amount = amount // admitted * now_count
            used[(flavor, res)] += amount
    return used


def flavor_quotas(cq: Obj) -> dict[tuple[str, str], tuple[int, int | None]]:
    """ClusterQueue ``cq``'s quotas: (flavor, resource) -> (nominal, borrowing limit or
    None for no limit)."""
    out: dict[tuple[str, str], tuple[int, int | None]] = {}
    for rg in get_path(cq, "spec", "resourceGroups", default=[]):
        for fl in rg.get("flavors") or []:
            for r in fl.get("resources") or []:
                bl = r.get("borrowingLimit")
                out[(fl["name"], r["name"])] = (
                    quantity.amount(r["name"], r.get("nominalQuota", 0)),
                    quantity.amount(r["name"], bl) if bl is not None else None,
                )
    return out


def kept_quotas(cq: Obj) -> dict[tuple[str, str], int]:
    """What ``cq`` keeps for itself per (flavor, resource): ``nominalQuota -
    lendingLimit`` where a lending limit is set (Kueue never lends that part)."""
    out: dict[tuple[str, str], int] = {}
    for rg in get_path(cq, "spec", "resourceGroups", default=[]):
        for fl in rg.get("flavors") or []:
            for r in fl.get("resources") or []:
                ll = r.get("lendingLimit")
                if ll is not None:
                    nominal = quantity.amount(r["name"], r.get("nominalQuota", 0))
                    out[(fl["name"], r["name"])] = max(nominal - quantity.amount(r["name"], ll), 0)
    return out


def available(
    cluster: ClusterView,
    cq: Obj,
    key: tuple[str, str],
    use: Usage,
    nominal_only: bool = False,
) -> int:
    """How much of (flavor, resource) ``key`` ClusterQueue ``cq`` can still reserve:
    within its nominal quota, or what its cohort leaves unused within its borrowing
    limit (``nominal_only``: never beyond its own nominal quota)."""
    quota = flavor_quotas(cq)
    nominal, borrow_limit = quota.get(key, (0, 0))
    own_used = use.get(cq["metadata"]["name"], Counter())[key]
    cohort = get_path(cq, "spec", "cohortName")
    if not cohort:
        return nominal - own_used
    # What the cohort has left in total (others may be borrowing our quota: without
    # preemption we cannot take it back), capped by our own borrowing limit. With
    # lending limits, each queue keeps ``nominal - lendingLimit`` for itself: the
    # cohort's pool is what the queues lend, drawn on by usage beyond what each keeps.
    total, used = 0, 0
    root = cohort_root(cluster, cohort)
    for member in cluster.store.iter(CQ):
        theirs = get_path(member, "spec", "cohortName")
        if not theirs or cohort_root(cluster, theirs) != root:
            continue
        kept = kept_quotas(member).get(key, 0)
        total += flavor_quotas(member).get(key, (0, 0))[0] - kept
        used += max(use.get(member["metadata"]["name"], Counter())[key] - kept, 0)
    # Hierarchical cohorts: a Cohort's own ``resourceGroups`` quota is lent to the queues
    # (and cohorts) under it, so it joins the tree's pool.
    for group in cluster.store.iter(COHORT):
        if cohort_root(cluster, group["metadata"]["name"]) == root:
            total += flavor_quotas(group).get(key, (0, 0))[0]
    own_kept = kept_quotas(cq).get(key, 0)
    free = max(own_kept - own_used, 0) + total - used
    if nominal_only:
        return min(free, nominal - own_used)
    if borrow_limit is not None:
        free = min(free, nominal + borrow_limit - own_used)
    return free


def _flavor_matches(cluster: ClusterView, ps: Obj, name: str) -> bool:
    """Whether pod set ``ps`` may take flavor ``name``: its ResourceFlavor's
    ``nodeLabels`` agree with the pod set's nodeSelector, and the pod set tolerates its
    ``nodeTaints`` (the flavor's own tolerations count as added)."""
    selector = get_path(ps, "template", "spec", "nodeSelector", default={})
    rf = cluster.store.get(RF, "", name)
    labels = get_path(rf, "spec", "nodeLabels", default={})
    if any(k in selector and selector[k] != v for k, v in labels.items()):
        return False
    tolerations = [
        *get_path(ps, "template", "spec", "tolerations", default=[]),
        *get_path(rf, "spec", "tolerations", default=[]),
    ]
    taints = get_path(rf, "spec", "nodeTaints", default=[])
    return all(t.get("effect") == "PreferNoSchedule" or tolerates(tolerations, t) for t in taints)


def assign(
    cluster: ClusterView,
    wl: Obj,
    cq: Obj,
    use: Usage,
    nominal_only: bool = False,
    only: dict[str, dict[str, str]] | None = None,
) -> tuple[list[dict[str, Any]] | None, str]:
    """Flavors for every pod set of ``wl`` in ``cq``, or None and the reason none fit
    (``only``: per pod set, the one flavor each resource must take). As in Kueue, every
    resource of one resource group takes the same flavor: the first whose labels, taints
    and quota fit them all. When all fit, what it assigns is added to ``use``."""
    taken: Counter[tuple[str, str]] = Counter()
    assignments = []
    cq_name = cq["metadata"]["name"]
    for index, ps in enumerate(wl["spec"].get("podSets") or []):
        req, _ = pod_totals(ps.get("template") or {})
        # DRA devices count under their mapped resource (admit_all refused the others).
        devices, _ = pod_set_devices(cluster, wl["metadata"]["namespace"], index, ps)
        req = {**req, **devices}
        count = int(ps.get("count", 1))
        chosen: dict[str, str] = {}
        placed: dict[str, Any] = {}  # the TAS flavor's topologyAssignment, if one
        for rg in get_path(cq, "spec", "resourceGroups", default=[]):
            wanted = {
                r: per_pod * count
                for r, per_pod in sorted(req.items())
                if per_pod and r in (rg.get("coveredResources") or [])
            }
            if not wanted:
                continue
            flavor, why = _group_flavor(
                cluster, cq, ps, rg, wanted, use, taken, nominal_only, only, placed
            )
            if flavor is None:
                return None, why
            for res, need in wanted.items():
                chosen[res] = flavor
                taken[(flavor, res)] += need
        missing = next((r for r, v in sorted(req.items()) if v and r not in chosen), None)
        if missing is not None:
            return None, (
                f"couldn't assign flavors to pod set {ps['name']}: resource {missing} "
                "unavailable in ClusterQueue"
            )
        assignments.append(
            {
                "name": ps["name"],
                "count": count,
                "flavors": chosen,
                "resourceUsage": {
                    r: quantity.format_resource(r, v * count)
                    for r, v in sorted(req.items())
                    if r in chosen
                },
                **placed,
            }
        )
    for key, v in taken.items():
        use.setdefault(cq_name, Counter())[key] += v
    return assignments, ""


def _group_flavor(
    cluster: ClusterView,
    cq: Obj,
    ps: Obj,
    rg: Obj,
    wanted: dict[str, int],
    use: Usage,
    taken: Counter[tuple[str, str]],
    nominal_only: bool,
    only: dict[str, dict[str, str]] | None,
    placed: dict[str, Any],
) -> tuple[str | None, str]:
    """The first flavor of resource group ``rg`` that fits every ``wanted`` resource of
    pod set ``ps`` and, on a TAS flavor, its topology (``placed`` gets the
    ``topologyAssignment``); None and why not: the last flavor's first shortage."""
    fixed = set((only or {}).get(ps["name"], {}).get(r) for r in wanted) - {None}
    why = ""
    tas_words: list[str] = []
    for fl in rg.get("flavors") or []:
        if fixed and fl["name"] not in fixed:
            continue
        if not _flavor_matches(cluster, ps, fl["name"]):
            continue
        mismatch = tas.flavor_mismatch(cluster, cq, ps, fl["name"])
        if mismatch:
            tas_words.append(mismatch)
            continue
        short = None
        for res, need in wanted.items():
            key = (fl["name"], res)
            free = available(cluster, cq, key, use, nominal_only) - taken[key]
            if free < need:
                short = (res, need - max(free, 0))
                break
        if short is None:
            # Kueue delays the topology while admission checks run (see topology.py).
            delayed = bool(checks_for(cq, [{"flavors": {"": fl["name"]}}]))
            found, misfit = tas.fit(cluster, cq, ps, fl["name"], delayed=delayed)
            if found is not None:
                placed.update(found)
                return fl["name"], ""
            tas_words.append(misfit)
            continue
        more = quantity.format_resource(short[0], short[1])
        why = (
            f"couldn't assign flavors to pod set {ps['name']}: insufficient unused quota "
            f"for {short[0]} in flavor {fl['name']}, {more} more needed"
        )
    if tas_words:
        # Kueue names every flavor's reason, in order, when topology refused some.
        tail = why.split(": ", 1)[1:] if why else []
        return None, f"couldn't assign flavors to pod set {ps['name']}: " + ", ".join(
            [*tas_words, *tail]
        )
    if not why:
        res = next(iter(wanted))
        why = (
            f"couldn't assign flavors to pod set {ps['name']}: resource {res} unavailable "
            "in ClusterQueue"
        )
    return None, why


def fits(cluster: ClusterView, wl: Obj, cq: Obj, use: Usage) -> bool:
    """``wl`` would fit ``cq``'s own nominal quota given ``use`` (left untouched)."""
    trial = {name: Counter(counter) for name, counter in use.items()}
    return assign(cluster, wl, cq, trial, nominal_only=True)[0] is not None
