"""The kubelet of the simulated cluster: bound pods become Running and Ready.

The scheduler hands each pod it binds (and each pod created already bound to a node) to
the kubelet. With ``startup_delay`` 0 the pod starts in the same settle pass: containers
started and ready, a pod IP from 10.244.0.0/16, the Ready conditions. With a delay the pod
first shows ``ContainerCreating`` and its host IP, and the ticker thread starts it once the
delay is over (:meth:`Kubelet.start_due_pods`). Containers do not run; a simulated
process (the RayJob submitter of ``operators/rayruntime.py``) ends one through
:meth:`Kubelet.terminate`, which writes the exit as the kubelet does. Nothing restarts.
Time stamps come from the cluster's clock, so that a test's ``ManualClock`` and the
synthetic logs (``podlogs.py``) agree with them.
"""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING

from kubesim.resources import ResourceType
from kubesim.scheduler import PodKey
from kubesim.store import Obj
from kubesim.util import get_path, stamp

if TYPE_CHECKING:
    from kubesim.cluster import Cluster


class Kubelet:
    """Starts the pods the scheduler bound (every node's kubelet in one)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget all bookkeeping (the store was wiped)."""
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
            pod["status"]["hostIP"] = self._host_ip(pod["spec"]["nodeName"])
            self.cluster.update_object(self.cluster.rt("pods"), pod)
            return True
        self.starting.pop(key, None)
        self.set_running(pod)
        return True

    def _host_ip(self, node: str) -> str:
        obj = self.cluster.store.get("nodes", "", node)
        for a in get_path(obj, "status", "addresses", default=[]):
            if a.get("type") == "InternalIP":
                return str(a["address"])
        return ""

    def set_running(self, pod: Obj) -> None:
        """Containers started and ready, a pod IP assigned, the pod Running and Ready."""
        when = stamp(self.cluster.clock.time())
        ip = pod["status"].get("podIP") or self.cluster.next_pod_ip()
        conds = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": when}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ]
        pod["status"].update(
            {
                "phase": "Running",
                "conditions": conds,
                "hostIP": self._host_ip(pod["spec"]["nodeName"]),
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "startTime": when,
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": c.get("image", ""),
                        "containerID": f"containerd://{pod['metadata']['uid'][:8]}{i}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": when}},
                    }
                    for i, c in enumerate(pod["spec"].get("containers") or [])
                ],
            }
        )
        self.cluster.update_object(self.cluster.rt("pods"), pod)

    def start_due_pods(self, at: float) -> bool:
        """Start pods whose start-up delay has passed (called by the ticker)."""
        due = [k for k, t in self.starting.items() if t <= at]
        for key in due:
            self.starting.pop(key, None)
            pod = self.cluster.store.get("pods", *key)
            if pod is not None and key in self.cluster.scheduler.placed:
                self.set_running(pod)
        return bool(due)

    def terminate(self, pod: Obj, exit_code: int, message: str = "") -> None:
        """Every container of a running pod exited with ``exit_code``: the pod ends
        ``Succeeded`` (0) or ``Failed``, containers ``terminated`` with reason ``Completed``
        or ``Error``, Ready conditions False with ``PodCompleted``/``PodFailed`` as the
        kubelet writes them (restartPolicy Never/OnFailure pods only: nothing restarts).
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
                "reason": "Completed" if ok else "Error",
                "startedAt": started,
                "finishedAt": when,
                "containerID": cs.get("containerID", ""),
            }
            if message:
                term["message"] = message
            cs.update({"ready": False, "started": False, "state": {"terminated": term}})
        reason = "PodCompleted" if ok else "PodFailed"
        for cond in status.get("conditions") or []:
            if cond.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers"):
                cond["status"] = "False"
                cond["lastTransitionTime"] = when
                if cond["type"] != "PodReadyToStartContainers":
                    cond["reason"] = reason
        status["phase"] = "Succeeded" if ok else "Failed"
        self.cluster.update_object(self.cluster.rt("pods"), pod, old=old)
