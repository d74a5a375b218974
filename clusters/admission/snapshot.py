"""What the admission pass reads and what it decides: plain frozen dataclasses.

Nothing here imports Django, so the same decision runs in the admission task, in the
dry-run, in tests and inside a time-accelerated simulation. The integrator builds a
:class:`Snapshot` from one query per table (tenants, flavors, quotas, clusters holding
quota, queued clusters) and writes a :class:`Decision` back.

GPU amounts are :class:`~decimal.Decimal` because fractional dev GPUs (KAI) are charged
as fractions; quotas are whole GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from functools import cached_property

from clusters.admission.decayed_usage import RecentUsage

PROD = "prod"
DEV = "dev"

# Why a request waits (the public ``queue.reason`` codes).
TENANT_QUOTA = "tenant_quota"
COHORT_QUOTA = "cohort_quota"
CAPACITY = "capacity"
USER_CAP = "user_cap"
HEAD_OF_LINE = "head_of_line"
RECLAIM_PENDING = "reclaim_pending"
# Quota is there, and the cluster autoscaler is adding the nodes the gang needs.
WAITING_FOR_NODES = "waiting_for_nodes"
REASONS = (
    TENANT_QUOTA,
    COHORT_QUOTA,
    CAPACITY,
    USER_CAP,
    HEAD_OF_LINE,
    RECLAIM_PENDING,
    WAITING_FOR_NODES,
)

# Why a request can never fit (dry-run ``reasons[].code``).
NODE_SIZE = "node_size"
TENANT_TOTAL = "tenant_total"
FLAVOR_UNKNOWN = "flavor_unknown"
NEVER_FITS_CODES = (NODE_SIZE, TENANT_TOTAL, USER_CAP, FLAVOR_UNKNOWN)

ZERO = Decimal(0)
# A negative id of the pass is a running request's extra GPUs, queued and admitted as a
# request is: ``-pk`` its surge (say, a service's upgrade), ``-(GROWTH_IDS + pk)`` its
# growth beyond the guaranteed size it is charged at (borrowable, reclaimed by a shrink).
GROWTH_IDS = 10**12


def extra_of(pass_id: int) -> tuple[str, int]:
    """What a negative id of the pass stands for: ("surge" or "growth", the request's id)."""
    if pass_id <= -GROWTH_IDS:
        return "growth", -pass_id - GROWTH_IDS
    return "surge", -pass_id


@dataclass(frozen=True)
class TenantQ:
    """A tenant's admission policy. ``cpu_quota``/``memory_quota_gib`` of 0 mean no limit;
    a per-user cap of ``None`` means no cap (0 means no dev clusters at all)."""

    slug: str
    cohort: str = "default"
    weight: Decimal = Decimal(1)
    cpu_quota: int = 0
    memory_quota_gib: int = 0
    max_dev_clusters_per_user: int | None = None
    max_dev_gpus_per_user: int | None = None


@dataclass(frozen=True)
class FlavorQ:
    """A GPU flavor of the fleet.

    ``free_gpus`` and ``free_nodes`` (nodes with every GPU free) enable capacity
    awareness; ``None`` means unknown, and capacity is then not checked. They must
    already exclude what admitted-but-not-yet-bound clusters will take, since the pass
    only subtracts what it admits itself. When only ``free_gpus`` is known, whole free
    nodes are estimated as ``free_gpus // gpus_per_node`` (optimistic: free GPUs may be
    scattered over several nodes).
    """

    name: str
    gpus_per_node: int
    node_count: int
    free_gpus: Decimal | None = None
    free_nodes: int | None = None
    # The flavor's topology: node label keys, coarse to fine (docs/topology.md), and, for
    # each whole free node, its label's value at each of those levels ("" if unlabelled),
    # in that order. ``None``: where the free nodes are is not known (topology unchecked).
    topology: tuple[str, ...] = ()
    free_node_domains: tuple[tuple[str, ...], ...] | None = None
    # (level, the most nodes one domain of it has, free or not), for the levels whose
    # size was seen: a gang requiring more than that in one domain never fits.
    largest_domains: tuple[tuple[str, int], ...] = ()

    @property
    def total_gpus(self) -> int:
        """GPUs of this flavor in the whole fleet."""
        return self.gpus_per_node * self.node_count


@dataclass(frozen=True)
class QuotaQ:
    """A tenant's nominal GPUs on one flavor, how many more it may borrow, and how many
    of its unused nominal GPUs it lends to the cohort (``None``: all of them)."""

    tenant: str
    flavor: str
    gpus: int
    borrow_limit: int = 0
    lend_limit: int | None = None

    @property
    def guaranteed(self) -> int:
        """The nominal GPUs kept for the tenant alone: never lent, even while unused."""
        return 0 if self.lend_limit is None else max(self.gpus - self.lend_limit, 0)


@dataclass(frozen=True)
class Asking:
    """Who asks for what: the fields every request admission weighs has (those below
    add theirs after these)."""

    id: int
    tenant: str
    owner: int
    flavor: str
    kind: str
    gpus: Decimal


@dataclass(frozen=True)
class Running(Asking):
    """A cluster that holds quota (admitted, provisioning, ready or deleting).

    ``nodes`` is the whole nodes a prod cluster takes (its workers); ``expires_at`` is
    when its TTL ends (``None``: no TTL, so it frees nothing in an ETA). ``suspend_at``
    is set by the integrator once the cluster has been warned of a reclaim: the time it
    will be suspended, so that later passes keep the same ETA instead of restarting the
    grace period.
    """

    cpu: Decimal = ZERO
    memory_gib: Decimal = ZERO
    priority: int = 0
    admitted_at: datetime | None = None
    expires_at: datetime | None = None
    nodes: int = 0
    suspend_at: datetime | None = None
    # A request of a kind that is not reclaimable is never suspended to give borrowed
    # quota back: its GPUs come back when its run ends (``expires_at``: its deadline).
    reclaimable: bool = True
    # The member of the fleet it is placed on ("": not known).
    cluster: str = ""
    # The domain its workers were pinned (or packed) to: the level (a node label key) and
    # its value ("": none), for an ETA of when that domain frees its nodes.
    topology_level: str = ""
    topology_domain: str = ""
    # Priority classes and protection (docs/preemption.md). ``preemptible``: it may be
    # given notice and stopped for a reclaim or a higher class even though its kind is
    # not ``reclaimable`` (a job, requeued with its checkpoint). Its class's value and
    # name, and how long its notice lasts (``None``: the snapshot's ``reclaim_grace``).
    # ``protected_until``: no reclaim nor preemption chooses it before then (its class's
    # minimum run time or checkpoint grace, whichever ends later: ``protected_by`` is
    # "min_run" or "checkpoint"). ``name``: said only to its own tenant.
    preemptible: bool = False
    class_value: int = 0
    class_name: str = ""
    notice_seconds: float | None = None
    protected_until: datetime | None = None
    protected_by: str = ""
    name: str = ""

    def protected(self, now: datetime) -> bool:
        """Whether no reclaim nor preemption may choose it at ``now``. One already warned
        (``suspend_at``) stays a victim: a checkpoint it saves on notice must not
        reprieve it."""
        return (
            self.suspend_at is None
            and self.protected_until is not None
            and self.protected_until > now
        )

    def notice(self, default: timedelta) -> timedelta:
        """How long it is warned before it is stopped (``default``: the snapshot's grace)."""
        if self.notice_seconds is None:
            return default
        return timedelta(seconds=self.notice_seconds)


@dataclass(frozen=True)
class Parked:
    """A suspended dev cluster: it holds no GPUs but counts against its owner's caps
    (:mod:`clusters.admission.caps`), since resuming it takes them back."""

    tenant: str
    owner: int
    gpus: Decimal


@dataclass(frozen=True)
class FlavorOption:
    """A less preferred flavor a request accepts, with its demand there: a dev worker is
    one GPU on any flavor, but its CPU and memory slice, and a prod worker's whole node,
    differ from flavor to flavor."""

    flavor: str
    gpus: Decimal
    cpu: Decimal = ZERO
    memory_gib: Decimal = ZERO
    worker_gpus: Decimal = Decimal(1)


@dataclass(frozen=True)
class Pending(Asking):
    """A queued request. ``worker_gpus`` is the largest single pod's GPUs (the node-size
    check); ``workers`` the gang's worker count at its largest size; ``ttl`` how long it
    will live once admitted (``None``: no TTL), which the ETA uses for requests further
    back. ``earmarked``: an earlier pass reclaimed borrowed quota for it, so what that
    frees is promised to it (see :class:`Decision`). ``fallbacks`` are the flavors it
    also accepts, in order of preference after ``flavor`` (flavor fungibility): the pass
    admits it on the first of them that fits now, never on two. ``booked``: see below.
    A negative ``id`` is the surge of the running request ``-id`` (more GPUs it needs
    for a while, e.g. a service's upgrade), queued and admitted as any request is."""

    created_at: datetime
    cpu: Decimal = ZERO
    memory_gib: Decimal = ZERO
    priority: int = 0
    workers: int = 1
    worker_gpus: Decimal = Decimal(1)
    ttl: timedelta | None = None
    earmarked: bool = False
    fallbacks: tuple[FlavorOption, ...] = ()
    # The flavor on which the cluster autoscaler provisioned nodes for this gang (a
    # ProvisioningRequest reported ``Provisioned``): there, what the fleet has free now
    # does not bind it, since its nodes are being added for it; the quota still does.
    booked: str = ""
    # What it asks of placement (a member of the fleet by name, a region) and the member
    # it last ran on (a resumed request: its leftovers are there, so it goes back there
    # when it may).
    wanted_cluster: str = ""
    wanted_region: str = ""
    # A production gang's wish that all its workers share a level of its flavor's
    # topology: the level (a node label key) and "required" or "preferred" ("": none).
    topology_level: str = ""
    topology_mode: str = ""
    was_on: str = ""
    # Its priority class (docs/preemption.md): the value orders the queue above all else
    # (a request without a class has the default class's value, 0 without one);
    # ``may_preempt``: it may take running requests of lower classes off their GPUs.
    class_value: int = 0
    class_name: str = ""
    may_preempt: bool = False

    def on(self, option: FlavorOption, fallbacks: tuple[FlavorOption, ...] = ()) -> Pending:
        """This request on ``option``'s flavor, with its demand there."""
        return replace(
            self,
            flavor=option.flavor,
            gpus=option.gpus,
            cpu=option.cpu,
            memory_gib=option.memory_gib,
            worker_gpus=option.worker_gpus,
            fallbacks=fallbacks,
        )

    def options(self) -> tuple[Pending, ...]:
        """The request on each flavor it accepts, most preferred first (itself first)."""
        if not self.fallbacks:
            return (self,)
        return self._options

    @cached_property
    def _options(self) -> tuple[Pending, ...]:
        # Kept on the (frozen) request: a pass asks every time it reaches it, and a
        # caller that passes the same request to many passes (the what-if simulator)
        # builds them once.
        return (self, *(self.on(o) for o in self.fallbacks))

    @property
    def rank(self) -> tuple[int, int, int]:
        """Priority order, larger first: the priority class, then prod above dev, then
        the explicit priority."""
        return (self.class_value, 1 if self.kind == PROD else 0, self.priority)


@dataclass(frozen=True)
class StockQ:
    """A flavor's nodes in one member of the fleet: what is free there (``None``:
    unknown, not checked, as on :class:`FlavorQ`) and how many nodes it has at most."""

    flavor: str
    node_count: int
    free_gpus: Decimal | None = None
    free_nodes: int | None = None
    # Each whole free node's domain at every level of the flavor's topology, as on
    # :class:`FlavorQ` (``None``: not known).
    free_node_domains: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True)
class MemberQ:
    """A Kubernetes cluster of the fleet as placement sees it. ``tenants`` empty: every
    tenant may use it; ``active`` false: cordoned or draining (``schedulable`` says
    which); ``reachable`` false: the last health check failed. ``stock`` is per flavor."""

    name: str
    order: int = 0
    region: str = ""
    schedulable: str = "active"
    reachable: bool = True
    tenants: frozenset[str] = frozenset()
    stock: Mapping[str, StockQ] = field(default_factory=dict)
    # The most GPUs a tenant may hold here, per (tenant, flavor): a cap on its
    # fleet-wide quota in this member. Missing: no cap.
    caps: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """Whether new gangs may be placed here (not cordoned, not draining)."""
        return self.schedulable == "active"


@dataclass(frozen=True)
class Snapshot:
    """Everything one admission pass reads.

    ``aging`` is how long a request may be passed by smaller ones: once it has waited
    that long it holds, for everything behind it, the pool that blocks it (the bounded
    wait). ``reclaim_grace`` is how long a reclaimed cluster is warned before it is
    suspended.
    """

    now: datetime
    tenants: Sequence[TenantQ]
    flavors: Sequence[FlavorQ]
    quotas: Sequence[QuotaQ]
    running: Sequence[Running] = ()
    pending: Sequence[Pending] = ()
    parked: Sequence[Parked] = ()
    aging: timedelta = timedelta(hours=1)
    reclaim_grace: timedelta = timedelta(minutes=15)
    # The cohort tree: a cohort's parent, by name (Kueue's Cohort ``spec.parentName``);
    # a cohort missing here is a root. Borrowing and reclaim span a whole tree.
    cohort_parents: Mapping[str, str] = field(default_factory=dict)
    # The fleet's members (:mod:`clusters.admission.placement`); none: nothing is placed,
    # as before the fleet (capacity is then the flavors' alone).
    members: Sequence[MemberQ] = ()
    # Recent GPU-hours, decayed (:mod:`clusters.admission.decayed_usage`); off by default.
    recent: RecentUsage = field(default_factory=RecentUsage)


def cohort_root(cohort: str, parents: Mapping[str, str]) -> str:
    """The root of ``cohort``'s tree in ``parents``: the cohort whose unused quota every
    tenant below it borrows from. A cycle (refused where parents are set, so never
    expected) ends the walk at the first cohort seen twice."""
    seen = {cohort}
    while (parent := parents.get(cohort)) and parent not in seen:
        seen.add(parent)
        cohort = parent
    return cohort


@dataclass(frozen=True)
class FlavorStanding:
    """Where a request that accepts several flavors stands on one of them: its 1-based
    position in that flavor's queue, why it waits there and when it should start there."""

    flavor: str
    position: int
    reason: str
    message: str
    eta: datetime | None


@dataclass(frozen=True)
class QueueStatus:
    """Where a waiting request stands: 1-based positions in its tenant's and its
    flavor's queues, a reason code, a plain-language message and an ETA (``None``:
    unknown). ``flavors`` is set for a request that accepts several flavors: its
    standing on each, in its order of preference; the headline is then its first
    preference's position and reason, a message naming every flavor, and the best ETA."""

    position: int
    flavor_position: int
    reason: str
    message: str
    eta: datetime | None
    flavors: tuple[FlavorStanding, ...] = ()


@dataclass(frozen=True)
class Reclaim:
    """A running request to warn now and stop after its notice (never delete): a
    borrower's, so that ``for_tenant`` gets its nominal quota back for ``for_request``
    (``cause`` "reclaim"), or one of a lower priority class than ``for_request``'s, which
    may preempt (``cause`` "priority")."""

    id: int
    tenant: str
    flavor: str
    gpus: Decimal
    for_tenant: str
    for_request: int
    message: str
    # "reclaim" (borrowed quota given back) or "priority" (a higher class preempts it),
    # and its notice in seconds (``None``: the ``RECLAIM_GRACE_SECONDS`` setting).
    cause: str = "reclaim"
    notice_seconds: float | None = None


@dataclass
class Decision:
    """The outcome of one pass.

    ``admitted`` is in admission order, and ``placed`` the flavor each was admitted on
    (for a request that accepts several, the first that fits); ``waiting`` is in queue
    order; ``ledger`` is the GPUs held per (tenant, flavor) once the admitted requests
    are counted. ``earmarked`` are the waiting requests that capacity is promised to,
    because borrowed quota is being (or was) reclaimed for them: the integrator keeps
    the mark (``Pending.earmarked``) until they are admitted, so later passes keep the
    promise too.
    """

    admitted: list[int] = field(default_factory=list)
    placed: dict[int, str] = field(default_factory=dict)
    waiting: dict[int, QueueStatus] = field(default_factory=dict)
    reclaim: list[Reclaim] = field(default_factory=list)
    ledger: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    earmarked: list[int] = field(default_factory=list)
    # With members in the snapshot: the member each admitted request is placed on, and,
    # with more than one, where and why not on those before it ("cloud (onprem is full)").
    clusters: dict[int, str] = field(default_factory=dict)
    placement_notes: dict[int, str] = field(default_factory=dict)
    # The topology domain (the value of its ``topology_level`` label) each admitted gang
    # that asked for one is pinned to, and each production gang that asked none is packed
    # into (a domain of its flavor's ``topology_room.packing_level``; preferred only).
    domains: dict[int, str] = field(default_factory=dict)


# --- the dry-run's verdict ------------------------------------------------------------

FITS_NOW = "fits_now"
WILL_QUEUE = "will_queue"
NEVER_FITS = "never_fits"


@dataclass(frozen=True)
class VerdictReason:
    """A reason code (a queue reason or a never-fits code) and its plain message."""

    code: str
    message: str


@dataclass(frozen=True)
class Alternative:
    """The same request on another flavor, where it would start now or queue."""

    flavor: str
    verdict: str
    eta: datetime | None
    message: str


@dataclass(frozen=True)
class Verdict:
    """What the dry-run says. ``position``/``flavor_position``/``eta`` are set for
    ``will_queue``; ``headline`` is its first sentence ("Fits now on h100: 2 whole
    nodes, 16 GPUs charged."), ``summary`` the choices soonest first ("Starts on l4 now
    (1 GPU charged), or on h100 in about 40 min (1 GPU charged)."): see
    :mod:`clusters.admission.verdict_text`."""

    verdict: str
    reasons: list[VerdictReason] = field(default_factory=list)
    position: int | None = None
    flavor_position: int | None = None
    eta: datetime | None = None
    alternatives: list[Alternative] = field(default_factory=list)
    summary: str = ""
    # The flavor it would start on (``fits_now``); for a request that accepts several,
    # the first of them that fits now.
    flavor: str | None = None
    # ``will_queue`` for a request that accepts several flavors: its standing on each.
    flavors: tuple[FlavorStanding, ...] = ()
    headline: str = ""
    # ``fits_now`` in a fleet: the member it would run on, and (with several members)
    # where and why not elsewhere: "cloud-l4 (onprem is full)".
    kube_cluster: str | None = None
    placement: str = ""
