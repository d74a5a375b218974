"""Usage-decayed fair share: the decay's closed form, the queue order it gives between
tenants and between a tenant's engineers, its off switch, and, simulated pass after pass
under constant demand, GPU-hours shared in proportion to the tenants' weights."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import FlavorQ, QuotaQ, Running, Snapshot, TenantQ, decide
from clusters.admission.decayed_usage import (
    RecentUsage,
    Span,
    decay,
    decayed_gpu_hours,
    half_life_words,
    recent_usage,
)
from clusters.admission.explain import order_notes
from clusters.admission.fairshare import fair_share
from clusters.admission.recorded_pass import RecordedPass
from tests.clusters.admission.helpers import NOW, pending, running, snapshot

DAY = timedelta(days=1)
WEEK = timedelta(days=7)
HOUR = timedelta(hours=1)


# -- the decay ---------------------------------------------------------------------------


def test_an_hour_weighs_half_a_half_life_later() -> None:
    assert decay(timedelta(0), WEEK) == 1.0
    assert decay(WEEK, WEEK) == pytest.approx(0.5)
    assert decay(2 * WEEK, WEEK) == pytest.approx(0.25)


def test_the_closed_form_is_the_integral() -> None:
    start, end = NOW - 3 * DAY, NOW - DAY
    steps = 20_000
    width = (end - start) / steps
    numeric = sum(
        4 * decay(NOW - (start + (i + 0.5) * width), WEEK) * width / HOUR for i in range(steps)
    )
    assert decayed_gpu_hours(Decimal(4), start, end, NOW, WEEK) == pytest.approx(numeric)


def test_spans_split_anywhere_sum_to_the_whole() -> None:
    start, middle, end = NOW - 10 * DAY, NOW - 4 * DAY, NOW - HOUR
    whole = decayed_gpu_hours(2, start, end, NOW, WEEK)
    parts = decayed_gpu_hours(2, start, middle, NOW, WEEK) + decayed_gpu_hours(
        2, middle, end, NOW, WEEK
    )
    assert whole == pytest.approx(parts)


def test_gpus_held_for_ever_average_to_themselves() -> None:
    # The decayed hours of 8 GPUs held since long ago, over the mean life: 8 GPUs.
    usage = recent_usage(
        [Span("acme", 1, "h100", Decimal(8), NOW - 100 * WEEK)], now=NOW, half_life=WEEK
    )
    assert usage.gpu_hours["acme", "h100"] == pytest.approx(8 * 7 * 24 / math.log(2))
    assert usage.held()["acme", "h100"] == pytest.approx(8)


def test_an_open_span_runs_to_now_and_nothing_counts_after_now() -> None:
    open_span = decayed_gpu_hours(1, NOW - DAY, None, NOW, WEEK)
    assert open_span == decayed_gpu_hours(1, NOW - DAY, NOW, NOW, WEEK)
    assert open_span == decayed_gpu_hours(1, NOW - DAY, NOW + DAY, NOW, WEEK)
    assert decayed_gpu_hours(1, NOW + HOUR, NOW + DAY, NOW, WEEK) == 0.0
    # A day's hours weigh between 2 ** (-1 / 7) (the oldest) and 1 (the newest).
    assert 24 * 2 ** (-1 / 7) < open_span < 24


def test_off_weighs_nothing() -> None:
    off = RecentUsage(None, {("acme", "h100"): 100.0}, {("acme", 1): 100.0})
    assert not off.on and off.held() == {} and off.owner_use("acme", 1) == 0.0


def test_half_lives_in_words() -> None:
    assert half_life_words(WEEK) == "7 days"
    assert half_life_words(DAY) == "1 day"
    assert half_life_words(timedelta(hours=12)) == "12 hours"
    assert half_life_words(HOUR) == "1 hour"


# -- the order ---------------------------------------------------------------------------


def _heavy_past(slug: str, gpus: int = 16) -> RecentUsage:
    """``slug`` held ``gpus`` H100s for the last week, nothing held now."""
    return recent_usage(
        [Span(slug, 1, "h100", Decimal(gpus), NOW - WEEK, NOW - HOUR)], now=NOW, half_life=WEEK
    )


def _two_heads(recent: RecentUsage) -> Snapshot:
    # Room for one 8-GPU request; acme's asked first.
    return snapshot(
        flavors=[FlavorQ("h100", 8, 4, free_gpus=Decimal(8))],
        pending=[
            pending(1, "acme", 8, created_at=NOW - timedelta(minutes=5)),
            pending(2, "globex", 8, created_at=NOW - timedelta(minutes=2)),
        ],
        recent=recent,
    )


def test_recent_usage_puts_the_heavy_user_after_the_light_one() -> None:
    assert decide(_two_heads(_heavy_past("acme"))).admitted == [2]


def test_off_the_order_is_todays_whatever_the_history() -> None:
    heavy = _heavy_past("acme")
    off = replace(heavy, half_life=None)
    assert decide(_two_heads(off)).admitted == [1]  # same share: the older request
    assert decide(_two_heads(off)).waiting == decide(_two_heads(RecentUsage())).waiting


def test_the_weight_scales_recent_usage() -> None:
    # acme used twice globex's GPUs recently, and weighs three times as much.
    both = recent_usage(
        [
            Span("acme", 1, "h100", Decimal(16), NOW - WEEK, NOW - HOUR),
            Span("globex", 2, "h100", Decimal(8), NOW - WEEK, NOW - HOUR),
        ],
        now=NOW,
        half_life=WEEK,
    )
    snap = _two_heads(both)
    assert decide(snap).admitted == [2]
    heavier = replace(snap, tenants=[TenantQ("acme", weight=Decimal(3)), TenantQ("globex")])
    assert decide(heavier).admitted == [1]


def test_engineers_who_used_less_recently_go_first_within_a_tenant() -> None:
    history = [Span("acme", 7, "h100", Decimal(8), NOW - WEEK, NOW - HOUR)]
    snap = snapshot(
        flavors=[FlavorQ("h100", 8, 4, free_gpus=Decimal(1))],
        pending=[
            pending(1, "acme", 1, owner=7, created_at=NOW - timedelta(minutes=5)),
            pending(2, "acme", 1, owner=8, created_at=NOW - timedelta(minutes=2)),
        ],
        recent=recent_usage(history, now=NOW, half_life=WEEK),
    )
    assert decide(snap).admitted == [2]
    assert decide(replace(snap, recent=RecentUsage())).admitted == [1]
    # Priority still comes first, and so does a request that has aged.
    urgent = replace(snap, pending=[replace(snap.pending[0], priority=5), snap.pending[1]])
    assert decide(urgent).admitted == [1]
    aged = replace(snap, pending=[replace(snap.pending[0], created_at=NOW - DAY), snap.pending[1]])
    assert decide(aged).admitted == [1]


def test_the_recorded_pass_judges_a_candidate_in_the_same_order() -> None:
    snap = _two_heads(_heavy_past("acme"))
    recorded = RecordedPass(snap)
    assert recorded.decision.admitted == decide(snap).admitted == [2]
    # With no room at all, both wait: globex's first, and acme's page says why.
    full = replace(snap, flavors=[FlavorQ("h100", 8, 4, free_gpus=Decimal(0))])
    waiting = decide(full).waiting
    assert (waiting[2].position, waiting[1].position) == (1, 1)
    note = order_notes(RecordedPass(full), viewer="acme")[1]
    assert "acme used 1,923 GPU-hours in the last weeks (half-life 7 days)" in note
    assert "acme's requests go after it" in note and "globex" not in note


def test_the_fair_share_page_shows_recent_hours_and_standing() -> None:
    snap = _two_heads(_heavy_past("acme"))
    (cohort,) = fair_share(snap, lend_limits={})
    assert cohort.half_life == "7 days"
    globex, acme = cohort.tenants  # the next in line first
    assert (globex.tenant, acme.tenant) == ("globex", "acme")
    # 16 GPUs for a week less an hour, a week's half-life: 16 x 168 / ln 2 x (1/2 - ...).
    assert round(acme.recent_gpu_hours) == 1923 and acme.recent_part == 1.0
    assert acme.standing == "over its share: 100% used, 50% by weight"
    assert globex.standing == "under its share: 0% used, 50% by weight"
    # Its share counts its recent average of GPUs held: about 8 of 32 H100s.
    assert acme.share == pytest.approx(1923.015 / (168 / math.log(2)) / 32, rel=1e-4)
    assert globex.share == 0.0
    (cohort_off,) = fair_share(replace(snap, recent=RecentUsage()), lend_limits={})
    assert cohort_off.half_life == "" and all(t.standing == "" for t in cohort_off.tenants)


# -- constant demand, pass after pass ---------------------------------------------------

FLEET = 24


def _simulate(
    weights: list[int],
    hours_per_run: list[int],
    *,
    half_life: timedelta | None,
    passes: int,
    history: tuple[Span, ...] = (),
) -> list[float]:
    """Each tenant always has more 1-GPU requests waiting than the fleet holds; one pass
    an hour; tenant i's runs last ``hours_per_run[i]``. The GPU-hours each used."""
    slugs = [f"t{i}" for i in range(len(weights))]
    tenants = [TenantQ(s, cohort=s, weight=Decimal(w)) for s, w in zip(slugs, weights, strict=True)]
    quotas = [QuotaQ(s, "gpu", FLEET) for s in slugs]
    start = NOW
    spans: list[Span] = list(history)
    live: dict[int, tuple[Running, int]] = {}  # id: (run, index of its span)
    # Ended spans folded into decayed GPU-hours as of this pass (what recent_usage would
    # sum over them, without summing a growing history at every pass).
    ended: dict[tuple[str, str], float] = {}
    open_spans = list(history)
    next_id = 1
    for step in range(passes):
        now = start + step * HOUR
        for rid, (_run, index) in list(live.items()):
            span = spans[index]
            if span.end is not None and span.end <= now:
                del live[rid]
        if half_life is not None:
            ended = {k: v * decay(HOUR, half_life) for k, v in ended.items()} if step else {}
            for span in [s for s in open_spans if s.end is not None and s.end <= now]:
                open_spans.remove(span)
                key = (span.tenant, span.flavor)
                ended[key] = ended.get(key, 0.0) + decayed_gpu_hours(
                    span.gpus, span.start, span.end, now, half_life
                )
        waiting = []
        for slug in slugs:
            for _ in range(FLEET):
                waiting.append(pending(next_id, slug, 1, flavor="gpu", created_at=now - HOUR))
                next_id += 1
        held = sum(run.gpus for run, _ in live.values())
        recent = RecentUsage()
        if half_life is not None:
            fresh = recent_usage(open_spans, now=now, half_life=half_life).gpu_hours
            hours = {k: ended.get(k, 0.0) + fresh.get(k, 0.0) for k in {*ended, *fresh}}
            recent = RecentUsage(half_life, hours)
        snap = Snapshot(
            now=now,
            tenants=tenants,
            flavors=[FlavorQ("gpu", 1, FLEET, free_gpus=FLEET - held)],
            quotas=quotas,
            running=[run for run, _ in live.values()],
            pending=waiting,
            aging=timedelta(days=10_000),  # aged requests go first whatever the shares
            recent=recent,
        )
        by_id = {p.id: p for p in waiting}
        for pid in decide(snap, explain=False).admitted:
            p = by_id[pid]
            i = slugs.index(p.tenant)
            end = now + hours_per_run[i] * HOUR
            spans.append(Span(p.tenant, p.owner, "gpu", p.gpus, now, end))
            open_spans.append(spans[-1])
            live[pid] = (running(pid, p.tenant, 1, flavor="gpu", admitted_at=now), len(spans) - 1)
    stop = start + passes * HOUR
    used = dict.fromkeys(slugs, 0.0)
    for s in spans[len(history) :]:
        used[s.tenant] += float(s.gpus) * ((min(s.end or stop, stop) - s.start) / HOUR)
    return [used[s] for s in slugs]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(1, 3), min_size=2, max_size=3).flatmap(
        lambda weights: st.tuples(
            st.just(weights),
            st.lists(st.integers(1, 6), min_size=len(weights), max_size=len(weights)),
            st.integers(0, FLEET),
        )
    )
)
def test_under_constant_demand_gpu_hours_converge_to_the_weights(
    case: tuple[list[int], list[int], int],
) -> None:
    weights, hours_per_run, burst = case
    # The first tenant may come out of a week of heavy use: it pays that back first.
    history = (Span("t0", 1, "gpu", Decimal(burst), NOW - WEEK, NOW),) if burst else ()
    used = _simulate(weights, hours_per_run, half_life=DAY, passes=400, history=history)
    total = sum(used)
    assert total == pytest.approx(400 * FLEET, rel=0.05)  # the fleet stays full
    for w, u in zip(weights, used, strict=True):
        assert u / total == pytest.approx(w / sum(weights), abs=0.05)


def test_a_tenant_back_from_heavy_use_lets_the_other_catch_up() -> None:
    history = (Span("t0", 1, "gpu", Decimal(FLEET), NOW - WEEK, NOW),)
    on = _simulate([1, 1], [2, 2], half_life=DAY, passes=24, history=history)
    off = _simulate([1, 1], [2, 2], half_life=None, passes=24, history=history)
    assert on[1] > 2 * on[0]  # the first day mostly goes to the one that waited
    assert off[0] == pytest.approx(off[1], rel=0.1)  # off: history does not count
