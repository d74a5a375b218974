"""What the simulator reads: the world (fleet, tenants, quotas, idle policy) and the demands.

Plain frozen dataclasses, no Django: the same types carry a synthetic week
(:mod:`clusters.whatif.workload`) and a recorded period of the real request history
(:mod:`clusters.whatif.history`). The admission policy itself is not here: the simulator
hands snapshots of :mod:`clusters.admission` to its ``decide``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from clusters.admission import PROD, FlavorQ, QuotaQ, TenantQ

# The three policies a run compares: the product's, strict FIFO on plain
# per-team quotas (no borrowing, no fungibility, no idle suspension), and the product's
# without reclaim and without idle suspension.
POLICY = "policy"
FIFO = "fifo"
NO_RECLAIM = "no_reclaim"
MODES = (POLICY, FIFO, NO_RECLAIM)


@dataclass(frozen=True)
class Demand:
    """One request as the simulator replays it.

    ``arrival`` is seconds after the start of the period; ``hold`` how long it holds its
    GPUs once running (a job's run time, a cluster's life until its owner deletes it);
    ``busy`` how long of that it is used before it sits idle (``None``: used throughout);
    ``ttl`` when a cluster expires after admission (``None``: never). ``flavors`` are the
    GPU types it accepts, most preferred first. A dev worker is ``worker_gpus`` GPUs; a
    prod worker is a whole node of the flavor it lands on.
    """

    id: int
    tenant: str
    owner: int
    kind: str
    flavors: tuple[str, ...]
    workers: int
    arrival: float
    hold: float
    busy: float | None = None
    ttl: float | None = None
    job: bool = False
    priority: int = 0
    worker_gpus: Decimal = Decimal(1)
    # For a replayed request: the wait it had in reality (seconds; ``None``: unknown or
    # never admitted), so that "no change" can be checked against the record.
    recorded_wait: float | None = None
    # Already holding GPUs when the period starts (on its first flavor): it is placed at
    # once, without a pass, and holds them for ``hold``.
    running: bool = False
    # A production gang's wish (docs/topology.md): all its workers in one domain of this
    # level of its flavor's topology, "required" or "preferred" ("": anywhere).
    topology_level: str = ""
    topology_mode: str = ""
    # Preemption (clusters/whatif/preemption.py): seconds of work between its periodic
    # checkpoints (``None``: a run that carries no work a stop loses, an interactive
    # cluster; ``math.inf``: work, never checkpointed periodically), and how long a
    # checkpoint on notice takes (``None``: it ignores a notice).
    checkpoint_every: float | None = None
    save_seconds: float | None = None

    def gpus_on(self, flavor: FlavorQ) -> Decimal:
        """The GPUs the whole gang is charged on ``flavor``."""
        return Decimal(self.workers) * self.worker_gpus_on(flavor)

    def worker_gpus_on(self, flavor: FlavorQ) -> Decimal:
        """One worker's GPUs on ``flavor`` (a prod worker takes a whole node)."""
        return Decimal(flavor.gpus_per_node) if self.kind == PROD else self.worker_gpus

    @property
    def lifetime(self) -> float:
        """How long it runs once started, its TTL included."""
        return min(self.hold, self.ttl) if self.ttl is not None else self.hold


@dataclass(frozen=True)
class IdlePolicy:
    """When an idle cluster is suspended: after ``minutes`` idle plus ``grace_minutes``
    (the warning). ``minutes`` of 0 turns it off; ``prod`` applies it to prod clusters."""

    minutes: float = 60.0
    grace_minutes: float = 15.0
    prod: bool = False


@dataclass(frozen=True)
class World:
    """The fleet and its policy: flavors (``node_count`` nodes each), tenants, quotas,
    each tenant's idle policy, the pass's aging and reclaim grace, and the cohort tree."""

    flavors: Sequence[FlavorQ]
    tenants: Sequence[TenantQ]
    quotas: Sequence[QuotaQ]
    idle: dict[str, IdlePolicy] = field(default_factory=dict)
    aging: timedelta = timedelta(hours=1)
    reclaim_grace: timedelta = timedelta(minutes=15)
    # The cohort tree (a cohort's parent by name): tenants of cohorts under one root
    # borrow each other's unused quota, as in the admission pass.
    cohort_parents: dict[str, str] = field(default_factory=dict)
    # Flavors whose devices are the same nodes, by flavor name: a node pool's name. DRA
    # flavors on one product's DRA-managed nodes (whole GPUs and their MIG slices) draw
    # on one pool; a flavor not named here has nodes of its own.
    shared_nodes: dict[str, str] = field(default_factory=dict)
    # Where each node of a node pool sits in its flavor's topology (``FlavorQ.topology``):
    # by pool, one tuple per node in node order of its label values, coarse to fine (as
    # kubesim's fleet files label them). A pool not named here has no topology.
    node_domains: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    # A placement policy to try: by flavor, the level of its topology that every
    # multi-node production gang on it requires (the planner's ``topology:h100=rack``);
    # a gang that asked for a level itself keeps its own.
    gang_topology: dict[str, str] = field(default_factory=dict)
    # Usage-decayed fair share (FAIR_SHARE_HALF_LIFE_HOURS; ``None``: off): the pass is
    # handed the decayed GPU-hours of every span held, as the real pass is.
    half_life: timedelta | None = None
    # Preemption with notice (issue 49; ``None``: today's warning, which a run does not act
    # on): a victim is told this long before it is stopped, one that checkpoints on notice
    # saves and is stopped when saved, and it queues again in its original place in line.
    notice: timedelta | None = None
    # With notice: whether the preempted run queues again in its original place in line
    # (by its submission time, as issue 49 asks) or at the back (as a new request).
    keep_place: bool = True

    def flavor(self, name: str) -> FlavorQ | None:
        """The flavor called ``name`` (``None``: not in this world)."""
        return next((f for f in self.flavors if f.name == name), None)

    def idle_of(self, tenant: str) -> IdlePolicy:
        """A tenant's idle policy (off when the world has none for it)."""
        return self.idle.get(tenant, IdlePolicy(minutes=0))


@dataclass(frozen=True)
class Workload:
    """A period to replay: its start, its length and its requests in arrival order."""

    start: datetime
    seconds: float
    demands: Sequence[Demand]
    label: str = ""

    @property
    def end(self) -> datetime:
        """When the period ends."""
        return self.start + timedelta(seconds=self.seconds)


EPOCH = datetime(2026, 11, 2, tzinfo=UTC)
