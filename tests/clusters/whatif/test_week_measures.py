"""Issue 49's measures in the what-if simulator, pure: Jain's index over a period, the
work a preempted run loses, the decayed usage the replay hands its pass, and a reclaim
replayed under today's policy and with notice.

Runtime: about a second.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import PROD, FlavorQ, QuotaQ, TenantQ
from clusters.admission.decayed_usage import Span, recent_usage
from clusters.whatif.fairness import entitlements, jain, weekly_jain
from clusters.whatif.metrics import figures
from clusters.whatif.model import EPOCH, Demand, Workload, World
from clusters.whatif.preemption import periodic_kept, stop_after, work_kept
from clusters.whatif.recent import DecayedTotals, Held
from clusters.whatif.simulator import simulate


def test_jain_is_one_when_equal_and_one_over_n_when_one_has_everything() -> None:
    assert jain([3.0, 3.0, 3.0]) == 1.0
    assert jain([5.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain([1.0, 3.0]) == pytest.approx(16 / 20)


def test_entitlements_cap_a_light_tenant_at_what_it_asked_and_share_the_rest_by_weight() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 2.0}
    # c asked for less than its half: it is entitled to what it asked; a and b split the rest.
    got = entitlements({"a": 100.0, "b": 100.0, "c": 10.0}, weights, 100.0)
    assert got == pytest.approx({"a": 45.0, "b": 45.0, "c": 10.0})
    # All asked for more: each its weight's part.
    got = entitlements({"a": 500.0, "b": 500.0, "c": 500.0}, weights, 100.0)
    assert got == pytest.approx({"a": 25.0, "b": 25.0, "c": 50.0})
    assert entitlements({"a": 0.0, "b": 30.0}, weights, 100.0) == {"a": 0.0, "b": 30.0}


def test_weekly_jain_sees_a_tenant_kept_below_its_entitlement() -> None:
    weights = {"heavy": 1.0, "light": 1.0}
    asked = {"heavy": 1000.0, "light": 60.0}
    # Light got all it asked for: fair, whatever heavy got beyond its half.
    assert weekly_jain({"heavy": 140.0, "light": 60.0}, asked, weights) == pytest.approx(1.0)
    # Light got 30 of its 60; heavy has 170 against 140.
    assert weekly_jain({"heavy": 170.0, "light": 30.0}, asked, weights) == pytest.approx(
        jain([170 / 140, 30 / 60])
    )
    assert weekly_jain({"heavy": 10.0}, {"heavy": 10.0}, weights) is None


runs = st.floats(min_value=0, max_value=30 * 86400, allow_nan=False)
intervals = st.floats(min_value=60, max_value=86400, allow_nan=False)
saves = st.floats(min_value=0, max_value=3600, allow_nan=False)
# The machine is shared: generating floats may be slow there, which is no failure.
patient = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@patient
@given(warned=runs, every=intervals, save=saves, extra=st.floats(0, 3600))
def test_with_notice_at_least_the_save_a_run_stopped_when_saved_loses_nothing(
    warned: float, every: float, save: float, extra: float
) -> None:
    grace = save + extra
    stop = warned + stop_after(grace, notice=True, save_seconds=save)
    kept = work_kept(
        stop,
        checkpoint_every=every,
        warned_at=warned,
        grace=grace,
        notice=True,
        save_seconds=save,
    )
    assert kept.lost == 0
    assert kept.kept == warned


@patient
@given(ran=runs, every=intervals, save=saves, grace=st.floats(0, 3600))
def test_without_notice_a_run_loses_the_time_since_its_last_checkpoint(
    ran: float, every: float, save: float, grace: float
) -> None:
    since_checkpoint = ran - math.floor(ran / every) * every
    warned = max(ran - grace, 0.0)
    # Today's warning, which the run does not act on, and a stop without any warning.
    for kept in (
        work_kept(ran, checkpoint_every=every, warned_at=warned, grace=grace, save_seconds=save),
        work_kept(ran, checkpoint_every=every, save_seconds=save),
    ):
        assert kept.lost == pytest.approx(since_checkpoint)
        assert kept.kept + kept.lost == pytest.approx(ran)
        assert 0 <= kept.lost < every


def test_a_notice_shorter_than_the_save_is_no_better_than_none() -> None:
    assert stop_after(60, notice=True, save_seconds=300) == 60
    kept = work_kept(
        5000, checkpoint_every=3600, warned_at=4940, grace=60, notice=True, save_seconds=300
    )
    assert (kept.kept, kept.lost) == (3600, 1400)
    # Never checkpointed periodically: all of it; carrying no work: nothing counted.
    assert work_kept(5000, checkpoint_every=math.inf).lost == 5000
    assert work_kept(5000, checkpoint_every=None).lost == 0
    assert periodic_kept(7300, 3600) == 7200


def test_decayed_totals_equal_the_pass_sums_over_every_span() -> None:
    half_life = timedelta(hours=10)
    totals = DecayedTotals(half_life)
    spans = [
        (Held("a", 1, "h100", Decimal(8), 0.0), 3600.0),
        (Held("b", 2, "h100", Decimal(4), 1800.0), 7200.0),
        (Held("a", 3, "l4", Decimal(1), 5000.0), 20000.0),
    ]
    for span, end in spans:
        totals.ended(span, end)
    live = [Held("b", 2, "h100", Decimal(16), 10000.0)]
    now = 30000.0
    got = totals.usage(now, live)
    at = lambda s: EPOCH + timedelta(seconds=s)  # noqa: E731
    want = recent_usage(
        [Span(s.tenant, s.owner, s.flavor, s.gpus, at(s.start), at(end)) for s, end in spans]
        + [Span(s.tenant, s.owner, s.flavor, s.gpus, at(s.start)) for s in live],
        now=at(now),
        half_life=half_life,
    )
    assert got.gpu_hours == pytest.approx(want.gpu_hours)
    assert got.owner_gpu_hours == pytest.approx(want.owner_gpu_hours)


def _two_tenants(gpus: int = 16) -> World:
    flavor = FlavorQ("h100", 8, gpus // 8)
    return World(
        flavors=[flavor],
        tenants=[TenantQ("a", cohort="lab"), TenantQ("b", cohort="lab")],
        quotas=[QuotaQ(t, "h100", gpus // 2, borrow_limit=gpus // 2) for t in ("a", "b")],
    )


def _gang(ident: int, tenant: str, arrival: float, hold: float, nodes: int = 1) -> Demand:
    return Demand(
        id=ident,
        tenant=tenant,
        owner=1,
        kind=PROD,
        flavors=("h100",),
        workers=nodes,
        arrival=arrival,
        hold=hold,
        checkpoint_every=3600.0,
        save_seconds=180.0,
    )


def test_a_reclaimed_borrower_loses_work_today_and_none_with_notice() -> None:
    # a borrows the whole pool at 0 for 10 h; b asks for its half at 1.5 h, so one of a's
    # gangs is reclaimed: warned at 1.5 h, stopped at 1.75 h today (0.75 h since its
    # checkpoint at 1 h, 8 GPUs: 6 GPU-hours lost) or once saved with notice (none lost).
    world = _two_tenants()
    demands = [
        _gang(1, "a", 0.0, 36000.0),
        _gang(2, "a", 0.0, 36000.0),
        _gang(3, "b", 5400.0, 3600.0),
    ]
    workload = Workload(EPOCH, 86400.0, demands)
    today = simulate(world, workload, pass_seconds=60)
    fig = figures(world, today)
    assert fig.lost_gpu_hours == pytest.approx(6.0)
    assert (fig.preemptions_max, fig.reclaims) == (1, 1)
    victim = next(r for r in today.records.values() if r.reclaimed)
    # It does again what it lost: 10 h of work and the 0.75 h lost.
    assert victim.gpu_seconds == pytest.approx(8 * (36000 + 2700))

    # With notice, queued again at the back: it saves in 3 min and b starts then.
    noticed = replace(world, notice=timedelta(minutes=10), keep_place=False)
    after = simulate(noticed, workload, pass_seconds=60)
    assert figures(noticed, after).lost_gpu_hours == 0
    victim = next(r for r in after.records.values() if r.reclaimed)
    # It ran 1.5 h, saved for 3 min (no work), and ran the 8.5 h left.
    assert victim.gpu_seconds == pytest.approx(8 * (36000 + 180))
    assert [p.start for p in after.placements if p.id == 3] == [5400 + 180]


def test_requeued_in_its_place_a_victim_waits_behind_the_request_it_was_reclaimed_for() -> None:
    # The victim, back in line by its submission time, is aged and older than b's
    # request; b's request is promised what the reclaim frees (earmarked), and promised
    # requests go before aged ones, so b starts once the victim has saved (within the
    # notice) and the victim waits for room instead of taking its GPUs back (and being
    # reclaimed again).
    world = replace(_two_tenants(), notice=timedelta(minutes=10))
    demands = [
        _gang(1, "a", 0.0, 36000.0),
        _gang(2, "a", 0.0, 36000.0),
        _gang(3, "b", 5400.0, 3600.0),
    ]
    outcome = simulate(world, Workload(EPOCH, 86400.0, demands), pass_seconds=60)
    fig = figures(world, outcome)
    assert fig.lost_gpu_hours == 0
    assert fig.preemptions_max == 1
    (start,) = [p.start for p in outcome.placements if p.id == 3]
    assert 5400.0 < start <= 5400.0 + 600.0


def test_the_replay_hands_the_pass_the_decayed_usage() -> None:
    # a held the whole pool for a day; then a and b each ask for all of it at one moment,
    # a's request first. Today's order (what each holds now: nothing) takes a's first;
    # with a half-life the pass sees a's day and takes b's first.
    world = _two_tenants()
    demands = [
        _gang(1, "a", 0.0, 86400.0, nodes=2),
        _gang(2, "a", 90000.0, 3600.0, nodes=2),
        _gang(3, "b", 90000.0, 3600.0, nodes=2),
    ]
    workload = Workload(EPOCH, 2 * 86400.0, demands)

    def first(w: World) -> int:
        placements = [p for p in simulate(w, workload, pass_seconds=60).placements if p.id != 1]
        return min(placements, key=lambda p: p.start).id

    assert first(world) == 2
    assert first(replace(world, half_life=timedelta(hours=24))) == 3
