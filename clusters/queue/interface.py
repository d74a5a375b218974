"""What every queue backend answers: the one place where the two queueing modes differ.

gangway queues requests in one of two ways, chosen by ``QUEUE_MODE``
(:func:`clusters.queue.backends.queue_backend`): its own admission pass decides on the
database (:class:`clusters.queue.builtin.BuiltinQueue`), or Kueue decides in the cluster
and the rows follow its verdicts (:class:`clusters.queue.kueue.KueueQueue`). The rest of
the product — services, the engine, the dry-run — asks the backend, never the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusters.kube.gateway import Gateway
from clusters.models import ClusterRequest


@dataclass
class PassResult:
    """What an admission pass admitted, how many requests it left waiting and what it
    reclaimed; ``skipped`` when it did not run (another pass held the lock, or Kueue
    decides), and ``busy`` when that was because another pass held the lock (so this
    one must be asked for again)."""

    admitted: list[int] = field(default_factory=list)
    waiting: int = 0
    suspended: list[int] = field(default_factory=list)
    skipped: bool = False
    busy: bool = False


class QueueView:
    """The backend's view of the cluster during one reconcile pass (none by default)."""

    def fold_waiting(self, cluster: ClusterRequest) -> None:
        """Fold what the backend knows of a queued request (position, reason, admission)."""

    def fold_eviction(self, cluster: ClusterRequest) -> bool:
        """Put a running cluster the backend evicted back in the queue; True when it did."""
        return False

    def dispatched(self, cluster: ClusterRequest) -> bool:
        """Whether the row's object on this member is a copy another cluster's queue
        made and keeps (MultiKueue's on a worker), which gangway never writes there."""
        return False

    def original(self, cluster: ClusterRequest) -> dict[str, Any] | None:
        """The object a :meth:`dispatched` row's copy was made from (MultiKueue's
        manager's, where its last status is kept), read now; ``None`` elsewhere."""
        return None

    def also_wanted(self) -> dict[str, set[tuple[str, str]]]:
        """Objects on this member, by kind, that rows placed on other members still
        want (MultiKueue's manager keeps the originals of what it dispatched)."""
        return {}


class QueueBackend:
    """The interface; the defaults are the built-in queue's answers."""

    #: ``QUEUE_MODE``'s value for this backend, and the manifests' ``queue_mode``.
    name = "builtin"
    #: Whether a queued request's RayCluster is written at once (Kueue holds it
    #: suspended until it admits the Workload) rather than on admission.
    provisions_queued = False
    #: Whether suspending a cluster deletes its RayCluster (under Kueue a RayCluster
    #: holds its quota until it is deleted) rather than setting ``spec.suspend``.
    suspend_deletes = False
    #: Whether clusters must have a fixed size (Kueue admits one size per Workload).
    fixed_size_only = False
    #: Whether a reconcile pass may skip a row whose stamps did not move
    #: (clusters.engine.foldmemo): only when :meth:`observe`'s view reads nothing that
    #: the row and its RayCluster and pods do not show.
    folds_incrementally = True

    def request_queued(self, cluster_id: int) -> None:
        """A request was queued (created or resumed): ask for its admission after commit."""
        raise NotImplementedError

    def admission_pass(self) -> PassResult:
        """Admit what fits now and tell every waiting request where it stands."""
        raise NotImplementedError

    def observe(self, gw: Gateway, rows: list[ClusterRequest]) -> QueueView:
        """Read what the backend needs for one reconcile pass over ``rows``."""
        return QueueView()

    def writes_through(self, cluster: ClusterRequest, gw: Gateway) -> Gateway:
        """The gateway a row's own objects are written (and deleted) through: ``gw``,
        its member's, unless another cluster's queue keeps a copy there (MultiKueue's
        manager holds the original of what it dispatched to a worker)."""
        return gw

    def runs_a_copy(self, cluster: ClusterRequest) -> bool:
        """Whether the row runs from a copy another cluster's queue made of its object
        (MultiKueue's on a worker): a change written to the original reaches it only as
        far as that queue forwards it (Kueue v0.19 forwards a RayService's
        ``serveConfigV2``, nothing else)."""
        return False

    def forget_applied(self) -> None:
        """Forget what was applied to the cluster for queueing (it may be gone)."""

    def manifest_options(self, *, kai_enabled: bool) -> dict[str, Any]:
        """How a cluster's manifests are rendered under this backend."""
        return {"queue_mode": self.name, "kai_enabled": kai_enabled}
