"""The recorded pass answers the dry-run exactly as a whole pass with the candidate added.

Random snapshots (the property tests' generator: cohorts, borrowing, per-engineer caps,
CPU and memory quotas, known and unknown capacity, earmarked and aged requests, requests
that can never fit) and random candidates (any tenant, owner, priority, kind, flavor and
size, including an unknown flavor and one too large for the fleet) are judged both ways;
checkpoints are taken every few steps so that forking and replaying are exercised.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from clusters.admission import Pending, Snapshot, TenantQ, decide, dry_run
from clusters.admission.recorded_pass import RecordedPass
from clusters.admission.verdict import _judge
from tests.clusters.admission.helpers import pending, snapshot
from tests.clusters.admission.test_properties import PER_NODE, snapshots


def _candidate(snap: Snapshot, data: st.DataObject, *, pk: int = -1, flavor: str | None = None):
    slugs = [t.slug for t in snap.tenants]
    # Mostly known tenants and flavors: a request that can never fit is decided early.
    tenant = data.draw(st.sampled_from([*slugs, *slugs, *slugs, "newcomer"]))
    flavor = flavor or data.draw(st.sampled_from(["h100", "h100", "h100", "l4", "l4", "a100"]))
    kind = data.draw(st.sampled_from(["dev", "dev", "dev", "prod"]))
    workers = data.draw(st.sampled_from([1, 1, 1, 2, 3, 6]))
    per_worker = PER_NODE.get(flavor, 8) if kind == "prod" else 1
    gpus = workers * per_worker
    return Pending(
        id=pk,
        tenant=tenant,
        owner=data.draw(st.integers(1, 3)),
        flavor=flavor,
        kind=kind,
        gpus=Decimal(gpus),
        created_at=snap.now,
        cpu=Decimal(4 * gpus),
        memory_gib=Decimal(16 * gpus),
        priority=data.draw(st.integers(-1, 3)),
        workers=workers,
        worker_gpus=Decimal(per_worker),
        ttl=data.draw(st.sampled_from([None, timedelta(hours=2)])),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(max_pending=40), st.data())
def test_recorded_verdicts_equal_the_whole_pass(snap: Snapshot, data: st.DataObject) -> None:
    every = data.draw(st.integers(1, 5))
    recorded = RecordedPass(snap, every=every)
    # Recording does not change the pass.
    assert recorded.decision == decide(snap)
    for _ in range(3):
        candidate = _candidate(snap, data)
        fast = recorded.judge(candidate)
        event("forked" if fast is not None else "whole pass")
        whole = _judge(snap, candidate, None)
        if fast is not None:
            event(f"verdict {fast.verdict}")
            assert fast == whole
        alternatives = [
            _candidate(snap, data, flavor=name)
            for name in ("h100", "l4")
            if name != candidate.flavor
        ]
        assert dry_run(snap, candidate, alternatives, recorded=recorded) == dry_run(
            snap, candidate, alternatives
        )
    # Judging forks: the recording is unchanged by it.
    assert recorded.decision == decide(snap)


def test_a_verdict_forks_the_recorded_pass_instead_of_running_it() -> None:
    # Ten tenants' worth of queue; the candidate waits behind acme's quota.
    snap = snapshot(
        tenants=[TenantQ("acme"), TenantQ("globex")],
        pending=[pending(i, "acme" if i % 2 else "globex", 4) for i in range(1, 41)],
    )
    recorded = RecordedPass(snap, every=4)
    candidate = replace(snap.pending[0], id=-1, created_at=snap.now, owner=9)
    fast = recorded.judge(candidate)
    assert fast is not None
    assert fast == _judge(snap, candidate, None)
    assert fast.verdict == "will_queue" and fast.position is not None


def test_the_whole_pass_answers_when_the_candidate_counts_against_later_requests_caps() -> None:
    # bob's queued request has a lower priority than the candidate: the candidate would
    # count against its per-engineer cap, which only a whole pass can tell.
    snap = snapshot(
        tenants=[TenantQ("acme", max_dev_clusters_per_user=1)],
        pending=[pending(1, "acme", 1, owner=7, priority=0)],
    )
    recorded = RecordedPass(snap)
    candidate = replace(snap.pending[0], id=-1, created_at=snap.now, priority=2)
    assert recorded.judge(candidate) is None
    assert dry_run(snap, candidate, recorded=recorded) == dry_run(snap, candidate)


def test_an_empty_queue_and_a_never_fitting_candidate() -> None:
    snap = snapshot()
    recorded = RecordedPass(snap)
    fits = pending(-1, "acme", 1, created_at=snap.now)
    assert recorded.judge(fits) == _judge(snap, fits, None)
    huge = pending(-1, "acme", 400, created_at=snap.now)
    verdict = recorded.judge(huge)
    assert verdict is not None and verdict.verdict == "never_fits"
    assert verdict == _judge(snap, huge, None)
