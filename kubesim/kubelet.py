"""The kubelet of the simulated cluster: bound pods become Running and Ready.

The scheduler hands it each pod it binds. With ``startup_delay`` 0 a pod starts in the
same settle pass (containers ready, a pod IP, Ready conditions); with a delay it shows
``ContainerCreating`` until the ticker starts it. Each start writes the kubelet's
events; a simulated process ends a pod through :meth:`Kubelet.terminate`. Failures are
``podfaults.py``'s knobs, restarts ``containerlife.py``'s; time stamps come from the
cluster's clock.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING

from kubesim.containerlife import ContainerLife
from kubesim.node_fit import PodKey
from kubesim.podfaults import PodFaults
from kubesim.resources import ResourceType
from kubesim.store import Obj
from kubesim.util import get_path, stamp

NOT_READY = "node.kubernetes.io/not-ready"

if TYPE_CHECKING:
    from kubesim.controller import ClusterView


class Kubelet:
    """Starts the pods the scheduler bound (every node's kubelet in one)."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.faults = PodFaults()
        self.life = ContainerLife(cluster)
        self.reset()

    def reset(self) -> None:
        """Forget all bookkeeping and knobs (the store was wiped)."""
        self.faults.reset()
        self.life.reset()
        # Pods due to start after the start-up delay: key -> time.monotonic() deadline.
        self.starting: dict[PodKey, float] = {}
        # Pods bound since the last pass, to start (or to begin the delay of).
        self.to_start: set[PodKey] = set()

    def pod_bound(self, key: PodKey) -> None:
        """The scheduler bound the pod (or it was created bound): start it next pass."""
        self.to_start.add(key)

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """A deleted pod is not started."""
        if rt.kind == "Pod" and new is None and old is not None:
            key = (old["metadata"]["namespace"], old["metadata"]["name"])
            self.starting.pop(key, None)
            self.to_start.discard(key)
            self.life.forget(key)

    def reconcile(self) -> bool:
        """Start the pods bound since the last pass."""
        busy = False
        while self.to_start:
            busy = self._start(self.to_start.pop()) or busy
        return busy

    def _start(self, key: PodKey) -> bool:
        """Start one bound pod: at once, or after ``startup_delay`` (ContainerCreating
        meanwhile). True when it wrote the pod."""
        pod = self.cluster.store.get("pods", *key)
        # Only a pod the scheduler still holds a placement for (on a node it knows).
        if pod is None or key not in self.cluster.scheduler.placed:
            return False
        if (pod.get("status") or {}).get("phase") == "Running":
            return False  # restored from a snapshot: already started
        if self.cluster.startup_delay > 0 and key not in self.starting:
            self.starting[key] = time.monotonic() + self.cluster.startup_delay
            pod["status"]["containerStatuses"] = [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in pod["spec"].get("containers") or []
            ]
            pod["status"]["hostIP"] = self.host_ip(pod["spec"]["nodeName"])
            self.cluster.update_object(self.cluster.rt("pods"), pod)
            return True
        self.starting.pop(key, None)
        self.set_running(pod)
        return True

    def host_ip(self, node: str) -> str:
        """The node's InternalIP ('' for a node kubesim does not know)."""
        obj = self.cluster.store.get("nodes", "", node)
        for a in get_path(obj, "status", "addresses", default=[]):
            if a.get("type") == "InternalIP":
                return str(a["address"])
        return ""

    def set_running(self, pod: Obj) -> None:
        """Pull, create and start the pod's containers (``containerlife.py``)."""
        self.life.start_pod(pod)

    def wake_due(self, at: float) -> bool:
        """Pull retries, crashes and restarts that are due (cluster clock ``at``)."""
        return self.life.wake_due(at)

    def set_node_ready(self, name: str, ready: bool) -> None:
        """The node's kubelet reports Ready (or stops being ready): its Ready condition,
        the ``node.kubernetes.io/not-ready`` taints the node controller adds, an event,
        and the Ready condition of its pods."""
        node = self.cluster.store.get("nodes", "", name)
        if node is None:
            raise KeyError(name)
        when = stamp(self.cluster.clock.time())
        if ready:
            self.faults.not_ready.discard(name)
        else:
            self.faults.not_ready.add(name)
        for cond in get_path(node, "status", "conditions", default=[]):
            if cond.get("type") == "Ready" and (cond.get("status") == "True") != ready:
                cond.update(
                    {
                        "status": "True" if ready else "False",
                        "reason": "KubeletReady" if ready else "KubeletNotReady",
                        "message": "kubelet is posting ready status"
                        if ready
                        else "container runtime is down",
                        "lastTransitionTime": when,
                        "lastHeartbeatTime": when,
                    }
                )
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != NOT_READY]
        if not ready:
            taints += [
                {"key": NOT_READY, "effect": "NoSchedule"},
                {"key": NOT_READY, "effect": "NoExecute", "timeAdded": when},
            ]
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        self.cluster.update_object(self.cluster.rt("nodes"), node)
        self.cluster.record_event(
            node,
            "Normal",
            "NodeReady" if ready else "NodeNotReady",
            f"Node {name} status is now: {'NodeReady' if ready else 'NodeNotReady'}",
            "node-controller",
        )
        for pod in list(self.cluster.store.iter("pods")):
            phase = (pod.get("status") or {}).get("phase")
            on_node = pod["spec"].get("nodeName") == name and phase in ("Running", "Pending")
            if on_node and pod["status"].get("containerStatuses"):
                self.life.rewrite(pod)

    def start_due_pods(self, at: float) -> bool:
        """Start pods whose start-up delay has passed (called by the ticker)."""
        due = [k for k, t in self.starting.items() if t <= at]
        for key in due:
            self.starting.pop(key, None)
            pod = self.cluster.store.get("pods", *key)
            if pod is not None and key in self.cluster.scheduler.placed:
                self.set_running(pod)
        return bool(due)

    def terminate(
        self,
        pod: Obj,
        exit_code: int,
        message: str = "",
        reason: str = "",
    ) -> None:
        """Every container of a running pod exited with ``exit_code``: the pod ends
        ``Succeeded`` (0) or ``Failed``, containers ``terminated`` with reason ``Completed``
        or ``Error`` (or ``reason``: ``OOMKilled``), Ready conditions False with
        ``PodCompleted``/``PodFailed`` as the kubelet writes them (pods that do not restart).
        The scheduler and quota then stop counting the pod."""
        when = stamp(self.cluster.clock.time())
        ok = exit_code == 0
        # The quota counts a terminal pod no more: it needs the write's old and new state.
        old = copy.deepcopy(pod)
        status = pod.setdefault("status", {})
        for cs in status.get("containerStatuses") or []:
            started = get_path(cs, "state", "running", "startedAt", default=when)
            term: dict[str, object] = {
                "exitCode": exit_code,
                "reason": reason or ("Completed" if ok else "Error"),
                "startedAt": started,
                "finishedAt": when,
                "containerID": cs.get("containerID", ""),
            }
            if message:
                term["message"] = message
            cs.update({"ready": False, "started": False, "state": {"terminated": term}})
        ended = "PodCompleted" if ok else "PodFailed"
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                cond["status"] = "False"
                cond["lastTransitionTime"] = when
                if cond["type"] != "PodReadyToStartContainers":
                    cond["reason"] = ended
        status["phase"] = "Succeeded" if ok else "Failed"
        self.cluster.update_object(self.cluster.rt("pods"), pod, old=old)
