"""What one reconcile pass reads and writes, shared by the loop and every kind's fold:
the objects it saw (:class:`Seen`), what it did (:class:`Report`, with the bulk writes
of its end in :class:`Batch`) and what one row's fold is given (:class:`Fold`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest
from clusters.queue.interface import QueueBackend, QueueView

Key = tuple[str, str]  # (namespace, name)


@dataclass
class Batch:
    """Row writes a pass makes in bulk at its end, in a constant number of queries."""

    to_ready: list[ClusterRequest] = field(default_factory=list)
    # Deleting rows whose objects and pods are gone, by deletion reason.
    to_delete: dict[str, list[ClusterRequest]] = field(default_factory=lambda: defaultdict(list))
    # Finished rows whose pods are gone: their GPUs go back.
    to_release: list[ClusterRequest] = field(default_factory=list)
    # (state the row was read in, new state_reason) -> primary keys
    reasons: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class Report:
    """What one reconcile pass did (for logs, tests and the admission nudge)."""

    ready: list[int] = field(default_factory=list)
    recreated: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    # Waiting requests whose nodes the cluster autoscaler provisioned: admissible now.
    provisioned: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Rows left to the next pass: they changed after this pass's LISTs began, and their
    # object is not in them (see reconciler._listed_after).
    deferred: list[int] = field(default_factory=list)
    # Objects read directly because their cache had not caught up.
    read_through: int = 0
    batch: Batch = field(default_factory=Batch, repr=False)

    # The cluster reported more free GPUs or nodes than at the last observation.
    capacity_grew: bool = False
    # Rows folded, and rows skipped as unchanged since a fold that changed nothing.
    folded: int = 0
    skipped: int = 0

    @property
    def freed_capacity(self) -> bool:
        return bool(self.deleted or self.expired or self.released or self.provisioned)

    @property
    def placeable_grew(self) -> bool:
        """Whether a request waiting for capacity may fit now (rows went ready, or more free)."""
        return bool(self.ready) or self.capacity_grew


@dataclass
class Seen:
    """What one pass read from the cluster."""

    # Each kind's objects by its ``Kind.object_kind``, keyed by (namespace, name).
    objects: dict[str, dict[Key, dict[str, Any]]]
    # Managed pods by (namespace, their ``ray.io/cluster`` label).
    pods: dict[Key, list[dict[str, Any]]]
    # Managed pods by the request id they are labelled with (a job's pods: its Ray
    # cluster's, named by KubeRay, and its submitter's).
    pods_by_id: dict[int, list[dict[str, Any]]]
    namespaces: set[str]
    events: dict[str, dict[str, Any]]
    # How fresh each object kind's reads are (when their LIST began, or what their cache
    # is known to hold): what they lack may have been written since.
    listed_at: dict[str, datetime]
    capacity_grew: bool = False
    # (object kind, key) of objects a direct read found missing after their row's move.
    confirmed_missing: set[tuple[str, Key]] = field(default_factory=set)

    def object(self, object_kind: str, key: Key) -> dict[str, Any] | None:
        """The object of ``object_kind`` at ``key``, if the pass saw it."""
        return self.objects.get(object_kind, {}).get(key)


@dataclass
class Fold:
    """What a kind's fold of one row is given: the pass's reads, its gateway and queue,
    and the report its outcome goes to."""

    seen: Seen
    key: Key
    gw: Gateway
    backend: QueueBackend
    view: QueueView
    report: Report
    now: datetime
