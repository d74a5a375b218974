"""Flavor fungibility in the pure admission core: a request that accepts several flavors.

Scenarios first (the first flavor that fits now, never two; the standing on each flavor
while it waits; the dry-run names the flavor), then properties over random snapshots in
which some requests accept a second flavor: each request is charged once, on one flavor,
whole; it is admitted on a less preferred flavor only when, at its turn in that pass, each
more preferred flavor alone would have waited; the dry-run agrees with the pass.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import (
    CAPACITY,
    RECLAIM_PENDING,
    FlavorOption,
    Pending,
    QuotaQ,
    Snapshot,
    decide,
    dry_run,
)
from clusters.admission.decide import PassState
from clusters.admission.eta import Wait
from clusters.admission.ledger import Pool
from clusters.admission.queue_order import HeadKey
from clusters.admission.recorded_pass import RecordedPass
from clusters.admission.verdict import _judge
from tests.clusters.admission.helpers import H100, L4, NOW, minutes, pending, running, snapshot
from tests.clusters.admission.test_properties import PER_NODE, snapshots
from tests.clusters.admission.test_recorded_pass import _candidate

L4_OPTION = FlavorOption("l4", Decimal(1), Decimal(4), Decimal(16))


def _either(id: int, tenant: str = "acme", **kw: object) -> Pending:
    """One dev GPU, h100 preferred, l4 accepted."""
    return pending(id, tenant, 1, fallbacks=(L4_OPTION,), **kw)


def test_takes_the_first_flavor_that_fits_now() -> None:
    snap = snapshot(pending=[_either(1)])
    decision = decide(snap)
    assert decision.admitted == [1]
    assert decision.placed == {1: "h100"}
    assert decision.ledger == {("acme", "h100"): Decimal(1)}


def test_falls_back_to_l4_when_h100_is_full_and_is_charged_there_only() -> None:
    full = replace(H100, free_gpus=Decimal(0))
    snap = snapshot(flavors=[full, L4], pending=[_either(1)])
    decision = decide(snap)
    assert decision.placed == {1: "l4"}
    assert decision.ledger == {("acme", "l4"): Decimal(1)}


def test_falls_back_when_the_first_flavor_is_over_quota() -> None:
    snap = snapshot(running=[running(10, "acme", 16)], pending=[_either(1)])
    decision = decide(snap)
    assert decision.placed == {1: "l4"}
    assert decision.ledger[("acme", "l4")] == Decimal(1)
    assert decision.ledger[("acme", "h100")] == Decimal(16)


def test_borrowing_on_the_first_flavor_comes_before_the_second() -> None:
    # globex is over its nominal h100 quota but may borrow: fits now, so h100.
    quotas = [QuotaQ("acme", "h100", 16, 0), QuotaQ("globex", "h100", 0, 8)]
    quotas.append(QuotaQ("globex", "l4", 2, 0))
    snap = snapshot(quotas=quotas, pending=[_either(1, "globex")])
    assert decide(snap).placed == {1: "h100"}


def test_waits_on_every_flavor_with_a_standing_on_each() -> None:
    full_h100 = replace(H100, free_gpus=Decimal(0))
    full_l4 = replace(L4, free_gpus=Decimal(0))
    snap = snapshot(
        flavors=[full_h100, full_l4],
        running=[
            running(10, "acme", 8, expires_at=NOW + minutes(90)),
            running(11, "acme", 1, flavor="l4", expires_at=NOW + minutes(20)),
        ],
        pending=[
            pending(2, "acme", 1, flavor="l4", created_at=NOW - minutes(5), ttl=minutes(30)),
            _either(1),
        ],
    )
    decision = decide(snap)
    assert decision.admitted == []
    status = decision.waiting[1]
    assert [f.flavor for f in status.flavors] == ["h100", "l4"]
    h100, l4 = status.flavors
    assert (h100.position, l4.position) == (1, 2)  # request 2 is ahead of it on l4
    assert h100.reason == l4.reason == CAPACITY
    assert status.reason == CAPACITY
    assert "any of h100, l4" in status.message
    assert "On h100:" in status.message and "On l4:" in status.message
    assert h100.eta == NOW + minutes(90)
    assert l4.eta == NOW + minutes(50)  # after request 2, which takes the next l4 first
    assert status.eta == l4.eta  # the best of the two is the headline
    assert status.flavor_position == h100.position
    # A single-flavor request waits as it always did: no per-flavor standing.
    assert decision.waiting[2].flavors == ()


def test_tries_the_next_flavor_before_reclaiming_borrowed_quota() -> None:
    # acme is within its nominal h100 quota, but globex borrows the cohort's h100s:
    # l4 fits now, so no borrower is suspended.
    quotas = [QuotaQ("acme", "h100", 8, 0), QuotaQ("globex", "h100", 0, 8)]
    quotas.append(QuotaQ("acme", "l4", 2, 0))
    borrower = running(10, "globex", 8)
    snap = snapshot(quotas=quotas, running=[borrower], pending=[_either(1)])
    decision = decide(snap)
    assert decision.placed == {1: "l4"}
    assert decision.reclaim == []
    # With l4 full too, it asks for h100 back instead.
    snap = replace(snap, flavors=[H100, replace(L4, free_gpus=Decimal(0))])
    decision = decide(snap)
    assert decision.admitted == []
    assert decision.waiting[1].reason == RECLAIM_PENDING
    assert [r.id for r in decision.reclaim] == [10]
    assert decision.earmarked == [1]


def test_dry_run_names_the_flavor_it_would_get() -> None:
    full = replace(H100, free_gpus=Decimal(0))
    verdict = dry_run(snapshot(flavors=[full, L4]), _either(-1))
    assert verdict.verdict == "fits_now"
    assert verdict.flavor == "l4"
    assert verdict.summary.startswith("Starts on l4 now (1 GPU charged)")
    verdict = dry_run(snapshot(), _either(-1))
    assert verdict.flavor == "h100"
    waiting = dry_run(snapshot(flavors=[full, replace(L4, free_gpus=Decimal(0))]), _either(-1))
    assert waiting.verdict == "will_queue"
    assert [f.flavor for f in waiting.flavors] == ["h100", "l4"]


# -- properties ----------------------------------------------------------------------


def _other(flavor: str) -> str:
    return "l4" if flavor == "h100" else "h100"


@st.composite
def fungible_snapshots(draw: st.DrawFn, max_pending: int = 20) -> Snapshot:
    """Random snapshots in which some requests also accept the other flavor, shaped for
    it (a prod worker takes a whole node of either)."""
    snap = draw(snapshots(max_pending=max_pending))
    pending = []
    for p in snap.pending:
        if p.flavor in PER_NODE and draw(st.booleans()):
            other = _other(p.flavor)
            per_worker = Decimal(PER_NODE[other]) if p.kind == "prod" else p.worker_gpus
            gpus = per_worker * p.workers
            option = FlavorOption(other, gpus, Decimal(3 * gpus), Decimal(12 * gpus), per_worker)
            p = replace(p, fallbacks=(option,))
        pending.append(p)
    return replace(snap, pending=pending)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fungible_snapshots())
def test_charged_once_on_one_accepted_flavor_whole(snap: Snapshot) -> None:
    decision = decide(snap)
    by_id = {p.id: p for p in snap.pending}
    assert set(decision.placed) == set(decision.admitted)
    assert not set(decision.admitted) & set(decision.waiting)
    assert set(decision.admitted) | set(decision.waiting) == set(by_id)
    expected: dict[tuple[str, str], Decimal] = {}
    for r in snap.running:
        expected[r.tenant, r.flavor] = expected.get((r.tenant, r.flavor), Decimal(0)) + r.gpus
    for pid in decision.admitted:
        (chosen,) = [o for o in by_id[pid].options() if o.flavor == decision.placed[pid]]
        key = (chosen.tenant, chosen.flavor)
        expected[key] = expected.get(key, Decimal(0)) + chosen.gpus
    assert decision.ledger == {k: v for k, v in expected.items() if v}
    for pid, status in decision.waiting.items():
        options = by_id[pid].options()
        if len(options) > 1:
            assert [f.flavor for f in status.flavors] == [o.flavor for o in options]
            etas = [f.eta for f in status.flavors if f.eta is not None]
            assert status.eta == (min(etas) if etas else None)
        else:
            assert status.flavors == ()
    # Known free capacity is never exceeded on any flavor.
    for flavor in snap.flavors:
        if flavor.free_gpus is None:
            continue
        taken = sum(
            (
                o.gpus
                for pid in decision.admitted
                for o in by_id[pid].options()
                if o.flavor == flavor.name == decision.placed[pid]
            ),
            Decimal(0),
        )
        assert taken <= flavor.free_gpus


class _Checker:
    """Sees every step; when a request is admitted on a less preferred flavor, checks
    that each more preferred one, asked alone from the state before that step, waits."""

    def __init__(self) -> None:
        self.before: PassState | None = None
        self.fallbacks_taken = 0

    def before_step(self, state: PassState) -> None:
        self.before = state.fork()

    def after_step(
        self, state: PassState, key: HeadKey, p: Pending, outcome: tuple[str, str, Pool] | None
    ) -> None:
        if outcome is not None:
            return
        chosen = state.placed[p.id]
        options = p.options()
        flavors = [o.flavor for o in options]
        assert chosen.flavor in flavors
        assert self.before is not None
        for option in options[: flavors.index(chosen.flavor)]:
            self.fallbacks_taken += 1
            alone = replace(option, fallbacks=())
            assert self.before.fork().step(alone) is not None, (p.id, option.flavor)

    def finished(self, state: PassState, admitted: list[Pending], waits: list[Wait]) -> None:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fungible_snapshots())
def test_a_less_preferred_flavor_only_when_every_preferred_one_did_not_fit(
    snap: Snapshot,
) -> None:
    checker = _Checker()
    decision = PassState(snap).run(checker)
    assert decision == decide(snap)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fungible_snapshots(max_pending=10), st.data())
def test_dry_run_of_a_fungible_request_agrees_with_the_pass(
    snap: Snapshot, data: st.DataObject
) -> None:
    if not snap.pending:
        return
    candidate = data.draw(st.sampled_from(list(snap.pending)))
    rest = [p for p in snap.pending if p.id != candidate.id]
    verdict = dry_run(replace(snap, pending=rest), candidate)
    decision = decide(snap)
    if verdict.verdict == "never_fits":
        return
    if candidate.id in decision.placed:
        assert verdict.verdict == "fits_now"
        assert verdict.flavor == decision.placed[candidate.id]
    else:
        assert verdict.verdict == "will_queue"
        assert verdict.flavors == decision.waiting[candidate.id].flavors


def test_without_fallbacks_a_request_is_decided_as_before() -> None:
    # The same snapshot with and without an unused second flavor on an admitted request.
    snap = snapshot(pending=[pending(1, "acme", 1), pending(2, "acme", 1, flavor="l4")])
    plain = decide(snap)
    assert plain.placed == {1: "h100", 2: "l4"}
    assert all(status.flavors == () for status in plain.waiting.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fungible_snapshots(max_pending=30), st.data())
def test_recorded_verdicts_equal_the_whole_pass_with_fungible_requests_queued(
    snap: Snapshot, data: st.DataObject
) -> None:
    recorded = RecordedPass(snap, every=data.draw(st.integers(1, 5)))
    assert recorded.decision == decide(snap)
    for _ in range(3):
        candidate = _candidate(snap, data)
        if data.draw(st.booleans()) and candidate.flavor in PER_NODE:
            option = FlavorOption(_other(candidate.flavor), candidate.gpus, worker_gpus=Decimal(1))
            if candidate.kind == "dev":
                candidate = replace(candidate, fallbacks=(option,))
        fast = recorded.judge(candidate)
        if fast is not None:
            # Several flavors: only "never fits" (on its first) is answered without a pass.
            assert not candidate.fallbacks or fast.verdict == "never_fits"
            assert fast == _judge(snap, candidate, None)
    assert recorded.decision == decide(snap)
