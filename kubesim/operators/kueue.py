"""Kueue emulation (placeholder until implemented)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesim.resources import ResourceType
from kubesim.store import Obj

if TYPE_CHECKING:
    from kubesim.cluster import Cluster


class Kueue:
    """Kueue admission for RayClusters."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def reset(self) -> None:
        """Forget pending work."""

    def mutate(self, rt: ResourceType, obj: Obj) -> None:
        """Kueue's webhook: suspend queued RayClusters on create."""

    def on_change(self, rt: ResourceType, old: Obj | None, new: Obj | None) -> None:
        """Note writes."""

    def reconcile(self) -> bool:
        """Admit workloads."""
        return False
