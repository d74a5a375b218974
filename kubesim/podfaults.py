"""What can go wrong when the kubelet starts a pod: images that cannot be pulled,
containers that crash or are OOM-killed, nodes that stop being ready.

Each is a simulator-only knob (kubesim's README, "Pod failures"): the simulated registry's
missing images (``*.invalid`` hosts always, plus :meth:`PodFaults.set_missing_images`),
container faults by pod annotation ``kubesim.io/container-fault`` or by label selector
(:meth:`PodFaults.set_container_fault`), and :meth:`PodFaults.set_node_ready`. The states
and events they lead to are the kubelet's own (``ErrImagePull``/``ImagePullBackOff``,
``CrashLoopBackOff``, ``OOMKilled``), with its back-off: 10 s doubling up to 5 minutes.
"""

from __future__ import annotations

import fnmatch
import threading
from dataclasses import dataclass

from kubesim.store import Obj

FAULT_ANNOTATION = "kubesim.io/container-fault"
FAULTS = ("crash", "oom")
# The kubelet's back-off for image pulls and container restarts.
BACKOFF_START = 10.0
BACKOFF_MAX = 300.0
# How long a faulty container runs before it exits (or is killed).
RUN_BEFORE_FAULT = 1.0
CRASH_EXIT_CODE = 1
OOM_EXIT_CODE = 137


def backoff(attempts: int) -> float:
    """The kubelet's delay before attempt ``attempts + 1`` (10 s, 20 s, ... 300 s)."""
    return min(BACKOFF_MAX, BACKOFF_START * (2 ** max(0, attempts - 1)))


def image_host(image: str) -> str:
    """The registry host of an image reference ('' for Docker Hub's short names)."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return first.split(":", 1)[0]
    return ""


@dataclass(frozen=True)
class SelectorFault:
    """Containers of pods in ``namespace`` whose labels match ``selector`` fail so."""

    namespace: str
    selector: dict[str, str]
    fault: str
    container: str = ""

    def matches(self, pod: Obj, container: str) -> bool:
        meta = pod["metadata"]
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        if self.container and container != self.container:
            return False
        labels = meta.get("labels") or {}
        return all(labels.get(k) == v for k, v in self.selector.items())


def parse_selector(text: str) -> dict[str, str]:
    """An equality-based label selector (``a=b,c=d``); refuses anything else."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key or value.startswith("="):
            raise ValueError(f"only key=value selectors are supported, not {part!r}")
        out[key.strip()] = value.strip()
    return out


class PodFaults:
    """The knobs, read by the kubelet when it starts or restarts a container."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.missing: list[str] = []
        self.selector_faults: list[SelectorFault] = []
        self.not_ready: set[str] = set()

    def set_missing_images(self, patterns: list[str]) -> None:
        """Images (``fnmatch`` patterns) the simulated registry does not have."""
        with self._lock:
            self.missing = [str(p) for p in patterns]

    def set_container_fault(
        self, namespace: str, selector: str, fault: str | None, container: str = ""
    ) -> None:
        """Make matching pods' containers ``crash`` or ``oom`` from their next start;
        ``fault`` None removes the rule for that namespace and selector."""
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)}, not {fault!r}")
        labels = parse_selector(selector)
        with self._lock:
            self.selector_faults = [
                f
                for f in self.selector_faults
                if (f.namespace, f.selector, f.container) != (namespace, labels, container)
            ]
            if fault is not None:
                self.selector_faults.append(SelectorFault(namespace, labels, fault, container))

    def image_missing(self, image: str) -> bool:
        """Whether pulling ``image`` fails: a ``.invalid`` host, or a missing pattern."""
        if image_host(image).endswith(".invalid"):
            return True
        with self._lock:
            return any(fnmatch.fnmatchcase(image, p) for p in self.missing)

    def fault_of(self, pod: Obj, container: str) -> str:
        """``crash``, ``oom`` or '' for one container of ``pod``."""
        annotation = str((pod["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION, ""))
        for part in filter(None, (p.strip() for p in annotation.split(","))):
            name, sep, fault = part.rpartition("=")
            if (not sep or name == container) and fault in FAULTS:
                return fault
        with self._lock:
            for rule in self.selector_faults:
                if rule.matches(pod, container):
                    return rule.fault
        return ""

    def reset(self) -> None:
        """Forget every knob (the simulator was reset)."""
        with self._lock:
            self.missing = []
            self.selector_faults = []
            self.not_ready = set()
