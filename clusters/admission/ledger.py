"""The counters one admission pass keeps: usage per tenant, cohort, user and flavor.

:class:`Ledger` is built once from a snapshot (linear in its size) and updated as the
pass admits; every check is a dictionary lookup, which is what keeps a pass over
15,000 requests linear. It also answers "can this request ever fit?", shared by the
pass and the dry-run so that the two cannot disagree.
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections import defaultdict
from decimal import Decimal

from clusters.admission.caps import CapBreach, user_cap_breach
from clusters.admission.counts_in_words import count, number
from clusters.admission.queue_order import TenantOrder, tenant_order
from clusters.admission.snapshot import (
    DEV,
    FLAVOR_UNKNOWN,
    NODE_SIZE,
    PROD,
    TENANT_TOTAL,
    USER_CAP,
    ZERO,
    FlavorQ,
    Pending,
    Running,
    Snapshot,
    TenantQ,
    cohort_root,
)
from clusters.admission.topology_room import FreeNodes, best_domain, level_word, take_nodes

# A pool is what a request draws from and what an aged request may hold for itself:
# ("t", tenant, flavor) tenant GPU quota, ("c", cohort, flavor) the cohort's nominal GPUs,
# ("f", flavor) free fleet capacity, ("tcpu", tenant) and ("tmem", tenant) tenant quotas,
# ("d", flavor, level) whole free nodes in one domain of a level of the flavor's topology.
Pool = tuple[str, ...]


def fmt(amount: Decimal | int) -> str:
    """A quantity for a message: ``8``, ``0.5``, never ``8.000`` or ``1E+1``."""
    return number(amount)


def fleet_scale(total_gpus: int) -> float:
    """One GPU's weight in a share: scarce flavors' GPUs weigh more."""
    return 1.0 / max(total_gpus, 1)


def weighted_share(used: Decimal | float, scale: float, weight: Decimal | float) -> float:
    """GPUs held on a flavor times its :func:`fleet_scale`, over the tenant's weight."""
    return float(used) * scale / float(weight)


class Ledger:
    """Quota, usage and capacity counters for one pass (mutable, private to it)."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.tenants: dict[str, TenantQ] = {t.slug: t for t in snap.tenants}
        # Each tenant's pool cohort: the root of its cohort's tree (see cohort_of).
        self._roots: dict[str, str] = {}
        self.flavors: dict[str, FlavorQ] = {f.name: f for f in snap.flavors}
        self.nominal: dict[tuple[str, str], int] = {}
        self.borrow: dict[tuple[str, str], int] = {}
        # Lending limits (Kueue's lendingLimit): a tenant keeps ``guaranteed`` of its
        # nominal GPUs for itself; the rest is the cohort's shared pool. The cohort
        # counters are of that pool: ``cohort_nominal`` what every tenant lends and
        # ``cohort_usage`` what tenants use beyond what they keep. Without lending
        # limits nothing is kept, and the pool is every nominal GPU and all usage.
        self.guaranteed: dict[tuple[str, str], int] = {}
        self.cohort_nominal: dict[tuple[str, str], int] = defaultdict(int)
        for q in snap.quotas:
            self.nominal[q.tenant, q.flavor] = q.gpus
            self.borrow[q.tenant, q.flavor] = q.borrow_limit
            if q.guaranteed:
                self.guaranteed[q.tenant, q.flavor] = q.guaranteed
            self.cohort_nominal[self.cohort_of(q.tenant), q.flavor] += q.gpus - q.guaranteed
        self.usage: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        self.cohort_usage: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
        self.cpu: dict[str, Decimal] = defaultdict(Decimal)
        self.memory: dict[str, Decimal] = defaultdict(Decimal)
        # Per (tenant, owner): dev clusters holding GPUs (running or admitted this pass).
        self.user_clusters: dict[tuple[str, int], int] = defaultdict(int)
        self.user_gpus: dict[tuple[str, int], Decimal] = defaultdict(Decimal)
        # ... suspended ones, and queued ones in queue order (higher priority first, then
        # oldest): they count against the caps of the requests behind them.
        self.user_parked: dict[tuple[str, int], tuple[int, Decimal]] = {}
        for parked in snap.parked:
            n, g = self.user_parked.get((parked.tenant, parked.owner), (0, Decimal(0)))
            self.user_parked[parked.tenant, parked.owner] = (n + 1, g + parked.gpus)
        self.user_queue: dict[tuple[str, int], list[Pending]] = defaultdict(list)
        # The owner's queue runs in the tenant queue's own order (an earmarked dev request
        # with prod, aged ones first): a cap counts exactly the requests the pass tries
        # before this one.
        self._aged_before = snap.now - snap.aging
        for pending in sorted(snap.pending, key=self._queue_order):
            if pending.kind == DEV:
                self.user_queue[pending.tenant, pending.owner].append(pending)
        # The owner's queue as sort keys and prefix sums, and what of it this pass has
        # charged, so that "queued ahead and not yet charged" is a bisection and two
        # tree lookups, not a scan of the owner's queue per check (quadratic per owner).
        self._queue_keys: dict[tuple[str, int], list[TenantOrder]] = {}
        self._queue_gpus: dict[tuple[str, int], list[Decimal]] = {}
        self._queue_index: dict[int, int] = {}
        self._charged_ahead: dict[tuple[str, int], _Counts] = {}
        for who, queue in self.user_queue.items():
            self._queue_keys[who] = [self._queue_order(q) for q in queue]
            sums = [Decimal(0)]
            for i, item in enumerate(queue):
                sums.append(sums[-1] + item.gpus)
                self._queue_index[item.id] = i
            self._queue_gpus[who] = sums
            self._charged_ahead[who] = _Counts(len(queue))
        # Owners whose tree is this ledger's alone (see :meth:`fork`).
        self._own_counts: set[tuple[str, int]] = set(self._charged_ahead)
        self.charged: set[int] = set()
        self.free: dict[str, Decimal | None] = {f.name: f.free_gpus for f in snap.flavors}
        self.free_nodes: dict[str, int | None] = {f.name: f.free_nodes for f in snap.flavors}
        self.scale: dict[str, float] = {f.name: fleet_scale(f.total_gpus) for f in snap.flavors}
        # Whole free nodes per topology domain, where known (:mod:`.topology_room`), and
        # the domain each gang admitted by this pass was pinned to.
        self.domains: dict[str, FreeNodes] = {}
        for f in snap.flavors:
            if f.free_node_domains is not None:
                room = self.domains[f.name] = FreeNodes(f.topology, f.free_node_domains)
                if f.free_nodes is not None:
                    room.shrink_to(f.free_nodes)
        self.pinned: dict[int, str] = {}
        self.share: dict[str, float] = defaultdict(float)
        # With usage-decayed fair share, each (tenant, flavor)'s recent average of GPUs
        # held counts on top of what it holds (:mod:`.decayed_usage`); empty when off.
        self.recent_held: dict[tuple[str, str], float] = snap.recent.held()
        self._seed_recent_shares()
        self._never: dict[tuple[object, ...], list[tuple[str, str]]] = {}
        for r in snap.running:
            self.charge(r)

    def _seed_recent_shares(self) -> None:
        """A tenant that held GPUs recently but holds none now still has a share."""
        for slug, flavor in self.recent_held:
            share = self.flavor_share(slug, flavor, self.tenant(slug).weight)
            self.share[slug] = max(self.share[slug], share)

    def fork(self) -> Ledger:
        """A copy whose counters change apart from this one's (the dry-run's checkpoints);
        what the pass only reads (quotas, the owners' queues, memos) is shared."""
        other = copy.copy(self)
        other.tenants = dict(self.tenants)
        other.usage = defaultdict(Decimal, self.usage)
        other.cohort_usage = defaultdict(Decimal, self.cohort_usage)
        other.cpu = defaultdict(Decimal, self.cpu)
        other.memory = defaultdict(Decimal, self.memory)
        other.user_clusters = defaultdict(int, self.user_clusters)
        other.user_gpus = defaultdict(Decimal, self.user_gpus)
        other.charged = set(self.charged)
        other.free = dict(self.free)
        other.free_nodes = dict(self.free_nodes)
        other.domains = {name: room.fork() for name, room in self.domains.items()}
        other.pinned = dict(self.pinned)
        other.share = defaultdict(float, self.share)
        # Copy on write: both now share every owner's tree until they change it.
        other._charged_ahead = dict(self._charged_ahead)
        other._own_counts = set()
        self._own_counts = set()
        return other

    def tenant(self, slug: str) -> TenantQ:
        """The tenant's policy (defaults for a tenant missing from the snapshot)."""
        found = self.tenants.get(slug)
        if found is None:
            found = self.tenants[slug] = TenantQ(slug=slug)
        return found

    def cohort_of(self, slug: str) -> str:
        """The cohort whose pool the tenant borrows from and lends to: the root of its
        cohort's tree (its own cohort when that has no parent). Every cohort counter of
        the pass (``("c", cohort, flavor)`` pools, reclaim, promises) is keyed by it."""
        found = self._roots.get(slug)
        if found is None:
            found = self._roots[slug] = cohort_root(
                self.tenant(slug).cohort, self.snap.cohort_parents
            )
        return found

    def charge(self, item: Running | Pending) -> None:
        """Count a running or newly admitted cluster against every counter."""
        tenant = self.tenant(item.tenant)
        key = (item.tenant, item.flavor)
        self.cohort_usage[self.cohort_of(item.tenant), item.flavor] += self.pool_draw(
            item.tenant, item.flavor, item.gpus
        )
        self.usage[key] += item.gpus
        self.cpu[item.tenant] += item.cpu
        self.memory[item.tenant] += item.memory_gib
        if item.kind == DEV:
            self.user_clusters[item.tenant, item.owner] += 1
            self.user_gpus[item.tenant, item.owner] += item.gpus
        if isinstance(item, Pending) and item.id not in self.charged:
            self.charged.add(item.id)
            who = (item.tenant, item.owner)
            index = self._queue_index.get(item.id)
            counts = self._charged_ahead.get(who)
            if item.kind == DEV and index is not None and counts is not None:
                if who not in self._own_counts:
                    counts = self._charged_ahead[who] = counts.copy()
                    self._own_counts.add(who)
                counts.add(index, item.gpus)
        share = self.flavor_share(item.tenant, item.flavor, tenant.weight)
        if share > self.share[item.tenant]:
            self.share[item.tenant] = share

    def flavor_share(self, tenant: str, flavor: str, weight: Decimal) -> float:
        """The tenant's weighted share of ``flavor``: what it holds (plus, with
        usage-decayed fair share, what it held recently) times the flavor's scale, over
        its weight."""
        used: Decimal | float = self.usage[tenant, flavor]
        if self.recent_held:
            used = float(used) + self.recent_held.get((tenant, flavor), 0.0)
        return weighted_share(used, self.scale.get(flavor, 1.0), weight)

    def pool_draw(self, tenant: str, flavor: str, gpus: Decimal) -> Decimal:
        """How much of the cohort's shared pool ``gpus`` more of ``tenant`` on ``flavor``
        would take: what goes beyond the GPUs the tenant keeps for itself (all of it
        when it keeps none)."""
        kept = self.guaranteed.get((tenant, flavor), 0)
        if not kept:
            return gpus
        used = self.usage[tenant, flavor]
        return max(used + gpus - kept, ZERO) - max(used - kept, ZERO)

    def _queue_order(self, p: Pending) -> TenantOrder:
        """``p``'s place in its owner's queue: its place in its tenant's queue."""
        return tenant_order(p, self._aged_before, self.snap.recent.owner_use(p.tenant, p.owner))

    def owner_has(self, p: Pending) -> tuple[int, Decimal]:
        """The owner's dev clusters and GPUs that count against the caps before ``p``
        (:mod:`clusters.admission.caps`): holding GPUs, suspended, or queued ahead of it."""
        who = (p.tenant, p.owner)
        parked_n, parked_g = self.user_parked.get(who, (0, Decimal(0)))
        clusters, gpus = self.user_clusters[who] + parked_n, self.user_gpus[who] + parked_g
        keys = self._queue_keys.get(who)
        if keys:
            # Those strictly ahead of ``p`` in queue order (``p`` itself may be absent:
            # the dry-run's candidate), less those already counted as charged.
            ahead = self._queue_index.get(p.id, -1)
            if ahead < 0 or keys[ahead][-1] != p.id:
                ahead = bisect_left(keys, self._queue_order(p))
            charged_n, charged_g = self._charged_ahead[who].prefix(ahead)
            clusters += ahead - charged_n
            gpus += self._queue_gpus[who][ahead] - charged_g
        return clusters, gpus

    def queued_behind(self, p: Pending) -> list[Pending]:
        """The owner's queued dev requests that come after ``p`` in queue order (they
        count ``p`` against their caps)."""
        who = (p.tenant, p.owner)
        keys = self._queue_keys.get(who)
        if not keys:
            return []
        return self.user_queue[who][bisect_left(keys, self._queue_order(p)) :]

    def cap_breach(self, p: Pending) -> CapBreach | None:
        """The per-engineer cap ``p`` would pass now, or ``None`` (non-dev: never)."""
        if p.kind != DEV:
            return None
        tenant = self.tenant(p.tenant)
        if tenant.max_dev_clusters_per_user is None and tenant.max_dev_gpus_per_user is None:
            return None  # no cap to pass: spare the count of what the owner has
        clusters, gpus = self.owner_has(p)
        return user_cap_breach(
            max_clusters=tenant.max_dev_clusters_per_user,
            max_gpus=tenant.max_dev_gpus_per_user,
            clusters=clusters,
            gpus=gpus,
            more_gpus=p.gpus,
        )

    def take_capacity(self, p: Pending, domain: str | None = None) -> None:
        """Subtract an admitted request from the known free capacity of its flavor (a gang
        the autoscaler is adding nodes for takes what is free now first, the rest from
        its new nodes: never below nothing); a gang pinned to ``domain`` takes its nodes
        there."""
        if domain is not None:
            self.pinned[p.id] = domain
        free = self.free.get(p.flavor)
        if free is None:
            return
        free -= p.gpus
        if p.booked == p.flavor:
            free = max(free, type(free)(0))
        self.free[p.flavor] = free
        nodes = self.free_nodes.get(p.flavor)
        if nodes is not None:
            if p.kind == PROD:
                nodes -= p.workers
            # A dev worker may land on a whole free node: never claim more whole free
            # nodes than the free GPUs could fill.
            per_node = self.flavors[p.flavor].gpus_per_node
            self.free_nodes[p.flavor] = max(min(nodes, int(free // per_node)), 0)
        room = self.domains.get(p.flavor)
        if room is not None:
            take_nodes(room, p, domain, self.whole_free_nodes(p.flavor))

    def domain_for(self, p: Pending) -> str | None:
        """The best-fitting domain of ``p``'s topology level with a whole free node for
        each of its workers (``None``: it asks for none, none fits, or none is known)."""
        return best_domain(self.domains.get(p.flavor), p)

    def whole_free_nodes(self, flavor: str) -> int | None:
        """Nodes of ``flavor`` with every GPU free (estimated from free GPUs if unknown)."""
        nodes = self.free_nodes.get(flavor)
        if nodes is not None:
            return nodes
        free = self.free.get(flavor)
        if free is None:
            return None
        return int(free // self.flavors[flavor].gpus_per_node)

    def never_fits(self, p: Pending) -> list[tuple[str, str]]:
        """Why ``p`` could not be admitted even on an idle fleet, as (code, message).

        Memoised by shape: a long queue holds many requests of the same few shapes."""
        key = (
            p.tenant,
            p.flavor,
            p.kind,
            p.gpus,
            p.worker_gpus,
            p.workers,
            p.cpu,
            p.memory_gib,
            p.topology_level,
            p.topology_mode,
        )
        found = self._never.get(key)
        if found is None:
            found = self._never[key] = self._never_fits(p)
        return found

    def _never_fits(self, p: Pending) -> list[tuple[str, str]]:
        flavor = self.flavors.get(p.flavor)
        if flavor is None:
            return [(FLAVOR_UNKNOWN, f"There is no GPU flavor called {p.flavor!r}.")]
        reasons: list[tuple[str, str]] = []
        too_big = node_size_words(p, flavor)
        if too_big:
            reasons.append((NODE_SIZE, too_big))
        tenant = self.tenant(p.tenant)
        nominal = self.nominal.get((p.tenant, p.flavor), 0)
        limit = nominal + self.borrow.get((p.tenant, p.flavor), 0)
        kept = self.guaranteed.get((p.tenant, p.flavor), 0)
        limit = min(limit, kept + self.cohort_nominal.get((self.cohort_of(p.tenant), p.flavor), 0))
        if limit == 0:
            reasons.append((TENANT_TOTAL, f"{p.tenant} has no quota on {p.flavor}."))
        elif p.gpus > limit:
            reasons.append(
                (
                    TENANT_TOTAL,
                    f"It needs {count(p.gpus, f'{p.flavor} GPU')}; {p.tenant} may hold at "
                    f"most {limit} ({nominal} nominal plus what it may borrow).",
                )
            )
        if tenant.cpu_quota and p.cpu > tenant.cpu_quota:
            reasons.append(
                (
                    TENANT_TOTAL,
                    f"It needs {count(p.cpu, 'CPU core')}; {p.tenant}'s CPU quota is "
                    f"{tenant.cpu_quota}.",
                )
            )
        if tenant.memory_quota_gib and p.memory_gib > tenant.memory_quota_gib:
            reasons.append(
                (
                    TENANT_TOTAL,
                    f"It needs {fmt(p.memory_gib)} GiB of memory; {p.tenant}'s memory quota "
                    f"is {tenant.memory_quota_gib} GiB.",
                )
            )
        if p.kind == DEV:
            if tenant.max_dev_clusters_per_user == 0:
                reasons.append((USER_CAP, f"{p.tenant} allows no dev clusters per engineer."))
            cap = tenant.max_dev_gpus_per_user
            if cap is not None and p.gpus > cap:
                reasons.append(
                    (
                        USER_CAP,
                        f"It needs {count(p.gpus, 'GPU')}; an engineer of {p.tenant} may "
                        f"hold at most {count(cap, 'dev GPU')}.",
                    )
                )
        return reasons

    def available(self, pool: Pool) -> Decimal:
        """What is left in ``pool`` now (used as the starting point of the ETA)."""
        kind = pool[0]
        if kind == "t":
            key = (pool[1], pool[2])
            limit = self.nominal.get(key, 0) + self.borrow.get(key, 0)
            return limit - self.usage[key]
        if kind == "c":
            key = (pool[1], pool[2])
            return self.cohort_nominal.get(key, 0) - self.cohort_usage[key]
        if kind == "f":
            return self.free.get(pool[1]) or ZERO
        if kind == "d":
            return Decimal(self.whole_free_nodes(pool[1]) or 0)
        tenant = self.tenant(pool[1])
        if kind == "tcpu":
            return tenant.cpu_quota - self.cpu[pool[1]]
        return tenant.memory_quota_gib - self.memory[pool[1]]


class _Counts:
    """How many of an owner's queued requests, and how many GPUs, have been charged among
    the first ``i`` in queue order (a Fenwick tree: O(log n) per update and query)."""

    def __init__(self, size: int) -> None:
        self.n = [0] * (size + 1)
        self.g = [Decimal(0)] * (size + 1)

    def copy(self) -> _Counts:
        """An independent copy."""
        other = _Counts(0)
        other.n, other.g = list(self.n), list(self.g)
        return other

    def add(self, index: int, gpus: Decimal) -> None:
        i = index + 1
        while i < len(self.n):
            self.n[i] += 1
            self.g[i] += gpus
            i += i & -i

    def prefix(self, count: int) -> tuple[int, Decimal]:
        n, g = 0, Decimal(0)
        i = count
        while i > 0:
            n += self.n[i]
            g += self.g[i]
            i -= i & -i
        return n, g


def too_big_for_a_domain(p: Pending, flavor: FlavorQ) -> bool:
    """Whether a production gang requires more workers in one domain of its level than
    the flavor's largest domain there has nodes (known once the reconciler saw them)."""
    if p.kind != PROD or not p.topology_level or p.topology_mode == "preferred":
        return False
    largest = dict(flavor.largest_domains).get(p.topology_level)
    return largest is not None and p.workers > largest


def node_size_words(p: Pending, flavor: FlavorQ) -> str:
    """Why ``p`` is larger than ``flavor``'s nodes, fleet or largest domain can ever hold
    ("": it is not)."""
    if p.worker_gpus > flavor.gpus_per_node:
        return (
            f"One worker asks for {count(p.worker_gpus, 'GPU')} but a {flavor.name} "
            f"node has {flavor.gpus_per_node}."
        )
    if p.kind == PROD and p.workers > flavor.node_count:
        return (
            f"A production cluster takes one whole node per worker: "
            f"{count(p.workers, 'worker')} need "
            f"{count(p.workers, f'{flavor.name} node')} and the fleet has "
            f"{flavor.node_count}."
        )
    if too_big_for_a_domain(p, flavor):
        word = level_word(p.topology_level)
        largest = dict(flavor.largest_domains)[p.topology_level]
        return (
            f"It requires all {count(p.workers, 'worker')} in one {word} "
            f"({p.topology_level}), and the largest {word} of {flavor.name} has "
            f"{count(largest, 'node')}."
        )
    if p.gpus > flavor.total_gpus:
        return (
            f"It needs {count(p.gpus, f'{flavor.name} GPU')} and the whole fleet "
            f"has {flavor.total_gpus}."
        )
    return ""
