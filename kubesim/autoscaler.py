"""The cluster autoscaler of the simulated cluster: node groups that grow and shrink, and
ProvisioningRequests (``autoscaling.x-k8s.io/v1``), as cluster-autoscaler handles them.

A pool with a ``maxCount`` grows up to it and loses an added node empty for
``scaleDownUnneededTime``. ``check-capacity`` requests are provisioned when their pods fit
now; ``best-effort-atomic-scale-up`` ones also when one node group can grow to hold them
all (at once, the nodes Ready ``scaleUpDelay`` later; never a partial scale-up); other
classes are ignored. Provisioned capacity is booked for the autoscaler for 10 minutes,
consumed by pods annotated with the request; unprovisioned requests expire after 7
days. Events as CA writes them; time from the cluster's clock (:meth:`Autoscaler.tick`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim import errors
from kubesim.errors import Cause
from kubesim.node_fit import NodeInfo, PodKey
from kubesim.nodegroups import (
    ACCEPTED,
    BOOKED_FOR,
    BOOKING_EXPIRED,
    CLASS_ATOMIC,
    CLASS_CHECK,
    COMPONENT,
    CONSUME,
    CONSUME_DEPRECATED,
    DEFAULT_BOOKING_TIME,
    DEFAULT_SCALE_DOWN_UNNEEDED_TIME,
    DEFAULT_SCALE_UP_DELAY,
    EXPIRATION_SECONDS,
    EXPIRED,
    FAILED_TO_CREATE_PODS,
    FOUND,
    HANDLED_CLASSES,
    NAME_INDEX,
    NOT_FOUND,
    NOT_FOUND_FINAL,
    PR,
    PROVISIONED,
    PT,
    SCAN_INTERVAL,
    TO_BE_DELETED,
    NodeGroup,
    Upcoming,
    cond_true,
    find_cond,
)
from kubesim.resources import ResourceType
from kubesim.scaleup import ScaleUp
from kubesim.store import Obj
from kubesim.util import get_path, parse_time

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


def _unschedulable(pod: Obj | None) -> bool:
    """Whether the scheduler marked ``pod`` unschedulable."""
    conds = get_path(pod, "status", "conditions", default=[]) if pod else []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds
    )


class Autoscaler(ScaleUp):
    """cluster-autoscaler: node-group scale-up for ProvisioningRequests, scale-down of
    empty added nodes, and the request lifecycle (see the module docstring)."""

    def __init__(
        self,
        cluster: ClusterView,
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
        m = NAME_INDEX.search(node["metadata"]["name"])
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
