"""The cluster autoscaler of the simulated cluster: node groups that grow and shrink, and
ProvisioningRequests (``autoscaling.x-k8s.io/v1``).

A fleet pool with a ``maxCount`` is a node group: the autoscaler may add nodes to it (named
like the pool's others, with the same labels, taints and allocatable) up to ``maxCount``,
and removes an added node once it has been empty for ``scaleDownUnneededTime``. The
pool's first ``count`` nodes are its minimum and are never removed.

ProvisioningRequests are handled as cluster-autoscaler handles them
(``cluster-autoscaler/provisioningrequest``):

- ``check-capacity.autoscaling.x-k8s.io``: ``Provisioned=True`` (``CapacityIsFound``) when
  every pod of the request fits on the current free capacity, else ``Provisioned=False``
  (``CapacityIsNotFound``, retried whenever capacity may have changed); with the parameter
  ``noRetry: "true"`` a miss is final: ``Failed=True``.
- ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``: ``Provisioned=True``
  (``CapacityIsFound``) when the pods fit now; else, if one node group grown to at most its
  max can hold every pod that does not fit, the nodes are requested and the request is
  ``Provisioned=True`` (``CapacityIsProvisioned``) at once — "best effort": CA admits
  without waiting for the nodes, which register (Ready) ``scaleUpDelay`` later; else
  nothing is added (atomic: no partial scale-up) and the request is
  ``Provisioned=False`` (``CapacityIsNotFound``, "CA will try to find it later"), retried.
- Any other class: left alone, as CA ignores classes it does not handle.
- Every request CA handles is ``Accepted=True``. One that is not provisioned within 7 days
  of its creation gets ``Failed=True`` (``Expired``); one whose pod template is missing
  ``Failed=True`` (``FailedToCreatePods``).
- Capacity of a provisioned request is booked for ``provisioningRequestBookingTime`` (CA's
  10 minutes) from its ``Provisioned`` transition, then ``BookingExpired=True``
  (``CapacityReservationTimeExpired``). As in CA, a booking is what the *autoscaler*
  sees: later requests are checked against the capacity left after booked pods are placed,
  and a node added for a booked request is not scaled down; kube-scheduler does not know
  bookings (neither does the real one). Pods annotated
  ``autoscaling.x-k8s.io/consume-provisioning-request: <name>`` (or the older
  ``cluster-autoscaler.kubernetes.io/consume-provisioning-request``) consume the booking:
  each such pod that exists replaces one booked pod. Deleting the request ends its booking.

Events as CA writes them (component ``cluster-autoscaler``): ``TriggeredScaleUp`` /
``NotTriggerScaleUp`` on the ProvisioningRequest (CA writes them on the request's pods,
which in CA are in-memory copies of the template), ``ScaleDown`` and ``ScaleDownEmpty`` on
a removed node, which is first tainted ``ToBeDeletedByClusterAutoscaler``.

Time comes from the cluster's clock (``ManualClock.advance`` in tests); the ticker calls
:meth:`Autoscaler.tick`. Condition time stamps are written from that clock too, so that
expiries derived from them agree with it.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim import errors
from kubesim.defaults import DEFAULT_SCHEDULER
from kubesim.errors import Cause
from kubesim.fleet import node_conditions, pool_node
from kubesim.resources import ResourceType
from kubesim.scheduler import NodeInfo, PodKey
from kubesim.store import Obj
from kubesim.util import get_path, parse_time

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

PR = "provisioningrequests.autoscaling.x-k8s.io"
PT = "podtemplates"
CLASS_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASS_CHECK = "check-capacity.autoscaling.x-k8s.io"
HANDLED_CLASSES = (CLASS_ATOMIC, CLASS_CHECK)
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CONSUME_DEPRECATED = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"
COMPONENT = "cluster-autoscaler"
# kubesim's own mark on a node added for a request: which request booked it (ns/name).
BOOKED_FOR = "kubesim.io/provisioning-request"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"

# Defaults (fleet ``autoscaler`` keys in brackets; KubeSim/CLI parameters override them).
# [scaleUpDelay] how long after a scale-up the new nodes register Ready (a cloud VM boot).
DEFAULT_SCALE_UP_DELAY = 30.0
# [scaleDownUnneededTime] CA's --scale-down-unneeded-time: an empty added node goes after it.
DEFAULT_SCALE_DOWN_UNNEEDED_TIME = 600.0
# [provisioningRequestBookingTime] CA's booking of a provisioned request (defaultReservationTime).
DEFAULT_BOOKING_TIME = 600.0
# CA fails a request not provisioned this long after its creation (defaultExpirationTime).
EXPIRATION_SECONDS = 7 * 24 * 3600.0
# CA's --scan-interval: waiting requests are looked at again this often even if nothing
# changed (capacity is re-evaluated on every node or pod change anyway).
SCAN_INTERVAL = 10.0

# Reasons and messages of cluster-autoscaler's provisioningrequest/conditions package.
ACCEPTED = ("Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
FOUND = ("CapacityIsFound", "Capacity is found in the cluster")
PROVISIONED = ("CapacityIsProvisioned", "Capacity is found in the cluster")
NOT_FOUND = ("CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
NOT_FOUND_FINAL = ("CapacityIsNotFound", "CA could not find requested capacity")
BOOKING_EXPIRED = ("CapacityReservationTimeExpired", "Capacity reservation time is expired")
EXPIRED = ("Expired", "ProvisioningRequest is expired")
FAILED_TO_CREATE_PODS = "FailedToCreatePods"

_NAME_INDEX = re.compile(r"-(\d+)$")


# A pod waiting for capacity: its key, the pod, the scheduler's signature of it.
Waiting = tuple[PodKey, Obj, str]


@dataclass
class NodeGroup:
    """A pool that may grow: its fleet entry, minimum (the pool's ``count``) and max."""

    name: str
    pool: dict[str, Any]
    min_size: int
    max_size: int


@dataclass
class Upcoming:
    """A node asked of the cloud that has not registered yet."""

    group: str
    name: str
    ready_at: float
    booked_for: str  # "ns/name" of the request it was added for ("" for none)


def _unschedulable(pod: Obj | None) -> bool:
    """Whether the scheduler marked ``pod`` unschedulable."""
    conds = get_path(pod, "status", "conditions", default=[]) if pod else []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds
    )


def cond_true(obj: Obj, ctype: str) -> bool:
    """Whether condition ``ctype`` of ``obj`` is True."""
    return any(
        c.get("type") == ctype and c.get("status") == "True"
        for c in get_path(obj, "status", "conditions", default=[])
    )


def find_cond(obj: Obj, ctype: str) -> dict[str, Any] | None:
    """Condition ``ctype`` of ``obj``, if any."""
    return next(
        (c for c in get_path(obj, "status", "conditions", default=[]) if c.get("type") == ctype),
        None,
    )


class Autoscaler:
    """cluster-autoscaler: node-group scale-up for ProvisioningRequests, scale-down of
    empty added nodes, and the request lifecycle (see the module docstring)."""

    def __init__(
        self,
        cluster: Cluster,
        scale_up_delay: float | None = None,
        scale_down_unneeded_time: float | None = None,
        booking_time: float | None = None,
    ) -> None:
        self.cluster = cluster
        knobs = cluster.fleet.get("autoscaler") or {}
        self.scale_up_delay = float(
            knobs.get("scaleUpDelay", DEFAULT_SCALE_UP_DELAY)
            if scale_up_delay is None
            else scale_up_delay
        )
        self.scale_down_unneeded_time = float(
            knobs.get("scaleDownUnneededTime", DEFAULT_SCALE_DOWN_UNNEEDED_TIME)
            if scale_down_unneeded_time is None
            else scale_down_unneeded_time
        )
        self.booking_time = float(
            knobs.get("provisioningRequestBookingTime", DEFAULT_BOOKING_TIME)
            if booking_time is None
            else booking_time
        )
        for name in ("scale_up_delay", "scale_down_unneeded_time", "booking_time"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative (seconds)")
        self.groups: dict[str, NodeGroup] = {
            str(p["name"]): NodeGroup(
                name=str(p["name"]),
                pool=p,
                min_size=int(p["count"]),
                max_size=int(p["maxCount"]),
            )
            for p in cluster.fleet["pools"]
            if "maxCount" in p
        }
        self.reset()

    def reset(self) -> None:
        """Forget in-memory state (the store was wiped or restored). Nodes asked of the
        cloud but not registered yet are lost, as a restarted CA would not know them."""
        self.upcoming: list[Upcoming] = []
        self.unneeded_since: dict[str, float] = {}
        self.dirty = True
        self.next_scan = self.cluster.clock.time() + SCAN_INTERVAL
        self.added_ip = 0
        # The scale-up event last written on each waiting pod (not repeated unchanged).
        self.noted: dict[PodKey, str] = {}
        # Pods marked unschedulable since the last pass; whether capacity (nodes, pods
        # gone, requests) changed since; and the scheduler signatures no group could help
        # at the last full pass, with the event text. With capacity unchanged, a new pod
        # of such a signature cannot be helped either: no full pass for it (a pass costs
        # O(waiting pods), so one per new pod would be quadratic).
        self.new_waiting: set[PodKey] = set()
        self.capacity_changed = True
        self.hopeless: dict[str, str] = {}

    # -- the API server side: validation of the immutable spec ------------------------

    def validate(self, rt: ResourceType, new: Obj, old: Obj | None) -> None:
        """The CRD's CEL rules kubesim cannot evaluate: ``provisioningClassName``,
        ``podSets`` and ``parameters`` are immutable (``Value is immutable``)."""
        if rt.key != PR or old is None:
            return
        # The API server names the field's type in a CEL rule's refusal.
        kinds = {"provisioningClassName": "string", "podSets": "array", "parameters": "object"}
        causes = [
            Cause(f"spec.{f}", "FieldValueInvalid", f'Invalid value: "{t}": Value is immutable')
            for f, t in kinds.items()
            if get_path(new, "spec", f) != get_path(old, "spec", f)
        ]
        if causes:
            raise errors.invalid(rt.kind, rt.group, new["metadata"]["name"], causes)

    # -- change tracking -----------------------------------------------------------------

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Requests, templates and nodes changing, and pods going away (capacity freed),
        make waiting requests worth another look."""
        if rt.key in (PR, PT, "nodes") or (rt.kind == "Pod" and new is None):
            self.dirty = True
            self.capacity_changed = True
        elif rt.kind == "Pod" and self.groups and new is not None and _unschedulable(new):
            # A pod the scheduler could not place: scale-up may help.
            self.dirty = True
            self.new_waiting.add((new["metadata"]["namespace"], new["metadata"]["name"]))

    # -- time-driven work ----------------------------------------------------------------

    def tick(self) -> bool:
        """Register nodes whose boot is over, expire bookings and old requests, remove
        empty added nodes past the unneeded time, rescan every ``SCAN_INTERVAL``. True
        when anything was written."""
        now = self.cluster.clock.time()
        busy = False
        due = [u for u in self.upcoming if u.ready_at <= now]
        if due:
            self.upcoming = [u for u in self.upcoming if u.ready_at > now]
            for u in due:
                self._register(u)
            busy = True
        busy = self._expire(now) or busy
        busy = self._scale_down(now) or busy
        if now >= self.next_scan:
            self.next_scan = now + SCAN_INTERVAL
            self.dirty = True
            self.capacity_changed = True
        return busy or self.dirty

    def _stamp(self) -> str:
        """The clock's time as a condition time stamp."""
        return datetime.datetime.fromtimestamp(self.cluster.clock.time(), datetime.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )

    def _when(self, stamp: str | None) -> float:
        return parse_time(stamp).timestamp() if stamp else self.cluster.clock.time()

    # -- reconcile -----------------------------------------------------------------------

    def reconcile(self) -> bool:
        """Decide the requests that wait for a decision, oldest first (CA's loop)."""
        if not self.dirty:
            return False
        self.dirty = False
        busy = False
        requests = sorted(
            (
                pr
                for pr in self.cluster.store.iter(PR)
                if get_path(pr, "spec", "provisioningClassName") in HANDLED_CLASSES
                and not pr["metadata"].get("deletionTimestamp")
            ),
            key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]),
        )
        for pr in requests:
            if find_cond(pr, "Accepted") is None:
                self._set(pr, "Accepted", True, *ACCEPTED)
                busy = True
            if (
                cond_true(pr, "Failed")
                or cond_true(pr, "BookingExpired")
                or cond_true(pr, "Provisioned")
            ):
                continue
            busy = self._provision(pr) or busy
        if self.groups:
            busy = self._scale_up_pods() or busy
        return busy

    def _set(self, pr: Obj, ctype: str, status: bool, reason: str, message: str) -> bool:
        """Add or update condition ``ctype`` as CA's AddOrUpdateCondition does (the
        transition time moves only when the status changes); write when changed."""
        conds = pr.setdefault("status", {}).setdefault("conditions", [])
        text = "True" if status else "False"
        prev = next((c for c in conds if c.get("type") == ctype), None)
        if prev and (prev.get("status"), prev.get("reason"), prev.get("message")) == (
            text,
            reason,
            message,
        ):
            return False
        cond = {
            "type": ctype,
            "status": text,
            "observedGeneration": int(pr["metadata"].get("generation", 1)),
            "lastTransitionTime": prev["lastTransitionTime"]
            if prev and prev.get("status") == text
            else self._stamp(),
            "reason": reason,
            "message": message,
        }
        if prev is None:
            conds.append(cond)
        else:
            conds[conds.index(prev)] = cond
        self.cluster.update_object(self.cluster.rt(PR), pr)
        return True

    # -- the pods of a request -----------------------------------------------------------

    def _pods(self, pr: Obj) -> list[Obj] | str:
        """The pods the request stands for (``count`` copies of each template), or the
        error text when a template is missing."""
        ns = pr["metadata"]["namespace"]
        pods: list[Obj] = []
        for ps in get_path(pr, "spec", "podSets", default=[]):
            name = get_path(ps, "podTemplateRef", "name", default="")
            pt = self.cluster.store.get(PT, ns, name)
            if pt is None:
                return f'podtemplates "{name}" not found'
            template = pt.get("template") or {}
            pod = {"metadata": template.get("metadata") or {}, "spec": template.get("spec") or {}}
            pods.extend([pod] * int(ps.get("count", 1)))
        return pods

    def _consumers(self, ns: str, name: str) -> int:
        """Pods of namespace ``ns`` that consume request ``name``'s booking."""
        n = 0
        for pod in self.cluster.store.iter("pods", ns):
            ann = pod["metadata"].get("annotations") or {}
            if ann.get(CONSUME) == name or ann.get(CONSUME_DEPRECATED) == name:
                n += 1
        return n

    def booked(self, pr: Obj) -> bool:
        """Whether ``pr`` holds a booking (CA's ShouldCapacityBeBooked)."""
        return (
            get_path(pr, "spec", "provisioningClassName") in HANDLED_CLASSES
            and cond_true(pr, "Provisioned")
            and not cond_true(pr, "Failed")
            and not cond_true(pr, "BookingExpired")
        )

    def _snapshot(self, skip: Obj | None) -> list[NodeInfo]:
        """The nodes as CA sees them: registered and upcoming ones, with the pods of every
        other booked request placed (the consumed ones excepted: those pods are real)."""
        infos = self.cluster.scheduler.node_snapshot()
        for u in self.upcoming:
            infos.append(self._template_info(self.groups[u.group], u.name))
        for pr in self.cluster.store.iter(PR):
            if pr is skip or not self.booked(pr):
                continue
            pods = self._pods(pr)
            if isinstance(pods, str):
                continue
            consumed = self._consumers(pr["metadata"]["namespace"], pr["metadata"]["name"])
            for pod in pods[consumed:]:
                self.cluster.scheduler.place(pod, infos)
        return infos

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

    # -- provisioning --------------------------------------------------------------------

    def _provision(self, pr: Obj) -> bool:
        """Decide one request that is neither provisioned nor failed; True if written."""
        pods = self._pods(pr)
        if isinstance(pods, str):
            return self._set(
                pr, "Failed", True, FAILED_TO_CREATE_PODS, f"Couldn't create pods, err: {pods}"
            )
        infos = self._snapshot(pr)
        left = [pod for pod in pods if self.cluster.scheduler.place(pod, infos) is None]
        if not left:
            return self._set(pr, "Provisioned", True, *FOUND)
        if get_path(pr, "spec", "provisioningClassName") == CLASS_CHECK:
            if get_path(pr, "spec", "parameters", "noRetry") == "true":
                return self._set(pr, "Failed", True, *NOT_FOUND_FINAL)
            return self._set(pr, "Provisioned", False, *NOT_FOUND)
        plan, why = self._plan(left, infos)
        if plan is None:
            written = self._set(pr, "Provisioned", False, *NOT_FOUND)
            if written:
                text = f"pod didn't trigger scale-up: {why}"
                self.cluster.record_event(pr, "Normal", "NotTriggerScaleUp", text, COMPONENT)
            return written
        group, names = plan
        before = self._size(group)
        key = f"{pr['metadata']['namespace']}/{pr['metadata']['name']}"
        ready_at = self.cluster.clock.time() + self.scale_up_delay
        for name in names:
            self.upcoming.append(Upcoming(group.name, name, ready_at, key))
        self._set(pr, "Provisioned", True, *PROVISIONED)
        self.cluster.record_event(
            pr,
            "Normal",
            "TriggeredScaleUp",
            f"pod triggered scale-up: [{{{group.name} {before}->{before + len(names)} "
            f"(max: {group.max_size})}}]",
            COMPONENT,
        )
        if self.scale_up_delay == 0:
            self.tick()
        return True

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
            why = next((r for p in kinds if (r := self.cluster.scheduler.why_not(p, template))), [])
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
        index = int(_NAME_INDEX.search(u.name).group(1))  # type: ignore[union-attr]
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

    # -- expiry --------------------------------------------------------------------------

    def _expire(self, now: float) -> bool:
        """BookingExpired after the booking time; Failed (Expired) for requests not
        provisioned within 7 days."""
        busy = False
        for pr in list(self.cluster.store.iter(PR)):
            if get_path(pr, "spec", "provisioningClassName") not in HANDLED_CLASSES:
                continue
            if cond_true(pr, "Failed") or cond_true(pr, "BookingExpired"):
                continue
            prov = find_cond(pr, "Provisioned")
            if prov is not None and prov.get("status") == "True":
                if self._when(prov.get("lastTransitionTime")) + self.booking_time <= now:
                    busy = self._set(pr, "BookingExpired", True, *BOOKING_EXPIRED) or busy
            elif self._when(pr["metadata"].get("creationTimestamp")) + EXPIRATION_SECONDS <= now:
                busy = self._set(pr, "Failed", True, *EXPIRED) or busy
        return busy

    # -- scale-down ----------------------------------------------------------------------

    def _is_added(self, node: Obj) -> NodeGroup | None:
        """The group of a node the autoscaler added (index at or past the pool's count)."""
        labels = node["metadata"].get("labels") or {}
        group = self.groups.get(labels.get("kubesim.io/pool", ""))
        if group is None:
            return None
        m = _NAME_INDEX.search(node["metadata"]["name"])
        if m is None or not node["metadata"]["name"].startswith(f"{self.fleet_name}-{group.name}-"):
            return None
        return group if int(m.group(1)) >= group.min_size else None

    def _still_booked(self, node: Obj) -> bool:
        key = (node["metadata"].get("annotations") or {}).get(BOOKED_FOR, "")
        if not key or "/" not in key:
            return False
        pr = self.cluster.store.get(PR, *key.split("/", 1))
        return pr is not None and self.booked(pr)

    def _scale_down(self, now: float) -> bool:
        """Remove added nodes that have had no pods (and no booking) for the unneeded
        time; the pool's ``count`` nodes are never removed."""
        if not self.groups:
            return False
        busy = False
        seen: set[str] = set()
        for node in list(self.cluster.store.iter("nodes")):
            if self._is_added(node) is None:
                continue
            name = node["metadata"]["name"]
            info = self.cluster.scheduler.nodes.get(name)
            if info is None or info.pods > 0 or self._still_booked(node):
                continue
            seen.add(name)
            since = self.unneeded_since.setdefault(name, now)
            if now - since >= self.scale_down_unneeded_time:
                self._remove(node)
                seen.discard(name)
                busy = True
        self.unneeded_since = {n: t for n, t in self.unneeded_since.items() if n in seen}
        return busy

    def _remove(self, node: Obj) -> None:
        """Delete an empty node as CA does: taint it, say so, then delete it."""
        name = node["metadata"]["name"]
        spec = node.setdefault("spec", {})
        spec["taints"] = [
            *(spec.get("taints") or []),
            {
                "key": TO_BE_DELETED,
                "value": str(int(self.cluster.clock.time())),
                "effect": "NoSchedule",
            },
        ]
        self.cluster.update_object(self.cluster.rt("nodes"), node)
        self.cluster.record_event(
            node, "Normal", "ScaleDown", "marked the node as toBeDeleted/unschedulable", COMPONENT
        )
        self.cluster.record_event(
            node, "Normal", "ScaleDownEmpty", f'Scale-down: removing empty node "{name}"', COMPONENT
        )
        self.cluster.delete_object(self.cluster.rt("nodes"), node)


__all__ = [
    "CLASS_ATOMIC",
    "CLASS_CHECK",
    "CONSUME",
    "CONSUME_DEPRECATED",
    "DEFAULT_BOOKING_TIME",
    "DEFAULT_SCALE_DOWN_UNNEEDED_TIME",
    "DEFAULT_SCALE_UP_DELAY",
    "Autoscaler",
]
