"""The scheduler of the simulated cluster (the kubelet, which starts bound pods, is kubelet.py).

Pending pods are bound to nodes whose free allocatable, labels, required affinity and
taints fit them; one that fits nowhere stays Pending with kube-scheduler's
``FailedScheduling`` words, one with ``schedulingGates`` waits. With KAI emulation,
``gpu-fraction`` pods share GPUs; inter-pod affinity and anti-affinity over a topology
key are honoured (``podaffinity.py``). Pods with identical requirements share a signature
whose static filters are cached, and a retry stops at a signature's first misfit, so
retries cost O(signatures x nodes), not O(pods x nodes).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim import podaffinity, quantity
from kubesim.admission import pod_is_terminal, pod_totals
from kubesim.defaults import DEFAULT_SCHEDULER
from kubesim.node_fit import (
    NodeInfo,
    Placement,
    PodKey,
    PodReq,
    fraction_of,
    node_affinity_matches,
)
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.taints import taint_text, tolerates
from kubesim.util import now

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

GPU = "nvidia.com/gpu"
KAI = "kai-scheduler"
DEFAULT = DEFAULT_SCHEDULER
_NOT_HELPFUL = (
    "preemption: 0/{0} nodes are available: {0} Preemption is not helpful for scheduling."
)


class Scheduler:
    """Binds pending pods to nodes and hands them to the kubelet."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget all bookkeeping (the store was wiped)."""
        self.nodes: dict[str, NodeInfo] = {}
        self.placed: dict[PodKey, Placement] = {}
        self.pending: dict[str, dict[PodKey, PodReq]] = {}
        self.new: dict[PodKey, PodReq] = {}
        # Pods held back by scheduling gates (``spec.schedulingGates``) until they are gone.
        self.gated: set[PodKey] = set()
        self.static: dict[str, tuple[list[str], Counter[str]]] = {}
        self.retry_all = False
        # Set by :meth:`flush_unschedulable`: the next retry pass records FailedScheduling
        # for every pod still waiting, not only for the first of each group.
        self.flush = False
        self.seq = 0

    def flush_unschedulable(self) -> None:
        """Retry every waiting pod, as kube-scheduler does every 5 minutes; a misfit's event
        is written again, so it outlives the event TTL as on a real cluster."""
        if self.pending:
            self.retry_all = True
            self.flush = True

    # -- bookkeeping -------------------------------------------------------------------

    def _node_info(self, node: Obj) -> NodeInfo:
        alloc = {
            k: quantity.amount(k, v)
            for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
        }
        labels = node["metadata"].get("labels") or {}
        return NodeInfo(
            name=node["metadata"]["name"],
            labels=dict(labels),
            taints=[
                t
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("effect") in ("NoSchedule", "NoExecute")
            ],
            unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            alloc=alloc,
            gpu_memory=int(labels.get("nvidia.com/gpu.memory", "0") or 0),
        )

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Track nodes and pods as they are written."""
        if rt.kind == "Node":
            name = (new or old or {})["metadata"]["name"]
            prev = self.nodes.pop(name, None)
            if new is not None:
                info = self._node_info(new)
                if prev is not None:
                    info.used, info.pods, info.shares = prev.used, prev.pods, prev.shares
                self.nodes[name] = info
            self.static.clear()
            self.retry_all = True
        elif rt.kind == "Pod":
            ref = new if new is not None else old
            assert ref is not None
            key = (ref["metadata"]["namespace"], ref["metadata"]["name"])
            if new is None:
                self._forget(key)
                self.retry_all = True
            elif pod_is_terminal(new):
                # A Succeeded or Failed pod no longer holds its node's resources.
                if key in self.placed or key in self.new:
                    self._forget(key)
                    self.retry_all = True
            elif old is None:
                self._admit_new(key, new)
            elif key in self.gated and not (new.get("spec") or {}).get("schedulingGates"):
                # Its last scheduling gate was removed: it queues for scheduling now.
                self.gated.discard(key)
                self._admit_new(key, new)

    def _admit_new(self, key: PodKey, pod: Obj) -> None:
        self.seq += 1
        spec = pod.get("spec") or {}
        if spec.get("nodeName"):
            # Pre-bound pods skip the scheduler, as with a real API server.
            req, _ = pod_totals(pod)
            self._take(key, spec["nodeName"], req, 0.0, labels=pod["metadata"].get("labels"))
            self.cluster.kubelet.pod_bound(key)
            return
        req, _ = pod_totals(pod)
        frac, mem = 0.0, 0
        if spec.get("schedulerName") == KAI:
            frac = fraction_of(pod, 0)
            try:
                mem = int((pod["metadata"].get("annotations") or {}).get("gpu-memory") or 0)
            except ValueError:
                mem = 0
        sig = json.dumps(
            [
                sorted(req.items()),
                spec.get("nodeSelector"),
                spec.get("affinity"),
                spec.get("tolerations"),
                spec.get("schedulerName"),
                frac,
                (pod["metadata"].get("annotations") or {}).get("gpu-memory"),
                key if spec.get("resourceClaims") else None,  # claims are the pod's own
            ],
            sort_keys=True,
        )
        self.new[key] = PodReq(
            key=key,
            seq=self.seq,
            sig=sig,
            amounts=req,
            fraction=frac,
            gpu_memory=mem,
            claims=bool(spec.get("resourceClaims")),
            affinity=podaffinity.of(pod),
            labels=dict(pod["metadata"].get("labels") or {}),
        )

    def _forget(self, key: PodKey) -> None:
        self.new.pop(key, None)
        self.gated.discard(key)
        for group in self.pending.values():
            group.pop(key, None)
        placement = self.placed.pop(key, None)
        if placement is None:
            return
        info = self.nodes.get(placement.node)
        if info is None:
            return
        info.used.subtract(placement.amounts)
        info.pods -= 1
        if placement.share is not None:
            idx, frac = placement.share
            info.shares[idx] = round(info.shares[idx] - frac, 6)
            if info.shares[idx] <= 0:
                info.shares[idx] = 0.0
                info.used[GPU] -= 1

    def _take(
        self,
        key: PodKey,
        node: str,
        amounts: dict[str, int],
        frac: float,
        share: int | None = None,
        labels: dict[str, str] | None = None,
    ) -> None:
        info = self.nodes.get(node)
        placement = Placement(node=node, amounts=dict(amounts), labels=dict(labels or {}))
        if info is not None:
            info.used.update(amounts)
            info.pods += 1
            if frac:
                if share is None or share >= len(info.shares):
                    share = next(
                        (i for i, s in enumerate(info.shares) if s == 0.0), len(info.shares)
                    )
                    if share == len(info.shares):
                        info.shares.append(0.0)
                if info.shares[share] == 0.0:
                    info.used[GPU] += 1
                info.shares[share] = round(info.shares[share] + frac, 6)
                placement.share = (share, frac)
        self.placed[key] = placement

    # -- filtering -----------------------------------------------------------------------

    def _static_filter(self, pod: Obj, sig: str) -> tuple[list[str], Counter[str]]:
        cached = self.static.get(sig)
        if cached is not None:
            return cached
        spec = pod.get("spec") or {}
        tolerations = spec.get("tolerations") or []
        ok: list[str] = []
        reasons: Counter[str] = Counter()
        for info in self.nodes.values():
            if info.unschedulable:
                reasons["node(s) were unschedulable"] += 1
                continue
            bad = next((t for t in info.taints if not tolerates(tolerations, t)), None)
            if bad is not None:
                reasons[f"node(s) had untolerated taint {taint_text(bad)}"] += 1
                continue
            if not node_affinity_matches(spec, info):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            ok.append(info.name)
        self.static[sig] = (ok, reasons)
        return ok, reasons

    def _fits(self, req: PodReq, info: NodeInfo) -> tuple[list[str], int | None, float]:
        """Reasons the node cannot take the pod ([] = it fits) and the shared GPU to use."""
        why: list[str] = []
        if info.pods + 1 > info.alloc.get("pods", 110):
            why.append("Too many pods")
        for k, v in req.amounts.items():
            if v and info.alloc.get(k, 0) - info.used[k] < v:
                why.append(f"Insufficient {k}")
        share: int | None = None
        frac = req.fraction_on(info)
        if frac:
            share = next(
                (i for i, s in enumerate(info.shares) if s > 0 and s + frac <= 1.0 + 1e-9), None
            )
            if share is None and info.alloc.get(GPU, 0) - info.used[GPU] < 1:
                why.append(f"Insufficient {GPU}")
        if req.claims and not why:
            why = self.cluster.dra.why_not(req.key, info.name)
        return why, share, frac

    def _try(self, req: PodReq, pod: Obj) -> str | None:
        """Bind the pod if it fits somewhere; otherwise return the FailedScheduling text."""
        total = len(self.nodes)
        pre = self.cluster.dra.prefilter(pod) if req.claims else None
        if pre:  # PreFilter rejected the pod before any node was tried
            return f"0/{total} nodes are available: {pre}. {_NOT_HELPFUL.format(total)}"
        candidates, reasons = self._static_filter(pod, req.sig)
        reasons = Counter(reasons)
        best: tuple[tuple[float, ...], str, int | None, float] | None = None
        only_resources = 0
        domains = self._domains(req)
        for name in candidates:
            info = self.nodes[name]
            why, share, frac = self._fits(req, info)
            if not why and domains is not None:
                why = domains.why_not(info.labels)
            if why:
                only_resources += 1
                for w in why:
                    reasons[w] += 1
                continue
            score = self._score(req, info, frac)
            if domains is not None and req.affinity is not None and req.affinity.scored:
                score = (float(domains.score(info.labels)), *score)
            if best is None or score > best[0]:
                best = (score, name, share, frac)
        if best is not None:
            self._bind(req, pod, best[1], best[2], best[3])
            return None
        parts = sorted(f"{c} {r}" for r, c in reasons.items())
        msg = f"0/{total} nodes are available: {', '.join(parts)}."
        pre = []
        if only_resources:
            pre.append(f"{only_resources} No preemption victims found for incoming pod")
        if total - only_resources:
            pre.append(f"{total - only_resources} Preemption is not helpful for scheduling")
        return f"{msg} preemption: 0/{total} nodes are available: {', '.join(sorted(pre))}."

    def _domains(self, req: PodReq) -> podaffinity.Domains | None:
        """The pod's affinity terms against the pods placed now (None: it has none)."""
        if req.affinity is None:
            return None
        placed = ((key[0], p.labels, p.node) for key, p in self.placed.items())
        nodes = {name: info.labels for name, info in self.nodes.items()}
        return podaffinity.Domains(req.affinity, placed, nodes)

    def _score(self, req: PodReq, info: NodeInfo, frac: float) -> tuple[float, ...]:
        gpus = info.alloc.get(GPU, 0)
        if frac:
            # Fill partly used shared GPUs first, then the busiest node.
            return (
                float(any(0 < s < 1 for s in info.shares)),
                info.used[GPU] / gpus if gpus else 0.0,
            )
        if req.amounts.get(GPU):
            # GPU pods bin-pack (MostAllocated), keeping whole nodes free for big workers.
            return (info.used[GPU] / gpus if gpus else 0.0, -gpus)
        # Others spread (LeastAllocated) but avoid GPU nodes when they can.
        cpu = info.alloc.get("cpu", 1) or 1
        return (-float(gpus), 1 - info.used["cpu"] / cpu)

    # -- what-if placement (the cluster autoscaler's simulations, autoscaler.py) ---------

    def node_info(self, node: Obj) -> NodeInfo:
        """A node's bookkeeping as the scheduler would build it (nothing placed on it)."""
        return self._node_info(node)

    def node_snapshot(self) -> list[NodeInfo]:
        """Copies of every node's bookkeeping: what-if placements charge the copies."""
        return [
            NodeInfo(
                name=i.name,
                labels=i.labels,
                taints=i.taints,
                unschedulable=i.unschedulable,
                alloc=i.alloc,
                used=Counter(i.used),
                pods=i.pods,
                shares=list(i.shares),
                gpu_memory=i.gpu_memory,
            )
            for i in self.nodes.values()
        ]

    def why_not(self, pod: Obj, info: NodeInfo) -> list[str]:
        """Why ``pod`` (or a template) cannot go on ``info``, in kube-scheduler's words."""
        req, _ = pod_totals(pod)
        return self._why_not(pod.get("spec") or {}, PodReq(("", ""), 0, "", req), info)

    def _why_not(self, spec: dict[str, Any], req: PodReq, info: NodeInfo) -> list[str]:
        if info.unschedulable:
            return ["node(s) were unschedulable"]
        tolerations = spec.get("tolerations") or []
        bad = next((t for t in info.taints if not tolerates(tolerations, t)), None)
        if bad is not None:
            return [f"node(s) had untolerated taint {taint_text(bad)}"]
        if not node_affinity_matches(spec, info):
            return ["node(s) didn't match Pod's node affinity/selector"]
        why, _, _ = self._fits(req, info)
        return why

    def place(self, pod: Obj, infos: list[NodeInfo]) -> NodeInfo | None:
        """Charge ``pod`` to the node of ``infos`` kube-scheduler would bind it to (same
        filters and scoring as a real bind; KAI GPU fractions are not simulated); the node,
        or None when it fits on none."""
        req, _ = pod_totals(pod)
        preq = PodReq(key=("", ""), seq=0, sig="", amounts=req)
        spec = pod.get("spec") or {}
        best: tuple[tuple[float, ...], NodeInfo] | None = None
        for info in infos:
            if self._why_not(spec, preq, info):
                continue
            score = self._score(preq, info, 0.0)
            if best is None or score > best[0]:
                best = (score, info)
        if best is None:
            return None
        best[1].used.update(req)
        best[1].pods += 1
        return best[1]

    # -- binding -----------------------------------------------------------------------

    def _bind(self, req: PodReq, pod: Obj, node: str, share: int | None, frac: float) -> None:
        self._take(req.key, node, req.amounts, frac, share, labels=req.labels)
        if req.claims:
            self.cluster.dra.commit(pod, node)
        pod["spec"]["nodeName"] = node
        status = pod.setdefault("status", {})
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now(),
            }
        ]
        placement = self.placed[req.key]
        if placement.share is not None:
            ann = pod["metadata"].setdefault("annotations", {})
            ann["kubesim.io/gpu-index"] = str(placement.share[0])
            ann["kubesim.io/gpu-fraction"] = str(placement.share[1])
        component = KAI if pod["spec"].get("schedulerName") == KAI else DEFAULT
        self.cluster.update_object(self.cluster.rt("pods"), pod)
        self.cluster.record_event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {req.key[0]}/{req.key[1]} to {node}",
            component,
        )
        self.cluster.kubelet.pod_bound(req.key)

    def _gate(self, key: PodKey, pod: Obj) -> None:
        """A pod with scheduling gates waits outside the scheduling queue until they are
        all removed, with ``PodScheduled`` False ``SchedulingGated`` (no event)."""
        self.gated.add(key)
        pod.setdefault("status", {})["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "SchedulingGated",
                "message": "Scheduling is blocked due to non-empty scheduling gates",
                "lastProbeTime": None,
                "lastTransitionTime": now(),
            }
        ]
        self.cluster.update_object(self.cluster.rt("pods"), pod)

    def _unschedulable(self, pod: Obj, message: str, component: str = DEFAULT) -> None:
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": None,
            "lastTransitionTime": now(),
        }
        conds = (pod.get("status") or {}).get("conditions") or []
        if not conds or conds[0].get("message") != message:
            pod["status"]["conditions"] = [cond]
            self.cluster.update_object(self.cluster.rt("pods"), pod)
        self.cluster.record_event(pod, "Warning", "FailedScheduling", message, component)

    def _retry_pending(self, failed: dict[str, str]) -> bool:
        """Retry the waiting pods, group by group (``failed`` collects each group's reason);
        True when any was bound."""
        busy = False
        self.retry_all = False
        flush, self.flush = self.flush, False
        # Groups and their members are insertion-ordered, i.e. already in seq order:
        # no sorting of (possibly tens of thousands of) pending pods per pass.
        groups = sorted(
            ((next(iter(g.values())).seq, sig, g) for sig, g in self.pending.items() if g)
        )
        for _, sig, group in groups:
            for key, req in list(group.items()):
                pod = self.cluster.store.get("pods", *key)
                if pod is None:
                    group.pop(key, None)
                    continue
                msg = self._try(req, pod)
                if msg is None:
                    group.pop(key, None)
                    busy = True
                    continue
                failed[sig] = msg
                self._unschedulable(pod, msg)
                if flush:
                    # The rest of this group has the same requirements and fails alike;
                    # a periodic flush still retries (and reports) each of them.
                    for other in [k for k in group if k != key]:
                        waiting = self.cluster.store.get("pods", *other)
                        if waiting is not None:
                            self._unschedulable(waiting, msg)
                break  # the rest of this group has the same requirements
        self.pending = {s: g for s, g in self.pending.items() if g}
        return busy

    # -- the loop ------------------------------------------------------------------------

    def reconcile(self) -> bool:
        """Schedule new pods, retry pending ones when capacity may have freed."""
        busy = False
        failed: dict[str, str] = {}
        if self.retry_all:
            busy = self._retry_pending(failed)
        while self.new:
            key, req = next(iter(self.new.items()))
            del self.new[key]
            pod = self.cluster.store.get("pods", *key)
            if pod is None:
                continue
            if pod["spec"].get("schedulingGates"):
                self._gate(key, pod)
                busy = True
                continue
            sched = pod["spec"].get("schedulerName", DEFAULT)
            if sched == KAI and not self.cluster.kai_enabled:
                self._unschedulable(
                    pod,
                    'no scheduler named "kai-scheduler" is running (kubesim: KAI emulation is off)',
                    KAI,
                )
                busy = True
                continue
            if sched not in (DEFAULT, KAI):
                continue  # as in Kubernetes: no such scheduler, the pod just waits
            msg = failed.get(req.sig)
            if msg is None:
                msg = self._try(req, pod)
            if msg is None:
                busy = True
                continue
            failed[req.sig] = msg
            self.pending.setdefault(req.sig, {})[key] = req
            self._unschedulable(pod, msg, KAI if sched == KAI else DEFAULT)
            busy = True
        return busy
