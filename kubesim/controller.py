"""What an emulated controller and the cluster it runs in see of each other, as protocols:
controllers type against :class:`ClusterView` rather than importing
:class:`kubesim.cluster.Cluster`, which imports them to run them."""

from __future__ import annotations

import heapq
import threading
from typing import Any, Protocol

from kubesim.clock import Clock
from kubesim.resources import Registry, ResourceType
from kubesim.store import Obj, Store
from kubesim.validation import Validator


class Controller(Protocol):
    """What the cluster asks of each emulated controller it runs (see
    :meth:`kubesim.cluster.Cluster.register`)."""

    def reset(self) -> None:
        """Forget in-memory state (the store was wiped or restored)."""

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Note a write (``old`` None on create, ``new`` None on delete)."""

    def reconcile(self) -> bool:
        """Do pending work; True when anything was written."""


class Timed(Protocol):
    """A controller with timers, woken by the cluster's tick."""

    def wake_due(self, at: float) -> bool:
        """Mark what each timer due by ``at`` names for work; whether any was due."""


class TimerHeap:
    """A controller's timers on the cluster clock, each naming an object (namespace, name)
    to reconcile again; a timer set twice for the same time and object is kept once."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, str, str]] = []
        self._set: set[tuple[float, str, str]] = set()

    def wake_at(self, at: float, ns: str, name: str) -> None:
        """Name ``ns/name`` again at ``at``."""
        entry = (at, ns, name)
        if entry not in self._set:
            self._set.add(entry)
            heapq.heappush(self._heap, entry)

    def pop_due(self, at: float) -> list[tuple[float, str, str]]:
        """Remove and return the timers due by ``at``, earliest first."""
        due = []
        while self._heap and self._heap[0][0] <= at:
            entry = heapq.heappop(self._heap)
            self._set.discard(entry)
            due.append(entry)
        return due

    def mark_due(self, at: float, dirty: set[tuple[str, str]]) -> bool:
        """Add what each timer due by ``at`` names to ``dirty``; whether any was due."""
        due = self.pop_due(at)
        dirty.update((ns, name) for _, ns, name in due)
        return bool(due)


class ClusterView(Protocol):
    """The cluster as its controllers see it (:class:`kubesim.cluster.Cluster` is one).

    The other controllers are reached through it untyped (``Any``): typing them here
    would make this module import every controller, each of which imports this one."""

    lock: threading.RLock
    clock: Clock
    registry: Registry
    validator: Validator
    store: Store
    fleet: dict[str, Any]
    tokens: dict[str, tuple[str, Any]]
    startup_delay: float
    kai_enabled: bool
    kueue_enabled: bool
    kueue_feature_gates: str | dict[str, bool] | None
    kueue_config: dict[str, Any] | None
    svc_counter: int
    warnings: list[str]
    kubelet: Any
    scheduler: Any
    dra: Any
    kuberay: Any
    kueue: Any
    rayserve: Any
    rayservice: Any
    rayjob: Any
    jobs: Any
    rayruntime: Any
    autoscaler: Any
    localprocs: Any
    realray: Any

    def rt(self, key: str) -> ResourceType:
        """The resource type of ``key`` (``plural.group``)."""
        ...

    def next_pod_ip(self) -> str:
        """A fresh pod IP."""
        ...

    def next_service_ip(self) -> str:
        """A fresh ClusterIP."""
        ...

    def settle(self) -> None:
        """Run the controllers until none has anything left to do."""
        ...

    def create_object(
        self, rt: ResourceType, obj: Obj, admit: bool = True, dry_run: bool = False
    ) -> Obj:
        """Create with full metadata bookkeeping."""
        ...

    def update_object(self, rt: ResourceType, obj: Obj, old: Obj | None = None) -> Obj:
        """Update with metadata bookkeeping."""
        ...

    def remove_object(self, rt: ResourceType, obj: Obj) -> None:
        """Remove from the store at once."""
        ...

    def delete_object(self, rt: ResourceType, obj: Obj, propagation: str = "Background") -> Obj:
        """Delete as the API does (finalizers, propagation)."""
        ...

    def record_event(
        self,
        involved: Obj,
        etype: str,
        reason: str,
        message: str,
        component: str,
        host: str = "",
        field_path: str = "",
        dedup: str = "",
    ) -> None:
        """Write an Event about ``involved``."""
        ...

    def expire_events(self) -> int:
        """Remove every event whose TTL has run out; how many."""
        ...
