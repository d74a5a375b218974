"""What a what-if replay keeps and returns: the record of each demand, the fleet's
samples and placements (the :class:`Outcome`), and the replay's mutable state — what
runs, what waits, and the free room on each node of each node pool.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from decimal import Decimal

from clusters.admission import FlavorQ, Pending, Running
from clusters.whatif.model import Demand, Workload, World
from clusters.whatif.recent import DecayedTotals


@dataclass
class Record:
    """What happened to one demand: its wait (queued seconds, summed over every time it
    queued), when it first started, its GPU-seconds held (and of those idle), the
    GPU-seconds an idle suspension gave back, how often it was suspended, and the
    GPU-seconds of work its preemptions lost (:mod:`clusters.whatif.preemption`)."""

    demand: Demand
    wait: float = 0.0
    started: float | None = None
    flavor: str = ""
    gpu_seconds: float = 0.0
    idle_gpu_seconds: float = 0.0
    reclaimed_idle_gpu_seconds: float = 0.0
    reclaimed: int = 0
    idle_suspended: int = 0
    done: bool = False
    lost_gpu_seconds: float = 0.0


@dataclass(frozen=True)
class Sample:
    """The fleet from ``at`` until the next sample: GPUs held and asked for (held plus
    waiting, on each request's first preference) per flavor, GPUs held per
    (tenant, flavor), the tenants with a request waiting per flavor, and, per flavor
    with a topology, the whole free nodes stranded in domains of its finest level that
    are partly in use (free, but no gang wanting the whole domain can have them)."""

    at: float
    held: dict[str, Decimal]
    demand: dict[str, Decimal]
    by_tenant: dict[tuple[str, str], Decimal]
    backlogged: dict[str, frozenset[str]]
    stranded: dict[str, int] = field(default_factory=dict)


@dataclass
class Placement:
    """Where one run of a demand sat: the nodes of its flavor's pool (by index, one per
    worker; a dev gang may repeat one), from ``start`` to ``end`` (``None``: still there
    when the period ended), and the topology domain it was pinned to ("": none)."""

    id: int
    flavor: str
    nodes: tuple[int, ...]
    start: float
    end: float | None = None
    domain: str = ""


@dataclass
class Outcome:
    """A run: one record per demand, the samples, the passes it took."""

    mode: str
    seconds: float
    records: dict[int, Record]
    samples: list[Sample]
    passes: int = 0
    placements: list[Placement] = field(default_factory=list)


@dataclass
class LiveRun:
    demand: Demand
    flavor: str
    gpus: Decimal
    started: float
    ends: float
    idle_from: float | None
    suspend_idle_at: float | None
    nodes: list[tuple[int, Decimal]]
    token: int
    running: Running
    placement: Placement
    # When it was last warned of a reclaim (``None``: not warned).
    warned_at: float | None = None


@dataclass
class QueuedRun:
    demand: Demand
    since: float
    # What is left of its life and its busy time (it may have run before a suspension).
    hold: float
    busy: float | None
    pending: Pending | None = None
    # Its place in line (``None``: ``since``): a run preempted with notice keeps its
    # original submission time.
    created: float | None = None


@dataclass(frozen=True)
class NodePools:
    """The node pools flavors draw on (``World.shared_nodes``; else one per flavor). A
    pool's node holds ``units`` (the least common multiple of its flavors' devices per
    node), so that a device of each flavor is a whole number of units: on an H100 pool in
    MIG 1g.10gb x 7, a whole GPU is 7 units and a slice 1. Which GPU a slice is cut from
    is not modelled (a GPU with a slice in use is not whole, in reality)."""

    of: dict[str, str]  # flavor -> pool
    units: dict[str, int]  # pool -> units per node
    nodes: dict[str, int]  # pool -> nodes

    @classmethod
    def of_world(cls, world: World) -> NodePools:
        of = {f.name: world.shared_nodes.get(f.name, f.name) for f in world.flavors}
        units: dict[str, int] = {}
        nodes: dict[str, int] = {}
        for f in world.flavors:
            pool = of[f.name]
            units[pool] = math.lcm(units.get(pool, 1), max(f.gpus_per_node, 1))
            nodes[pool] = max(nodes.get(pool, 0), f.node_count)
        return cls(of, units, nodes)

    def scale(self, flavor: FlavorQ) -> int:
        """Units one device of ``flavor`` takes of its pool's node."""
        return self.units[self.of[flavor.name]] // max(flavor.gpus_per_node, 1)


@dataclass
class ReplayState:
    world: World
    workload: Workload
    mode: str
    flavors: dict[str, FlavorQ]
    # Free room per node of each node pool (:class:`NodePools`), in the pool's units.
    free: dict[str, list[Decimal]]
    pools: NodePools
    queued: dict[int, QueuedRun] = field(default_factory=dict)
    live: dict[int, LiveRun] = field(default_factory=dict)
    warned: dict[int, float] = field(default_factory=dict)
    records: dict[int, Record] = field(default_factory=dict)
    tokens: itertools.count[int] = field(default_factory=itertools.count)
    # Events caused while handling others (a request running from the start).
    pending_events: list[tuple[float, str, int, int]] = field(default_factory=list)
    # Counts every change to what a pass reads (queued, running, warned, earmarked); and
    # the count and time after the last pass that changed nothing (see the docstring).
    version: int = 0
    quiet: tuple[int, float] | None = None
    # Whether the pass sees free nodes per domain and the gangs' wishes (see the docstring).
    aware: bool = True
    placements: list[Placement] = field(default_factory=list)
    # Usage-decayed fair share's totals (``World.half_life``; ``None``: off).
    recent: DecayedTotals | None = None
