"""Kueue's Topology Aware Scheduling (TAS, v0.19): where a pod set's pods go in a topology.

A ResourceFlavor with ``spec.topologyName`` names a ``Topology`` (its ``levels``: node label
keys, coarse to fine). A pod set asks for a level with the pod template annotations
``kueue.x-k8s.io/podset-required-topology`` (every pod in one domain of that level),
``-preferred-topology`` (as few domains as can be) or ``-unconstrained-topology``. The
Workload carries the ask as ``podSets[].topologyRequest``; a pod set that asks may only take
a TAS flavor and one that does not only a non-TAS flavor, unless every flavor of the
ClusterQueue is TAS (then TAS is implied).

Placement counts, per node of the flavor, the pods that fit in what is left of its
allocatable (bound pods and admitted TAS Workloads' pods not yet bound use it), sums that
up the levels, and takes at the asked level the domain that fits the pod set most tightly
(Kueue's BestFit); inside it, children with the most room first, the last one again the
tightest that fits. ``preferred`` climbs a level when no domain fits, then spreads over the
top level. The answer is ``podSetAssignments[].topologyAssignment`` (v1beta2 ``slices``; only
``kubernetes.io/hostname`` when that is the lowest level). Starting the job gives the pod
templates the ``kueue.x-k8s.io/topology`` scheduling gate, the ``kueue.x-k8s.io/tas`` label
and the ``kueue.x-k8s.io/workload`` annotation; :func:`ungate_tas` then gives each gated pod
the node selector of a domain with room left and removes the gate.

A ClusterQueue that runs admission checks on the flavor (MultiKueue's dispatch on a manager,
a ProvisioningRequest) gets ``delayedTopologyRequest: Pending`` instead of an assignment, as
Kueue does; the MultiKueue worker's own Kueue places the copy. Kueue's second pass after a
ProvisioningRequest is not emulated: such a pod set is started without an assignment.

Not emulated: pod sets' slices and groups (``podset-slice-*``, ``podSetGroupName``), node
replacement, DRA devices in TAS, a lowest level other than hostname counted per resource
(its usage by other Workloads is counted in pods).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kubesim.admission import pod_is_terminal, pod_totals
from kubesim.operators.kueue.common import PODSET_LABEL, RF, WL, is_finished
from kubesim.quantity import amount
from kubesim.store import Obj
from kubesim.taints import tolerates
from kubesim.util import get_path

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

TOPOLOGY = "topologies.kueue.x-k8s.io"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
TAS_GATE = "kueue.x-k8s.io/topology"
TAS_LABEL = "kueue.x-k8s.io/tas"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
HOSTNAME = "kubernetes.io/hostname"

Leaf = tuple[str, ...]


def topology_request(template: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload pod set's ``topologyRequest`` from its template's annotations."""
    notes = get_path(template, "metadata", "annotations", default={}) or {}
    if notes.get(REQUIRED):
        return {"required": notes[REQUIRED]}
    if notes.get(PREFERRED):
        return {"preferred": notes[PREFERRED]}
    if str(notes.get(UNCONSTRAINED, "")).lower() == "true":
        return {"unconstrained": True}
    return None


def _levels(cluster: ClusterView, rf: Obj | None) -> list[str] | None:
    name = get_path(rf, "spec", "topologyName") if rf else None
    if not name:
        return None
    topo = cluster.store.get(TOPOLOGY, "", name)
    return [lv["nodeLabel"] for lv in get_path(topo, "spec", "levels", default=[])] or None


def tas_only(cluster: ClusterView, cq: Obj) -> bool:
    """Every flavor of ``cq`` is a TAS flavor (then a pod set that asks nothing uses TAS)."""
    names = [
        fl["name"]
        for rg in get_path(cq, "spec", "resourceGroups", default=[])
        for fl in rg.get("flavors") or []
    ]
    return bool(names) and all(
        get_path(cluster.store.get(RF, "", n), "spec", "topologyName") for n in names
    )


def flavor_mismatch(cluster: ClusterView, cq: Obj, ps: Obj, name: str) -> str:
    """Why pod set ``ps`` may not take flavor ``name`` for TAS reasons (Kueue's words), or
    ``""``."""
    rf = cluster.store.get(RF, "", name)
    request = ps.get("topologyRequest")
    is_tas = bool(get_path(rf, "spec", "topologyName"))
    if request:
        if not is_tas:
            return f'Flavor "{name}" does not support TopologyAwareScheduling'
        level = request.get("required") or request.get("preferred")
        if level and level not in (_levels(cluster, rf) or []):
            return f'Flavor "{name}" does not contain the requested level'
        return ""
    if is_tas and not tas_only(cluster, cq):
        return f'Flavor "{name}" supports only TopologyAwareScheduling'
    return ""


def _taint_words(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"


def _assigned_pods(cluster: ClusterView) -> dict[tuple[str, str], list[Obj]]:
    """Live pods Kueue placed by TAS, by (namespace, Workload name)."""
    out: dict[tuple[str, str], list[Obj]] = {}
    for pod in cluster.store.iter("pods"):
        meta = pod["metadata"]
        wl_name = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
        if wl_name and (meta.get("labels") or {}).get(TAS_LABEL) == "true":
            out.setdefault((meta["namespace"], wl_name), []).append(pod)
    return out


def _bound_use(cluster: ClusterView) -> dict[str, Counter[str]]:
    """What the live pods bound to each node request (``pods`` counted too)."""
    use: dict[str, Counter[str]] = {}
    for pod in cluster.store.iter("pods"):
        node = get_path(pod, "spec", "nodeName")
        if not node or pod_is_terminal(pod) or pod["metadata"].get("deletionTimestamp"):
            continue
        req, _ = pod_totals(pod)
        counter = use.setdefault(node, Counter())
        counter.update(req)
        counter["pods"] += 1
    return use


def _bound_in(pods: list[Obj], podset: str, levels: list[str]) -> Counter[Leaf]:
    """Pods of ``podset`` already bound, per assigned domain (their node selector)."""
    out: Counter[Leaf] = Counter()
    for pod in pods:
        if (pod["metadata"].get("labels") or {}).get(PODSET_LABEL) != podset:
            continue
        if get_path(pod, "spec", "nodeName") and not pod_is_terminal(pod):
            sel = get_path(pod, "spec", "nodeSelector", default={}) or {}
            out[tuple(sel.get(k, "") for k in levels)] += 1
    return out


def _node_use(cluster: ClusterView) -> tuple[dict[str, Counter[str]], Counter[Leaf]]:
    """What bound pods use of each node, plus the pods of admitted TAS Workloads not bound
    yet: on their node (hostname assignments), else in pods per leaf domain."""
    use = _bound_use(cluster)
    leaf_pods: Counter[Leaf] = Counter()
    for wl, pods, psa, ta in _topology_assignments(cluster):
        sets = {ps["name"]: ps for ps in wl["spec"].get("podSets") or []}
        levels = ta.get("levels") or []
        bound = _bound_in(pods, psa["name"], levels)
        req, _ = pod_totals((sets.get(psa["name"]) or {}).get("template") or {})
        for values, count in decode(ta):
            waiting = max(count - bound[values], 0)
            if waiting and levels == [HOSTNAME]:
                counter = use.setdefault(values[0], Counter())
                counter.update({r: v * waiting for r, v in req.items()})
                counter["pods"] += waiting
            elif waiting:
                leaf_pods[values] += waiting
    return use, leaf_pods


def _topology_assignments(cluster: ClusterView) -> Iterator[tuple[Obj, list[Obj], Obj, Obj]]:
    """Each pod set assignment with a topology assignment of every admitted Workload that
    has not finished: (the Workload, its pods, the pod set assignment, its topology)."""
    placed = _assigned_pods(cluster)
    for wl in list(cluster.store.iter(WL)):
        admission = get_path(wl, "status", "admission")
        if not admission or is_finished(wl):
            continue
        pods = placed.get((wl["metadata"]["namespace"], wl["metadata"]["name"]), [])
        for psa in admission.get("podSetAssignments") or []:
            ta = psa.get("topologyAssignment")
            if ta:
                yield wl, pods, psa, ta


def _fit(alloc: dict[str, int], used: Counter[str], req: dict[str, int]) -> tuple[int, str]:
    """How many pods of ``req`` a node still takes, and the first resource that holds
    none back (``""`` when some fit)."""
    best = alloc.get("pods", 110) - used["pods"]
    short = "pods" if best <= 0 else ""
    for r, per_pod in sorted(req.items()):
        if per_pod <= 0:
            continue
        n = (alloc.get(r, 0) - used[r]) // per_pod
        if n <= 0 and not short:
            short = r
        best = min(best, n)
    return max(best, 0), short


def _leaves(
    cluster: ClusterView, ps: Obj, rf: Obj, levels: list[str]
) -> tuple[dict[Leaf, int], int, Counter[str]]:
    """Pods of ``ps`` each leaf domain of the flavor's nodes takes, the nodes counted, and
    the nodes excluded by reason (Kueue's message words)."""
    labels_wanted = get_path(rf, "spec", "nodeLabels", default={}) or {}
    template = ps.get("template") or {}
    selector = get_path(template, "spec", "nodeSelector", default={}) or {}
    tolerations = [
        *(get_path(template, "spec", "tolerations", default=[]) or []),
        *(get_path(rf, "spec", "tolerations", default=[]) or []),
    ]
    req, _ = pod_totals(template)
    use, leaf_pods = _node_use(cluster)
    caps: Counter[Leaf] = Counter()
    total = 0
    excluded: Counter[str] = Counter()
    for node in cluster.store.iter("nodes"):
        labels = node["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in labels_wanted.items()):
            continue
        if any(k not in labels for k in levels):
            continue  # outside the topology
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        total += 1
        if get_path(node, "spec", "unschedulable"):
            excluded["unschedulable"] += 1
            continue
        taint = next(
            (
                t
                for t in get_path(node, "spec", "taints", default=[]) or []
                if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)
            ),
            None,
        )
        if taint is not None:
            excluded[f'taint "{_taint_words(taint)}"'] += 1
            continue
        alloc = {
            k: amount(k, v)
            for k, v in (get_path(node, "status", "allocatable", default={}) or {}).items()
        }
        fit, short = _fit(alloc, use.get(node["metadata"]["name"], Counter()), req)
        if fit == 0:
            excluded[f'resource "{short}"' if short != "pods" else "pods"] += 1
        caps[tuple(labels[k] for k in levels)] += fit
    for leaf, waiting in leaf_pods.items():
        if leaf in caps:
            caps[leaf] = max(caps[leaf] - waiting, 0)
    return dict(caps), total, excluded


def _sums(leaves: dict[Leaf, int], depth: int) -> dict[Leaf, int]:
    out: Counter[Leaf] = Counter()
    for leaf, n in leaves.items():
        out[leaf[:depth]] += n
    return dict(out)


def _spread(
    leaves: dict[Leaf, int], candidates: dict[Leaf, int], need: int
) -> list[tuple[Leaf, int]]:
    """Split ``need`` pods over ``candidates`` (domains of one level): most room first, the
    last the tightest that fits; then down to the leaves the same way."""
    order = sorted(((d, n) for d, n in candidates.items() if n > 0), key=lambda x: (-x[1], x[0]))
    chosen: list[tuple[Leaf, int]] = []
    for i, (domain, room) in enumerate(order):
        if need <= 0:
            break
        if need <= room:
            rest = [x for x in order[i:] if x[1] >= need]
            domain = min(rest, key=lambda x: (x[1], x[0]))[0]
            chosen.append((domain, need))
            need = 0
            break
        chosen.append((domain, room))
        need -= room
    out: list[tuple[Leaf, int]] = []
    for domain, n in chosen:
        depth = len(domain) + 1
        if depth > len(next(iter(leaves))):
            out.append((domain, n))
            continue
        children = {d: c for d, c in _sums(leaves, depth).items() if d[: len(domain)] == domain}
        out += _spread(leaves, children, n)
    return out


def place(
    cluster: ClusterView, ps: Obj, flavor: str, request: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """The ``topologyAssignment`` of pod set ``ps`` on TAS flavor ``flavor``, or None and
    Kueue's words for why it does not fit."""
    rf = cluster.store.get(RF, "", flavor)
    levels = _levels(cluster, rf) or []
    topo_name = get_path(rf, "spec", "topologyName", default="")
    count = int(ps.get("count", 1))
    if not levels:
        return None, f'topology "{topo_name}" not found'
    leaves, total, excluded = _leaves(cluster, ps, rf or {}, levels)
    level = request.get("required") or request.get("preferred") or levels[0]
    depth = levels.index(level) + 1 if level in levels else 1
    result: list[tuple[Leaf, int]] | None = None
    fit_count = 0
    while leaves and result is None:
        sums = _sums(leaves, depth)
        fitting = {d: n for d, n in sums.items() if n >= count}
        fit_count = max(sums.values(), default=0)
        if fitting:
            best = min(fitting.items(), key=lambda x: (x[1], x[0]))
            result = _spread(leaves, {best[0]: best[1]}, count)
        elif request.get("required"):
            break
        elif depth > 1:
            depth -= 1
        else:
            fit_count = sum(sums.values())
            if fit_count >= count:
                result = _spread(leaves, sums, count)
            break
    if result is None:
        verb = (
            f"allows to fit only {fit_count} out of {count} pod(s)"
            if fit_count
            else f"doesn't allow to fit any of {count} pod(s)"
        )
        why = f'topology "{topo_name}" {verb}'
        if excluded:
            why += f". Total nodes: {total}; excluded: " + ", ".join(
                f"{k}: {v}" for k, v in sorted(excluded.items())
            )
        return None, why
    if levels[-1] == HOSTNAME:
        levels, result = [HOSTNAME], [((leaf[-1],), n) for leaf, n in result]
    return encode(levels, sorted(result)), ""


def fit(
    cluster: ClusterView, cq: Obj, ps: Obj, flavor: str, *, delayed: bool
) -> tuple[dict[str, Any] | None, str]:
    """What pod set ``ps``'s assignment on ``flavor`` (which it may take) adds: nothing
    when it uses no TAS, ``delayedTopologyRequest`` while admission checks run
    (``delayed``), else its ``topologyAssignment``; None and Kueue's words when it does
    not fit the topology."""
    request = ps.get("topologyRequest") or (
        {"unconstrained": True} if tas_only(cluster, cq) else None
    )
    if request is None or not get_path(cluster.store.get(RF, "", flavor), "spec", "topologyName"):
        return {}, ""
    if delayed:
        return {"delayedTopologyRequest": "Pending"}, ""
    assignment, misfit = place(cluster, ps, flavor, request)
    return ({"topologyAssignment": assignment}, "") if assignment is not None else (None, misfit)


def _individual(values: list[str]) -> dict[str, Any]:
    if len(set(values)) == 1:
        return {"universal": values[0]}
    # The longest common prefix that leaves every root a character at least.
    size = 0
    while size < min(len(v) for v in values) - 1 and len({v[size] for v in values}) == 1:
        size += 1
    prefix = values[0][:size]
    part: dict[str, Any] = {"roots": [v[len(prefix) :] for v in values]}
    if prefix:
        part["prefix"] = prefix
    return {"individual": part}


def encode(levels: list[str], domains: list[tuple[Leaf, int]]) -> dict[str, Any]:
    """A v1beta2 ``topologyAssignment``: one slice, common prefixes and identical values
    or counts folded as Kueue may fold them."""
    counts = [n for _, n in domains]
    return {
        "levels": levels,
        "slices": [
            {
                "domainCount": len(domains),
                "valuesPerLevel": [
                    _individual([values[i] for values, _ in domains]) for i in range(len(levels))
                ],
                "podCounts": {"universal": counts[0]}
                if len(set(counts)) == 1
                else {"individual": counts},
            }
        ],
    }


def decode(ta: dict[str, Any]) -> list[tuple[Leaf, int]]:
    """(values per level, pods) of every domain of a v1beta2 ``topologyAssignment``."""
    out: list[tuple[Leaf, int]] = []
    for sl in ta.get("slices") or []:
        n = int(sl.get("domainCount", 0))
        columns = []
        for lv in sl.get("valuesPerLevel") or []:
            if "universal" in lv:
                columns.append([lv["universal"]] * n)
            else:
                part = lv.get("individual") or {}
                pre, suf = part.get("prefix", ""), part.get("suffix", "")
                columns.append([f"{pre}{r}{suf}" for r in part.get("roots") or []])
        counts = sl.get("podCounts") or {}
        per = counts.get("individual") or [counts.get("universal", 1)] * n
        for i in range(n):
            out.append((tuple(col[i] for col in columns), int(per[i])))
    return out


def gate_template(template: dict[str, Any], wl_name: str) -> None:
    """What starting a TAS pod set writes into its pod template (see the module doc)."""
    meta = template.setdefault("metadata", {})
    meta.setdefault("labels", {})[TAS_LABEL] = "true"
    meta.setdefault("annotations", {})[WORKLOAD_ANNOTATION] = wl_name
    gates = template.setdefault("spec", {}).setdefault("schedulingGates", [])
    if not any(g.get("name") == TAS_GATE for g in gates):
        gates.append({"name": TAS_GATE})


def ungate_tas(cluster: ClusterView) -> bool:
    """Kueue's topology ungater: each gated pod of an admitted TAS Workload gets the node
    selector of an assigned domain that has room left (pods already there counted), lowest
    pod names first, and loses the gate. True when a pod was written."""
    if not in_use(cluster):
        return False
    busy = False
    for _wl, pods, psa, ta in _topology_assignments(cluster):
        levels = ta.get("levels") or []
        room = Counter(dict(decode(ta)))
        gated = []
        for pod in pods:
            if (pod["metadata"].get("labels") or {}).get(PODSET_LABEL) != psa["name"]:
                continue
            if pod["metadata"].get("deletionTimestamp") or pod_is_terminal(pod):
                continue
            gates = get_path(pod, "spec", "schedulingGates", default=[]) or []
            if any(g.get("name") == TAS_GATE for g in gates):
                gated.append(pod)
            else:
                sel = get_path(pod, "spec", "nodeSelector", default={}) or {}
                room[tuple(sel.get(k, "") for k in levels)] -= 1
        for pod in sorted(gated, key=lambda p: p["metadata"]["name"]):
            domain = next((d for d in sorted(room) if room[d] > 0), None)
            if domain is None:
                break
            room[domain] -= 1
            _ungate(cluster, pod, dict(zip(levels, domain, strict=True)))
            busy = True
    return busy


def _ungate(cluster: ClusterView, pod: Obj, selector: dict[str, str]) -> None:
    """``pod`` gets its domain's node ``selector`` and loses the TAS gate."""
    spec = pod["spec"]
    spec.setdefault("nodeSelector", {}).update(selector)
    gates = [g for g in spec["schedulingGates"] if g.get("name") != TAS_GATE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates")
    cluster.update_object(cluster.rt("pods"), pod)


def in_use(cluster: ClusterView) -> bool:
    """Some ResourceFlavor is a TAS flavor (so capacity changes matter to admission)."""
    return any(get_path(rf, "spec", "topologyName") for rf in cluster.store.iter(RF))


__all__ = [
    "decode",
    "encode",
    "fit",
    "flavor_mismatch",
    "gate_template",
    "in_use",
    "place",
    "tas_only",
    "topology_request",
    "ungate_tas",
]
