"""Property tests of the admission pass over random quotas, cohorts and request streams.

Invariants (each a test below): every request is admitted whole or left waiting with a
reason; the ledger equals the running clusters plus the admitted ones exactly; a pass
never takes a tenant over its nominal quota plus borrowing limit, a cohort over its
nominal total, a tenant over its CPU or memory quota, an engineer over a per-user cap,
or a flavor over its known free capacity; lower priorities never change what higher
priorities get; the dry-run agrees with the pass; and an aged request is not starved.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from clusters.admission import (
    CAPACITY,
    REASONS,
    TENANT_QUOTA,
    FlavorQ,
    Pending,
    QuotaQ,
    Running,
    Snapshot,
    TenantQ,
    cohort_root,
    decide,
    dry_run,
)
from tests.clusters.admission.helpers import NOW, minutes

TENANTS = ["acme", "globex", "initech", "umbrella"]
PER_NODE = {"h100": 8, "l4": 1}


def _later(m: int) -> datetime:
    return NOW + minutes(m)


@st.composite
def snapshots(draw: st.DrawFn, max_pending: int = 25) -> Snapshot:
    slugs = TENANTS[: draw(st.integers(1, 4))]
    tenants = [
        TenantQ(
            slug,
            cohort=draw(st.sampled_from(["a", "b"])),
            weight=Decimal(draw(st.integers(1, 3))),
            cpu_quota=draw(st.sampled_from([0, 0, 40, 120])),
            memory_quota_gib=draw(st.sampled_from([0, 0, 200, 600])),
            max_dev_clusters_per_user=draw(st.sampled_from([None, 1, 2, 3])),
            max_dev_gpus_per_user=draw(st.sampled_from([None, 2, 4])),
        )
        for slug in slugs
    ]
    flavors = []
    for name, per_node in PER_NODE.items():
        nodes = draw(st.integers(1, 4))
        free = draw(st.one_of(st.none(), st.integers(0, per_node * nodes)))
        flavors.append(
            FlavorQ(name, per_node, nodes, None if free is None else Decimal(free), None)
        )
    quotas = [
        QuotaQ(slug, name, draw(st.integers(0, 16)), draw(st.integers(0, 8)))
        for slug in slugs
        for name in PER_NODE
        if draw(st.booleans())
    ]
    ids = iter(range(1, 10_000))

    def cluster_fields() -> dict:
        flavor = draw(st.sampled_from(["h100", "h100", "l4"]))
        kind = draw(st.sampled_from(["dev", "dev", "prod"]))
        workers = draw(st.integers(1, 3))
        gpus = workers * (PER_NODE[flavor] if kind == "prod" else 1)
        return dict(
            tenant=draw(st.sampled_from(slugs)),
            owner=draw(st.integers(1, 3)),
            flavor=flavor,
            kind=kind,
            gpus=Decimal(gpus),
            cpu=Decimal(4 * gpus),
            memory_gib=Decimal(16 * gpus),
            priority=draw(st.integers(0, 2)),
        )

    running = [
        Running(
            id=next(ids),
            admitted_at=NOW - minutes(draw(st.integers(0, 300))),
            expires_at=draw(
                st.one_of(st.none(), st.integers(1, 300).map(lambda m: NOW + minutes(m)))
            ),
            nodes=0,
            **cluster_fields(),
        )
        for _ in range(draw(st.integers(0, 10)))
    ]
    pending = []
    for _ in range(draw(st.integers(0, max_pending))):
        fields = cluster_fields()
        if draw(st.integers(0, 30)) == 0:
            fields["flavor"] = "a100"
        per_worker = Decimal(PER_NODE.get(fields["flavor"], 8)) if fields["kind"] == "prod" else 1
        pending.append(
            Pending(
                id=next(ids),
                created_at=NOW - minutes(draw(st.integers(0, 240))),
                workers=int(fields["gpus"] / per_worker),
                worker_gpus=Decimal(per_worker),
                ttl=draw(st.one_of(st.none(), st.integers(10, 240).map(minutes))),
                earmarked=draw(st.integers(0, 4)) == 0,  # an earlier pass reclaimed for it
                **fields,
            )
        )
    return Snapshot(
        now=NOW,
        tenants=tenants,
        flavors=flavors,
        quotas=quotas,
        running=running,
        pending=pending,
        aging=minutes(draw(st.sampled_from([30, 60, 600]))),
        # Separate cohorts, both under one parent, or one under the other.
        cohort_parents=draw(st.sampled_from([{}, {}, {"a": "org", "b": "org"}, {"b": "a"}])),
    )


def _sum_by(items, key) -> dict:
    out: dict = defaultdict(Decimal)
    for item in items:
        out[key(item)] += item.gpus
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_whole_gangs_exact_ledger_and_no_limit_ever_exceeded(snap: Snapshot) -> None:
    decision = decide(snap)
    by_id = {p.id: p for p in snap.pending}
    admitted = [by_id[i] for i in decision.admitted]

    # All or nothing: each request is admitted once or waits, never split.
    assert len(set(decision.admitted)) == len(decision.admitted)
    assert set(decision.admitted) | set(decision.waiting) == set(by_id)
    assert not set(decision.admitted) & set(decision.waiting)

    # The ledger is exactly what running and admitted clusters hold.
    expected = _sum_by([*snap.running, *admitted], lambda c: (c.tenant, c.flavor))
    assert decision.ledger == {k: v for k, v in expected.items() if v}

    tenants = {t.slug: t for t in snap.tenants}
    quotas = {(q.tenant, q.flavor): q for q in snap.quotas}

    def pool_of(tenant: str) -> str:
        """The cohort whose pool the tenant shares: the root of its cohort's tree."""
        return cohort_root(tenants[tenant].cohort, snap.cohort_parents)

    cohort_nominal: dict = defaultdict(int)
    for q in snap.quotas:
        cohort_nominal[pool_of(q.tenant), q.flavor] += q.gpus
    after = [*snap.running, *admitted]
    cohort_usage = _sum_by(after, lambda c: (pool_of(c.tenant), c.flavor))
    for p in admitted:
        q = quotas[p.tenant, p.flavor]
        assert expected[p.tenant, p.flavor] <= q.gpus + q.borrow_limit
        cohort = pool_of(p.tenant)
        assert cohort_usage[cohort, p.flavor] <= cohort_nominal[cohort, p.flavor]
        tenant = tenants[p.tenant]
        mine = [c for c in after if c.tenant == p.tenant]
        if tenant.cpu_quota:
            assert sum(c.cpu for c in mine) <= tenant.cpu_quota
        if tenant.memory_quota_gib:
            assert sum(c.memory_gib for c in mine) <= tenant.memory_quota_gib
        if p.kind == "dev":
            own = [c for c in mine if c.kind == "dev" and c.owner == p.owner]
            if tenant.max_dev_clusters_per_user is not None:
                assert len(own) <= tenant.max_dev_clusters_per_user
            if tenant.max_dev_gpus_per_user is not None:
                assert sum(c.gpus for c in own) <= tenant.max_dev_gpus_per_user

    # Never over known free capacity, in GPUs and (for prod) whole nodes.
    taken = _sum_by(admitted, lambda c: c.flavor)
    for f in snap.flavors:
        if f.free_gpus is not None:
            assert taken[f.name] <= f.free_gpus
            prod_nodes = sum(p.workers for p in admitted if p.flavor == f.name and p.kind == "prod")
            assert prod_nodes <= f.free_gpus // f.gpus_per_node

    # Every waiting request has a known reason, a message and consecutive positions.
    per_tenant: dict = defaultdict(list)
    per_flavor: dict = defaultdict(list)
    for rid, status in decision.waiting.items():
        assert status.reason in REASONS
        assert status.message
        assert status.eta is None or status.eta >= snap.now
        per_tenant[by_id[rid].tenant].append(status.position)
        per_flavor[by_id[rid].flavor].append(status.flavor_position)
    for positions in [*per_tenant.values(), *per_flavor.values()]:
        assert positions == list(range(1, len(positions) + 1))

    # Reclaim only picks running clusters of tenants that borrow, never twice.
    victims = [r.id for r in decision.reclaim]
    assert len(set(victims)) == len(victims)
    running_ids = {r.id for r in snap.running}
    assert set(victims) <= running_ids


def _standing(p: Pending) -> tuple[int, int, int]:
    """Where ``p`` stands among priorities, larger first: its ``rank``, except that a dev
    request promised what a reclaim frees stands with prod (``queue_order.level``: else a
    prod run it preempted, back in line, would take its GPUs back)."""
    return (p.class_value, 1 if p.kind == "prod" or p.earmarked else 0, p.priority)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_lower_priorities_never_change_what_higher_priorities_get(snap: Snapshot) -> None:
    """Removing every request below a priority level leaves the admissions at or above it
    unchanged: a lower-priority request never takes what a higher one could use."""
    full = decide(snap)
    by_id = {p.id: p for p in snap.pending}
    for level in {_standing(p) for p in snap.pending}:
        upper = [p for p in snap.pending if _standing(p) >= level]
        alone = decide(replace(snap, pending=upper))
        assert alone.admitted == [i for i in full.admitted if _standing(by_id[i]) >= level]
    # And admissions come in priority order.
    ranks = [_standing(by_id[i]) for i in full.admitted]
    assert ranks == sorted(ranks, reverse=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(max_pending=12), st.data())
def test_dry_run_agrees_with_the_pass(snap: Snapshot, data: st.DataObject) -> None:
    tenant = data.draw(st.sampled_from([t.slug for t in snap.tenants]))
    flavor = data.draw(st.sampled_from(["h100", "l4", "a100"]))
    kind = data.draw(st.sampled_from(["dev", "prod"]))
    workers = data.draw(st.integers(1, 4))
    per_worker = PER_NODE.get(flavor, 8) if kind == "prod" else 1
    candidate = Pending(
        id=99_999,
        tenant=tenant,
        owner=data.draw(st.integers(1, 3)),
        flavor=flavor,
        kind=kind,
        gpus=Decimal(workers * per_worker),
        created_at=snap.now,
        cpu=Decimal(4 * workers * per_worker),
        memory_gib=Decimal(16 * workers * per_worker),
        workers=workers,
        worker_gpus=Decimal(per_worker),
    )
    verdict = dry_run(snap, candidate)
    decision = decide(replace(snap, pending=[*snap.pending, candidate]))
    admitted = candidate.id in decision.admitted
    assert admitted == (verdict.verdict == "fits_now")
    if verdict.verdict == "will_queue":
        status = decision.waiting[candidate.id]
        assert (verdict.position, verdict.eta) == (status.position, status.eta)
    if verdict.verdict == "never_fits":
        # Not even on an idle fleet with the queue empty.
        idle = replace(snap, running=[], pending=[candidate])
        idle = replace(idle, flavors=[replace(f, free_gpus=None) for f in snap.flavors])
        assert decide(idle).admitted == []


def _simulate_stream(
    *, aging: timedelta, tenants: int, arrivals: list[list[tuple[int, int, int]]], tick: int
) -> tuple[int | None, list[tuple[int, int, int, str]], dict[int, str]]:
    """Run a pass every ``tick`` minutes on one 8-GPU node; the 8-GPU request 1 arrives
    after the first tick while 1-2 GPU requests keep arriving (``arrivals[step]`` is a list
    of (tenant, gpus, ttl minutes)). Returns when request 1 started (minutes), every
    admission as (minute, id, created minute, tenant) and request 1's reason per minute."""
    slugs = TENANTS[:tenants]
    base = Snapshot(
        now=NOW,
        tenants=[TenantQ(s, cohort="a") for s in slugs],
        flavors=[FlavorQ("h100", 8, 1)],
        quotas=[QuotaQ(s, "h100", 8) for s in slugs],
        aging=aging,
    )
    running: list[Running] = []
    waiting: list[Pending] = []
    created: dict[int, int] = {}
    admissions: list[tuple[int, int, int, str]] = []
    reasons: dict[int, str] = {}
    next_id = 2
    for step, batch in enumerate(arrivals):
        minute = step * tick
        now = NOW + minutes(minute)
        if step == 1:
            waiting.append(
                Pending(1, slugs[0], 1, "h100", "dev", Decimal(8), now, workers=8, ttl=minutes(60))
            )
            created[1] = minute
        for tenant, gpus, ttl in batch:
            waiting.append(
                Pending(
                    next_id,
                    slugs[tenant % tenants],
                    next_id,
                    "h100",
                    "dev",
                    Decimal(gpus),
                    now,
                    workers=gpus,
                    ttl=minutes(ttl),
                )
            )
            created[next_id] = minute
            next_id += 1
        running = [r for r in running if r.expires_at is None or r.expires_at > now]
        free = Decimal(8) - sum((r.gpus for r in running), Decimal(0))
        snap = replace(
            base,
            now=now,
            running=running,
            pending=waiting,
            flavors=[FlavorQ("h100", 8, 1, free_gpus=free)],
        )
        decision = decide(snap)
        admitted = set(decision.admitted)
        for p in waiting:
            if p.id in admitted:
                admissions.append((minute, p.id, created[p.id], p.tenant))
                running.append(
                    Running(
                        p.id,
                        p.tenant,
                        p.owner,
                        p.flavor,
                        p.kind,
                        p.gpus,
                        admitted_at=now,
                        expires_at=now + (p.ttl or minutes(0)),
                    )
                )
        waiting = [p for p in waiting if p.id not in admitted]
        if 1 in admitted:
            return minute, admissions, reasons
        if 1 in decision.waiting:
            reasons[minute] = decision.waiting[1].reason
    return None, admissions, reasons


# A steady stream: every tick each tenant asks for 1-2 GPUs for 10-45 minutes.
streams = st.integers(1, 3).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(
            st.lists(
                st.tuples(st.integers(0, n - 1), st.integers(1, 2), st.integers(10, 45)),
                min_size=1,
                max_size=3,
            ),
            min_size=60,
            max_size=60,
        ),
    )
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams, st.sampled_from([20, 45, 90]))
def test_an_aged_request_is_not_starved_by_a_stream_of_small_ones(stream, aging_min) -> None:
    """Once the large request has aged, younger requests start before it only while it
    waits on its own tenant's quota, and only for other tenants (its own are held).

    Bound: let T* be when it aged or when the last request older than it started,
    whichever is later. Its tenant's quota then drains within one TTL (nothing younger
    of its tenant starts), then the node drains within one more (nothing younger starts
    at all): it starts by T* + 2 x the longest TTL + one tick.
    """
    tenants, arrivals = stream
    tick, ttl_max = 5, 45
    started, admissions, reasons = _simulate_stream(
        aging=minutes(aging_min), tenants=tenants, arrivals=arrivals, tick=tick
    )
    t0, aged = tick, tick + aging_min
    older = [m for m, rid, c, _ in admissions if c < t0]
    t_star = max([aged, *older])
    assert started is not None, "starved"
    assert started <= t_star + 2 * ttl_max + tick
    for minute, rid, created_at, tenant in admissions:
        if rid != 1 and aged <= minute < started and created_at >= t0:
            assert reasons[minute] == TENANT_QUOTA, (minute, rid, reasons[minute])
            assert tenant != TENANTS[0], (minute, rid)


def test_without_aging_the_large_request_is_starved() -> None:
    """The contrast: best effort alone lets the small ones pass forever."""
    arrivals = [[(0, 1, 30), (1, 2, 30)] for _ in range(60)]
    never, _, _ = _simulate_stream(aging=timedelta(days=30), tenants=2, arrivals=arrivals, tick=5)
    assert never is None
    started, _, _ = _simulate_stream(aging=minutes(30), tenants=2, arrivals=arrivals, tick=5)
    assert started is not None and started <= 5 + 30 + 2 * 30 + 5


@st.composite
def reclaim_snapshots(draw: st.DrawFn) -> Snapshot:
    """One cohort on H100 where borrowers hold others' nominal quota and requests within
    their tenant's quota wait: the situations that start reclaims. No CPU, memory or
    per-user limits (a reclaim gives none of those back)."""
    slugs = TENANTS[: draw(st.integers(2, 4))]
    quotas = [QuotaQ(s, "h100", draw(st.integers(0, 16)), draw(st.integers(0, 16))) for s in slugs]
    limit = {q.tenant: q.gpus + q.borrow_limit for q in quotas}
    total = sum(q.gpus for q in quotas)
    nodes = draw(st.integers(max(1, -(-total // 8)), 8))
    ids = iter(range(1, 10_000))

    def shape() -> dict:
        kind = draw(st.sampled_from(["dev", "dev", "prod"]))
        workers = draw(st.integers(1, 3))
        gpus = workers * (8 if kind == "prod" else 1)
        return dict(
            tenant=draw(st.sampled_from(slugs)),
            owner=draw(st.integers(1, 3)),
            flavor="h100",
            kind=kind,
            gpus=Decimal(gpus),
            priority=draw(st.integers(0, 2)),
        )

    running: list[Running] = []
    held: dict = defaultdict(Decimal)
    for _ in range(draw(st.integers(4, 16))):
        fields = shape()
        gpus = fields["gpus"]
        if held[fields["tenant"]] + gpus > limit[fields["tenant"]]:
            continue
        if sum(held.values()) + gpus > total:
            continue
        held[fields["tenant"]] += gpus
        running.append(
            Running(
                id=next(ids),
                admitted_at=NOW - minutes(draw(st.integers(0, 300))),
                nodes=int(gpus // 8) if fields["kind"] == "prod" else 0,
                **fields,
            )
        )
    pending = []
    for _ in range(draw(st.integers(1, 10))):
        fields = shape()
        per_worker = Decimal(8) if fields["kind"] == "prod" else Decimal(1)
        pending.append(
            Pending(
                id=next(ids),
                created_at=NOW - minutes(draw(st.integers(0, 240))),
                workers=int(fields["gpus"] / per_worker),
                worker_gpus=per_worker,
                **fields,
            )
        )
    free = draw(st.booleans())
    used = sum(held.values(), Decimal(0))
    return Snapshot(
        now=NOW,
        tenants=[TenantQ(s, cohort="a") for s in slugs],
        flavors=[FlavorQ("h100", 8, nodes, Decimal(8 * nodes) - used if free else None)],
        quotas=quotas,
        running=running,
        pending=pending,
        aging=minutes(draw(st.sampled_from([30, 600]))),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reclaim_snapshots())
def test_what_a_reclaim_frees_goes_to_the_request_that_triggered_it(snap: Snapshot) -> None:
    """Issue 10, item 16. After a pass that reclaims borrowed quota, suspend the victims
    and run the next pass on the same queue, the earmarks kept: every request the first
    pass promised the reclaimed GPUs to starts, unless a request at least as urgent (a
    higher priority, or an aged one) went first or holds it back, or the fleet itself has
    no room for it. Nothing of a lower priority, or of the same priority that is neither
    aged nor promised earlier, ever takes it."""
    first = decide(snap)
    by_id = {p.id: p for p in snap.pending}
    event(f"reclaims started: {bool(first.reclaim)}")
    for rid in first.earmarked:
        assert first.waiting[rid].reason == "reclaim_pending"

    victims = {r.id for r in first.reclaim}
    started = [
        Running(p.id, p.tenant, p.owner, p.flavor, p.kind, p.gpus, priority=p.priority)
        for p in (by_id[i] for i in first.admitted)
    ]
    live = [r for r in snap.running if r.id not in victims] + started
    (flavor,) = snap.flavors
    free = None
    if flavor.free_gpus is not None:
        free = (
            flavor.free_gpus
            + sum((r.gpus for r in snap.running if r.id in victims), Decimal(0))
            - sum((r.gpus for r in started), Decimal(0))
        )
    waiting = [
        replace(p, earmarked=p.id in first.earmarked)
        for p in snap.pending
        if p.id not in first.admitted
    ]
    second = decide(
        replace(snap, running=live, pending=waiting, flavors=[replace(flavor, free_gpus=free)])
    )
    for rid in first.earmarked:
        if rid in second.admitted:
            continue
        promised = by_id[rid]
        status = second.waiting[rid]
        if free is not None and promised.gpus > free:
            continue  # the fleet is smaller than the quotas: no reclaim makes room
        # Something ordered before it in the second pass took what it needed: a request of
        # a higher priority, or at its own priority an aged one or one promised earlier.
        ahead = [by_id[i] for i in second.admitted]
        if status.reason == "head_of_line":
            holder = re.search(r"request (\d+)", status.message)
            assert holder is not None, status.message
            ahead.append(by_id[int(holder.group(1))])
        assert any(
            p.rank > promised.rank
            or (
                p.rank == promised.rank
                and (p.created_at <= snap.now - snap.aging or p.id in first.earmarked)
            )
            for p in ahead
        ), (rid, status, ahead)


@st.composite
def prod_waits_for_nodes(draw: st.DrawFn) -> tuple[Snapshot, list[int]]:
    """One H100 fleet given node by node (GPUs free on each), an aged production cluster
    that may not fit on its whole free nodes, and younger dev requests of 1- and 2-GPU
    workers from two tenants with room in their quotas: only capacity binds."""
    # Scraps of one or two GPUs are what tell a per-worker fit from a total that fits.
    nodes = draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 5, 7, 8, 8]), min_size=2, max_size=6))
    flavor = FlavorQ(
        "h100",
        8,
        len(nodes),
        free_gpus=Decimal(sum(nodes)),
        free_nodes=sum(1 for free in nodes if free == 8),
    )
    prod = Pending(
        1,
        "acme",
        1,
        "h100",
        "prod",
        Decimal(8 * (workers := draw(st.integers(1, len(nodes))))),
        NOW - minutes(120),
        workers=workers,
        worker_gpus=Decimal(8),
    )
    dev = []
    for i in range(draw(st.integers(1, 12))):
        worker = draw(st.sampled_from([1, 1, 2]))
        count = draw(st.integers(1, 4))
        dev.append(
            Pending(
                10 + i,
                draw(st.sampled_from(["acme", "globex"])),
                10 + i,
                "h100",
                "dev",
                Decimal(worker * count),
                NOW - minutes(draw(st.integers(0, 100))),
                workers=count,
                worker_gpus=Decimal(worker),
            )
        )
    snap = Snapshot(
        now=NOW,
        tenants=[TenantQ("acme"), TenantQ("globex")],
        flavors=[flavor],
        quotas=[QuotaQ("acme", "h100", 48, 0), QuotaQ("globex", "h100", 48, 0)],
        running=[],
        pending=[prod, *dev],
        aging=minutes(60),
    )
    return snap, nodes


@settings(max_examples=200, deadline=None)
@given(prod_waits_for_nodes())
def test_what_passes_a_waiting_prod_cluster_never_takes_a_whole_free_node(
    case: tuple[Snapshot, list[int]],
) -> None:
    """While an aged production cluster waits for whole nodes, the dev requests admitted
    past it fit, worker by worker, on the nodes already in use: placed on the fleet node
    by node (fullest node with room first, as a bin-packing scheduler does), they leave
    every entirely free node free, so they do not delay it."""
    snap, nodes = case
    decision = decide(snap)
    if 1 in decision.admitted:
        return
    assert decision.waiting[1].reason == CAPACITY
    free = list(nodes)
    whole_before = free.count(8)
    by_id = {p.id: p for p in snap.pending}
    for ident in decision.admitted:
        p = by_id[ident]
        need = int(p.worker_gpus)
        for _ in range(p.workers):
            room = [(gpus, n) for n, gpus in enumerate(free) if gpus >= need]
            assert room, (ident, free)
            _, n = min(room)
            free[n] -= need
    assert free.count(8) == whole_before
    event("dev admitted past the prod cluster" if decision.admitted else "nothing passed")


@given(snap=snapshots(), data=st.data())
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_what_fits_on_the_tenants_own_quota_never_fits_less_with_its_cohort(
    snap: Snapshot, data: st.DataObject
) -> None:
    """Submission asks "could it ever fit?" of the tenant's own quota first and reads the
    cohort only when the answer is no (clusters/requests/services.py::request_never_fits):
    sound only if a cohort can never turn a "fits" into a "never fits"."""
    from clusters.admission.ledger import Ledger

    quotas = [
        replace(q, lend_limit=data.draw(st.one_of(st.none(), st.integers(0, 16))))
        for q in snap.quotas
    ]
    full = replace(snap, quotas=quotas, running=[], pending=[])
    for p in snap.pending:
        alone = replace(
            full,
            tenants=[t for t in snap.tenants if t.slug == p.tenant],
            quotas=[q for q in quotas if q.tenant == p.tenant and q.flavor == p.flavor],
            cohort_parents={},
        )
        if not Ledger(alone).never_fits(p):
            event("fits alone")
            assert Ledger(full).never_fits(p) == [], p
        else:
            event("does not fit alone")
