"""A pod's containers as the kubelet runs them: pulled, created, started, and when a knob
of ``podfaults.py`` says so, failing to pull, crashing or OOM-killed and restarted after
the kubelet's back-off. The pod's phase and Ready conditions follow its containers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.podfaults import CRASH_EXIT_CODE, OOM_EXIT_CODE, RUN_BEFORE_FAULT, backoff
from kubesim.store import Obj
from kubesim.util import stamp

if TYPE_CHECKING:
    from kubesim.controller import ClusterView

PodKey = tuple[str, str]
# The kubelet writes ErrImagePull, then ImagePullBackOff on its next sync.
PULL_SYNC = 1.0


@dataclass
class Timer:
    """What happens to one container next, and when (the cluster clock)."""

    at: float
    step: str  # "backoff" (ErrImagePull -> ImagePullBackOff), "pull", "exit", "restart"


def _field(name: str) -> str:
    return f"spec.containers{{{name}}}"


class ContainerLife:
    """Starts, fails and restarts containers for the kubelet (every node's in one)."""

    def __init__(self, cluster: ClusterView) -> None:
        self.cluster = cluster
        self.reset()

    def reset(self) -> None:
        """Forget timers and node image caches (the store was wiped)."""
        self.timers: dict[PodKey, dict[str, Timer]] = {}
        self.images: dict[str, set[str]] = {}
        self.pulls: dict[tuple[PodKey, str], int] = {}  # failed pulls per container

    def forget(self, key: PodKey) -> None:
        """The pod is gone: nothing more happens to it."""
        self.timers.pop(key, None)
        for k in [k for k in self.pulls if k[0] == key]:
            self.pulls.pop(k, None)

    # -- starting -----------------------------------------------------------------------

    def start_pod(self, pod: Obj) -> None:
        """Start every container of a bound pod (writes the pod)."""
        now = self.cluster.clock.time()
        ip = pod["status"].get("podIP") or self.cluster.next_pod_ip()
        pod["status"].update(
            {"podIP": ip, "podIPs": [{"ip": ip}], "startTime": stamp(now)},
        )
        statuses = []
        for i, c in enumerate(pod["spec"].get("containers") or []):
            statuses.append(self._first_start(pod, c, i, now))
        pod["status"]["containerStatuses"] = statuses
        self._write(pod, now)

    def _first_start(self, pod: Obj, c: dict[str, Any], index: int, now: float) -> dict[str, Any]:
        name, image = c["name"], c.get("image", "")
        status: dict[str, Any] = {
            "name": name,
            "image": image,
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "containerID": "",
        }
        if not self._pull(pod, c):
            status["state"] = {"waiting": {"reason": "ErrImagePull", "message": _pull_error(image)}}
            self._arm(pod, name, Timer(now + PULL_SYNC, "backoff"))
            return status
        status["imageID"] = image
        status["containerID"] = f"containerd://{pod['metadata']['uid'][:8]}{index}"
        self._run(pod, c, status, now)
        return status

    def _pull(self, pod: Obj, c: dict[str, Any]) -> bool:
        """Pull ``c``'s image onto the pod's node as the kubelet does (events included);
        False when the simulated registry lacks it."""
        image, node = c.get("image", ""), pod["spec"].get("nodeName", "")
        faults = self.cluster.kubelet.faults
        cached = self.images.setdefault(node, set())
        policy = c.get("imagePullPolicy") or ("Always" if image.endswith(":latest") else "")
        if image in cached and policy != "Always":
            self._event(
                pod, c, "Normal", "Pulled", f'Container image "{image}" already present on machine'
            )
            return True
        self._event(pod, c, "Normal", "Pulling", f'Pulling image "{image}"')
        if faults.image_missing(image):
            self._event(
                pod, c, "Warning", "Failed", f'Failed to pull image "{image}": {_pull_error(image)}'
            )
            self._event(pod, c, "Warning", "Failed", "Error: ErrImagePull", dedup="FailedErr")
            return False
        cached.add(image)
        self._event(pod, c, "Normal", "Pulled", f'Successfully pulled image "{image}"')
        return True

    def _run(self, pod: Obj, c: dict[str, Any], status: dict[str, Any], now: float) -> None:
        """Create and start one container; arm its exit when a fault says it fails."""
        self._event(pod, c, "Normal", "Created", f"Created container: {c['name']}")
        self._event(pod, c, "Normal", "Started", f"Started container {c['name']}")
        # A container that is going to fail never passes its readiness check first.
        faulty = bool(self.cluster.kubelet.faults.fault_of(pod, c["name"]))
        status.update(
            {"ready": not faulty, "started": True, "state": {"running": {"startedAt": stamp(now)}}}
        )
        if faulty:
            self._arm(pod, c["name"], Timer(now + RUN_BEFORE_FAULT, "exit"))

    # -- timers -------------------------------------------------------------------------

    def _arm(self, pod: Obj, container: str, timer: Timer) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.timers.setdefault(key, {})[container] = timer

    def wake_due(self, at: float) -> bool:
        """Run the timers that are due (the ticker calls it); True when a pod changed."""
        changed = False
        for key in list(self.timers):
            due = {n: t for n, t in self.timers[key].items() if t.at <= at}
            if not due:
                continue
            pod = self.cluster.store.get("pods", *key)
            if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                self.timers.pop(key, None)
                continue
            for name, timer in due.items():
                self.timers[key].pop(name, None)
                self._step(pod, name, timer.step, at)
            if not self.timers.get(key):
                self.timers.pop(key, None)
            if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self._write(pod, at)
            changed = True
        return changed

    def _step(self, pod: Obj, name: str, step: str, now: float) -> None:
        containers = {c["name"]: c for c in pod["spec"].get("containers") or []}
        statuses = {s["name"]: s for s in pod["status"].get("containerStatuses") or []}
        c, status = containers.get(name), statuses.get(name)
        if c is None or status is None:
            return
        image = c.get("image", "")
        if step == "backoff":
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            pulls = self.pulls[(key, name)] = self.pulls.get((key, name), 0) + 1
            message = f'Back-off pulling image "{image}"'
            status["state"] = {"waiting": {"reason": "ImagePullBackOff", "message": message}}
            self._event(pod, c, "Normal", "BackOff", message)
            self._event(pod, c, "Warning", "Failed", "Error: ImagePullBackOff", dedup="FailedErr")
            self._arm(pod, name, Timer(now + backoff(pulls), "pull"))
        elif step == "pull":
            if self._pull(pod, c):
                status["imageID"] = image
                status["containerID"] = f"containerd://{pod['metadata']['uid'][:8]}{name}"
                self._run(pod, c, status, now)
            else:
                status["state"] = {
                    "waiting": {"reason": "ErrImagePull", "message": _pull_error(image)}
                }
                self._arm(pod, name, Timer(now + PULL_SYNC, "backoff"))
        elif step == "exit":
            self._exit(pod, c, status, now)
        elif step == "restart":
            status["restartCount"] = int(status.get("restartCount", 0)) + 1
            self._run(pod, c, status, now)

    def _exit(self, pod: Obj, c: dict[str, Any], status: dict[str, Any], now: float) -> None:
        """A faulty container exits (crash) or is killed (OOM); it restarts after the
        back-off unless the pod's restartPolicy says never."""
        oom = self.cluster.kubelet.faults.fault_of(pod, c["name"]) == "oom"
        code = OOM_EXIT_CODE if oom else CRASH_EXIT_CODE
        reason = "OOMKilled" if oom else "Error"
        policy = pod["spec"].get("restartPolicy") or "Always"
        if policy == "Never":
            # A pod that never restarts ends with its container (kubesim's pods with
            # restartPolicy Never run one container that matters: the submitter).
            self.cluster.kubelet.terminate(pod, code, reason=reason)
            return
        started = (status.get("state") or {}).get("running", {}).get("startedAt", stamp(now))
        status["lastState"] = {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "startedAt": started,
                "finishedAt": stamp(now),
                "containerID": status.get("containerID", ""),
            }
        }
        delay = backoff(int(status.get("restartCount", 0)) + 1)
        pod_ref = (
            f"{pod['metadata']['name']}_{pod['metadata']['namespace']}({pod['metadata']['uid']})"
        )
        status.update(
            {
                "ready": False,
                "started": False,
                "state": {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {int(delay)}s restarting failed "
                        f"container={c['name']} pod={pod_ref}",
                    }
                },
            }
        )
        self._event(
            pod,
            c,
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {c['name']} in pod {pod_ref}",
        )
        self._arm(pod, c["name"], Timer(now + delay, "restart"))

    def rewrite(self, pod: Obj) -> None:
        """Write the pod's conditions again (its node's readiness changed)."""
        self._write(pod, self.cluster.clock.time())

    # -- the pod ------------------------------------------------------------------------

    def _write(self, pod: Obj, now: float) -> None:
        """Phase and conditions from the containers, then write the pod."""
        status = pod["status"]
        statuses = status.get("containerStatuses") or []
        unready = [s["name"] for s in statuses if not s.get("ready")]
        ever_started = any(s.get("started") or s.get("lastState") for s in statuses)
        when = stamp(now)
        old = {c["type"]: c for c in status.get("conditions") or []}

        def cond(kind: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
            value = "True" if ok else "False"
            prior = old.get(kind)
            at = prior["lastTransitionTime"] if prior and prior.get("status") == value else when
            out: dict[str, Any] = {
                "type": kind,
                "status": value,
                "lastProbeTime": None,
                "lastTransitionTime": at,
            }
            if reason:
                out["reason"] = reason
            if message:
                out["message"] = message
            return out

        waiting = f"containers with unready status: [{' '.join(unready)}]"
        ready = (
            not unready
            and pod["spec"].get("nodeName", "") not in self.cluster.kubelet.faults.not_ready
        )
        status["conditions"] = [
            cond("PodReadyToStartContainers", True),
            cond("Initialized", True),
            cond(
                "Ready",
                ready,
                *(
                    ()
                    if ready
                    else ("ContainersNotReady", waiting)
                    if unready
                    else ("NodeNotReady", "")
                ),
            ),
            cond(
                "ContainersReady",
                not unready,
                *(() if not unready else ("ContainersNotReady", waiting)),
            ),
            cond("PodScheduled", True),
        ]
        status["phase"] = "Running" if ever_started else "Pending"
        status["hostIP"] = self.cluster.kubelet.host_ip(pod["spec"]["nodeName"])
        self.cluster.update_object(self.cluster.rt("pods"), pod)

    def _event(
        self, pod: Obj, c: dict[str, Any], etype: str, reason: str, message: str, dedup: str = ""
    ) -> None:
        self.cluster.record_event(
            pod,
            etype,
            reason,
            message,
            "kubelet",
            host=pod["spec"].get("nodeName", ""),
            field_path=_field(c["name"]),
            dedup=dedup,
        )


def _pull_error(image: str) -> str:
    ref = image if "/" in image else f"docker.io/library/{image}"
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
        f'failed to resolve reference "{ref}": {ref}: not found'
    )
