"""Scale-up for unschedulable pods: cluster-autoscaler's main loop, which grows the node
group that helps most waiting pods, and the registration of the nodes it asked for once
their boot is over. A mixin of :class:`kubesim.autoscaler.Autoscaler`."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from kubesim.defaults import DEFAULT_SCHEDULER
from kubesim.fleet import node_conditions, pool_node
from kubesim.node_fit import NodeInfo, PodKey
from kubesim.nodegroups import (
    BOOKED_FOR,
    COMPONENT,
    CONSUME,
    CONSUME_DEPRECATED,
    NAME_INDEX,
    NodeGroup,
    Upcoming,
    Waiting,
)
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


class ScaleUp:
    """Scale-up of node groups for pods that fit nowhere (the autoscaler's state is
    declared here; :class:`~kubesim.autoscaler.Autoscaler` sets it)."""

    cluster: ClusterView
    groups: dict[str, NodeGroup]
    upcoming: list[Upcoming]
    scale_up_delay: float
    added_ip: int
    noted: dict[PodKey, str]
    new_waiting: set[PodKey]
    capacity_changed: bool
    hopeless: dict[str, str]

    def tick(self) -> bool:
        """Time-driven work (the autoscaler's)."""
        raise NotImplementedError

    def _snapshot(self, skip: Obj | None) -> list[NodeInfo]:
        """The nodes as CA sees them (the autoscaler's)."""
        raise NotImplementedError

    def _stamp(self) -> str:
        """The clock's time as a condition time stamp."""
        return datetime.datetime.fromtimestamp(self.cluster.clock.time(), datetime.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )

    def _template_info(self, group: NodeGroup, name: str) -> NodeInfo:
        """The bookkeeping of a node the group would add (CA's template node)."""
        node = pool_node(self.fleet_name, group.pool, 0, "0.0.0.0")
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        return self.cluster.scheduler.node_info(node)

    @property
    def fleet_name(self) -> str:
        """The fleet's name: the prefix of node names."""
        return str(self.cluster.fleet.get("name") or "sim")

    # -- scale-up for unschedulable pods -------------------------------------------------

    def _scale_up_pods(self) -> bool:
        """CA's main loop: pods kube-scheduler could not place (and that no registered,
        upcoming or booked capacity holds) grow the node group that helps most of them,
        fewest nodes first on a tie, within its max; not all-or-nothing. Pods that consume
        a ProvisioningRequest are left to it, as CA does. ``TriggeredScaleUp`` /
        ``NotTriggerScaleUp`` events on the pods."""
        if self._only_hopeless():
            return self._note_hopeless()
        self.capacity_changed = False
        self.new_waiting.clear()
        self.hopeless = {}
        pending = self._waiting_pods()
        keys = {item[0] for item in pending}
        self.noted = {k: v for k, v in self.noted.items() if k in keys}
        if not pending:
            return False
        infos = self._snapshot(None)
        left = self._unplaced(pending, infos)
        busy = False
        while left:
            option, reasons = self._best_option(left)
            if option is None:
                text = f"pod didn't trigger scale-up: {reasons}"
                self.hopeless = {sig: text for _, _, sig in left}
                for key, pod, _ in left:
                    if self.noted.get(key) != text:
                        self.noted[key] = text
                        self.cluster.record_event(
                            pod, "Normal", "NotTriggerScaleUp", text, COMPONENT
                        )
                        busy = True
                break
            group, names, helped = option
            before = self._size(group)
            ready_at = self.cluster.clock.time() + self.scale_up_delay
            for name in names:
                self.upcoming.append(Upcoming(group.name, name, ready_at, ""))
                infos.append(self._template_info(group, name))
            text = (
                f"pod triggered scale-up: [{{{group.name} {before}->{before + len(names)} "
                f"(max: {group.max_size})}}]"
            )
            for i in helped:
                key, pod, _ = left[i]
                self.noted[key] = text
                self.cluster.record_event(pod, "Normal", "TriggeredScaleUp", text, COMPONENT)
            left = self._unplaced(left, infos)
            busy = True
        if busy and self.scale_up_delay == 0:
            self.tick()
        return busy

    def _new_sigs(self) -> dict[PodKey, str]:
        """The scheduler signature of each pod in ``new_waiting`` still waiting."""
        out: dict[PodKey, str] = {}
        for sig, group in self.cluster.scheduler.pending.items():
            for key in self.new_waiting:
                if key in group:
                    out[key] = sig
        return out

    def _only_hopeless(self) -> bool:
        """Nothing changed but new waiting pods, all like pods no group could help."""
        if self.capacity_changed or not self.hopeless:
            return False
        return all(sig in self.hopeless for sig in self._new_sigs().values())

    def _note_hopeless(self) -> bool:
        """``NotTriggerScaleUp`` on the new waiting pods, with their like pods' text."""
        busy = False
        for key, sig in self._new_sigs().items():
            pod = self.cluster.store.get("pods", *key)
            text = self.hopeless[sig]
            if pod is not None and self.noted.get(key) != text:
                self.noted[key] = text
                self.cluster.record_event(pod, "Normal", "NotTriggerScaleUp", text, COMPONENT)
                busy = True
        self.new_waiting.clear()
        return busy

    def _waiting_pods(self) -> list[Waiting]:
        """Pods waiting in the scheduler that CA would scale up for: default-scheduler
        pods not consuming a ProvisioningRequest (those wait for their request), with the
        scheduler's signature (pods alike in every scheduling requirement share one)."""
        pending: list[Waiting] = []
        for sig, group in self.cluster.scheduler.pending.items():
            for key in group:
                pod = self.cluster.store.get("pods", *key)
                spec = (pod or {}).get("spec") or {}
                if pod is None or spec.get("nodeName"):
                    continue
                if spec.get("schedulerName", DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
                    continue
                ann = pod["metadata"].get("annotations") or {}
                if CONSUME not in ann and CONSUME_DEPRECATED not in ann:
                    pending.append((key, pod, sig))
        return pending

    def _unplaced(self, pods: list[Waiting], infos: list[NodeInfo]) -> list[Waiting]:
        """Place ``pods`` on ``infos`` (charging them); those that fit nowhere. Once a pod
        of a signature does not fit, neither do the later ones of it: O(signatures x
        nodes) rather than O(pods x nodes), as in the scheduler's retries."""
        left: list[Waiting] = []
        failed: set[str] = set()
        for item in pods:
            if item[2] in failed or self.cluster.scheduler.place(item[1], infos) is None:
                failed.add(item[2])
                left.append(item)
        return left

    def _fill(
        self, group: NodeGroup, names: list[str], pods: list[Waiting], fitting: list[int]
    ) -> tuple[int, list[int]]:
        """Put ``pods[i]`` for ``i`` in ``fitting`` on new nodes of ``group`` (at most
        ``names``), opening one when the open ones are full: how many nodes it took and
        which pods it helped."""
        added: list[NodeInfo] = []
        helped: list[int] = []
        full: set[str] = set()  # signatures that no longer fit, the group at its max
        for i in fitting:
            pod, sig = pods[i][1], pods[i][2]
            if sig in full:
                continue
            if added and self.cluster.scheduler.place(pod, added) is not None:
                helped.append(i)
                continue
            if len(added) >= len(names):
                full.add(sig)
                continue
            added.append(self._template_info(group, names[len(added)]))
            if self.cluster.scheduler.place(pod, added[-1:]) is not None:
                helped.append(i)
        return len(added), helped

    def _best_option(
        self, pods: list[Waiting]
    ) -> tuple[tuple[NodeGroup, list[str], list[int]] | None, str]:
        """The node group whose new nodes (within its max) hold the most of ``pods``
        (fewest nodes on a tie): group, new node names, indexes of the pods helped; or
        None and why no group helps, in CA's words."""
        reasons: dict[str, int] = {}
        best: tuple[NodeGroup, list[str], list[int]] | None = None
        for group in self.groups.values():
            room = group.max_size - self._size(group)
            template = self._template_info(group, "template")
            why_by_sig: dict[str, list[str]] = {}
            for _, pod, sig in pods:
                if sig not in why_by_sig:
                    why_by_sig[sig] = self.cluster.scheduler.why_not(pod, template)
            fitting = [i for i, (_, _, sig) in enumerate(pods) if not why_by_sig[sig]]
            if not fitting:
                for text in why_by_sig[pods[0][2]]:
                    reasons[text] = reasons.get(text, 0) + 1
                continue
            if room <= 0:
                reasons["max node group size reached"] = (
                    reasons.get("max node group size reached", 0) + 1
                )
                continue
            names = self._new_names(group, room)
            used, helped = self._fill(group, names, pods, fitting)
            if not helped:
                continue
            if best is None or (len(helped), -used) > (len(best[2]), -len(best[1])):
                best = (group, names[:used], helped)
        if best is not None:
            return best, ""
        return None, ", ".join(f"{c} {r}" for r, c in sorted(reasons.items()))

    def _size(self, group: NodeGroup) -> int:
        """A group's target size: registered nodes plus those on their way."""
        registered = sum(
            1
            for n in self.cluster.store.iter("nodes")
            if (n["metadata"].get("labels") or {}).get("kubesim.io/pool") == group.name
        )
        return registered + sum(1 for u in self.upcoming if u.group == group.name)

    def _new_names(self, group: NodeGroup, n: int) -> list[str]:
        """Names for ``n`` new nodes of ``group``: the pool's lowest free indexes."""
        taken = {u.name for u in self.upcoming}
        taken |= {n["metadata"]["name"] for n in self.cluster.store.iter("nodes")}
        names: list[str] = []
        i = group.min_size
        while len(names) < n:
            name = f"{self.fleet_name}-{group.name}-{i}"
            if name not in taken:
                names.append(name)
            i += 1
        return names

    def _plan(
        self, pods: list[Obj], infos: list[NodeInfo]
    ) -> tuple[tuple[NodeGroup, list[str]] | None, str]:
        """The atomic scale-up: the node group (of those whose nodes fit the pods) that
        holds every pod in ``pods`` with the fewest new nodes within its max, and the new
        nodes' names; or None and why not, worded as CA's NotTriggerScaleUp event."""
        reasons: dict[str, int] = {}
        best: tuple[NodeGroup, list[str]] | None = None
        for group in self.groups.values():
            room = group.max_size - self._size(group)
            names = self._new_names(group, max(room, 0)) if room > 0 else []
            template = self._template_info(group, "template")
            kinds = {id(p): p for p in pods}.values()  # the templates, once each
            why: list[str] = next(
                (r for p in kinds if (r := self.cluster.scheduler.why_not(p, template))), []
            )
            if why:
                for text in why:
                    reasons[text] = reasons.get(text, 0) + 1
                continue
            added: list[NodeInfo] = []
            trial = [self._copy(i) for i in infos]
            fits = True
            for pod in pods:
                if self.cluster.scheduler.place(pod, trial + added) is not None:
                    continue
                if len(added) >= len(names):
                    fits = False
                    break
                added.append(self._template_info(group, names[len(added)]))
                if self.cluster.scheduler.place(pod, added[-1:]) is None:
                    fits = False
                    break
            if not fits:
                reasons["max node group size reached"] = (
                    reasons.get("max node group size reached", 0) + 1
                )
                continue
            if best is None or len(added) < len(best[1]):
                best = (group, names[: len(added)])
        if best is not None:
            return best, ""
        if not self.groups:
            return None, "no node group can be scaled up (no pool has a maxCount)"
        return None, ", ".join(f"{c} {r}" for r, c in sorted(reasons.items()))

    @staticmethod
    def _copy(info: NodeInfo) -> NodeInfo:
        return NodeInfo(
            name=info.name,
            labels=info.labels,
            taints=info.taints,
            unschedulable=info.unschedulable,
            alloc=info.alloc,
            used=info.used.copy(),
            pods=info.pods,
            shares=list(info.shares),
            gpu_memory=info.gpu_memory,
        )

    def _register(self, u: Upcoming) -> None:
        """The cloud VM booted: its Node registers, Ready, like the pool's others."""
        group = self.groups.get(u.group)
        if group is None or self.cluster.store.get("nodes", "", u.name) is not None:
            return
        index = int(NAME_INDEX.search(u.name).group(1))  # type: ignore[union-attr]
        self.added_ip += 1
        node = pool_node(
            self.fleet_name,
            group.pool,
            index,
            f"10.1.{self.added_ip // 250}.{self.added_ip % 250 + 1}",
        )
        if u.booked_for:
            node["metadata"]["annotations"][BOOKED_FOR] = u.booked_for
        node["status"]["conditions"] = node_conditions(self._stamp())
        self.cluster.create_object(self.cluster.rt("nodes"), node, admit=False)
