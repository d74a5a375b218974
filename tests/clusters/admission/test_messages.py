"""Messages in plain words: counts agree with their nouns in every message admission
writes (queue reasons, never-fits reasons, reclaim warnings, verdicts, alternatives).

The words helper is tested directly, then every message of random passes and dry-runs
is scanned for the faults users met: "1 h100 GPUs", "only 0 of ...", "cluster(s)".
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.admission import Pending, Snapshot, decide, dry_run
from clusters.admission.counts_in_words import count, number, plural
from tests.clusters.admission.helpers import NOW, minutes, pending, running, snapshot
from tests.clusters.admission.test_properties import PER_NODE, snapshots

# A count of exactly one followed (perhaps after a flavor name) by a plural noun.
ONE_WITH_PLURAL = re.compile(
    r"(?<![\w.])1 (?:[a-z0-9-]+ )?(?:GPUs|nodes|clusters|workers|CPU cores|pods)\b"
)
# ... and the other way round: a count other than one with a singular noun.
MANY_WITH_SINGULAR = re.compile(
    r"(?<![\w.])(?:0|[2-9]|\d{2,}|\d+\.\d+) "
    r"(?:[a-z0-9-]+ )?(?:GPU|node|cluster|worker|pod)\b(?!s|-)"
)
NOT_PLAIN = re.compile(r"\(s\)|\bonly 0 of\b")
# Verdict phrases users met: "1xL4 in now" (with a multiplication sign), "in in less than
# a minute", "expected to start about 2 h".
NOT_ENGLISH = re.compile(
    r"\N{MULTIPLICATION SIGN}|\bin now\b|\bin in\b|\bstart (?:about|now\b)|\bin unknown\b"
)


def _faults(message: str) -> list[str]:
    return [
        match.group(0)
        for pattern in (ONE_WITH_PLURAL, MANY_WITH_SINGULAR, NOT_PLAIN, NOT_ENGLISH)
        for match in pattern.finditer(message)
    ]


def test_words() -> None:
    assert count(1, "h100 GPU") == "1 h100 GPU"
    assert count(2, "h100 GPU") == "2 h100 GPUs"
    assert count(Decimal("1.000"), "GPU") == "1 GPU"
    assert count(Decimal("0.5"), "GPU") == "0.5 GPUs"
    assert count(0, "dev cluster") == "0 dev clusters"
    assert count(Decimal("2.50"), "GPU-hour") == "2.5 GPU-hours"
    assert number(Decimal("10")) == "10" and number(Decimal("1E+1")) == "10"
    assert plural("GiB", 3) == "GiB"


def test_the_scanner_finds_the_faults_users_met() -> None:
    assert _faults("It needs 1 h100 GPUs; acme may hold at most 2.")
    assert _faults("but only 0 of the research cohort's 32 are unused.")
    assert _faults("You already have 2 dev cluster(s) in acme")
    assert _faults("0 h100 node is free")
    assert not _faults("It needs 1 h100 GPU; 2 h100 GPUs are free; 1 more is needed.")
    assert _faults("1\N{MULTIPLICATION SIGN}L4 in now")
    assert _faults("expected to start about 2 h")
    assert not _faults("Will queue on h100 (1 GPU charged): #1, expected to start in about 2 h.")


def _messages(snap: Snapshot, candidate: Pending) -> list[str]:
    decision = decide(replace(snap, pending=[*snap.pending, candidate]))
    verdict = dry_run(snap, candidate, [replace(candidate, flavor="l4", worker_gpus=Decimal(1))])
    return [
        *(status.message for status in decision.waiting.values()),
        *(reclaim.message for reclaim in decision.reclaim),
        *(reason.message for reason in verdict.reasons),
        *(alt.message for alt in verdict.alternatives),
        verdict.summary,
        verdict.headline,
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(max_pending=15), st.data())
def test_every_admission_message_counts_in_plain_words(snap: Snapshot, data: st.DataObject) -> None:
    flavor = data.draw(st.sampled_from(["h100", "l4"]))
    kind = data.draw(st.sampled_from(["dev", "prod"]))
    workers = data.draw(st.integers(1, 3))
    per_worker = PER_NODE[flavor] if kind == "prod" else 1
    candidate = Pending(
        id=99_999,
        tenant=data.draw(st.sampled_from([t.slug for t in snap.tenants])),
        owner=1,
        flavor=flavor,
        kind=kind,
        gpus=Decimal(workers * per_worker),
        created_at=snap.now,
        cpu=Decimal(4 * workers * per_worker),
        memory_gib=Decimal(16 * workers * per_worker),
        workers=workers,
        worker_gpus=Decimal(per_worker),
    )
    for message in _messages(snap, candidate):
        assert not _faults(message), message


def test_verdicts_say_what_is_charged_and_when_in_english() -> None:
    """Dev, production and job shapes, now, later and unknown, alternatives included."""
    # acme's 16 H100s of quota are all held: 8 until 40 min from now, 8 with no TTL.
    busy = snapshot(
        running=[running(1, "acme", 8, expires_at=NOW + minutes(40)), running(2, "acme", 8)]
    )
    prod = pending(99, "acme", 16, kind="prod", workers=2, worker_gpus=Decimal(8))
    fits = dry_run(snapshot(), prod)
    assert fits.headline == "Fits now on h100: 2 whole nodes, 16 GPUs charged."
    assert fits.summary == "Starts on h100 now (2 whole nodes, 16 GPUs charged)."
    one = pending(98, "acme", 1, ttl=minutes(30))  # a job's deadline is its TTL here
    on_l4 = replace(one, flavor="l4")
    queued = dry_run(busy, one, [on_l4])
    assert queued.verdict == "will_queue"
    assert queued.headline == (
        "Will queue on h100 (1 GPU charged): #1 in acme's queue, expected to start in about 40 min."
    )
    assert queued.summary == (
        "Starts on l4 now (1 GPU charged), or on h100 in about 40 min (1 GPU charged)."
    )
    assert [a.message for a in queued.alternatives] == ["fits now (1 GPU charged)"]
    never_ends = snapshot(running=[running(1, "acme", 16)])
    unknown = dry_run(never_ends, pending(97, "acme", 1))
    assert unknown.headline.endswith("expected to start at a time not yet known.")
    soon = snapshot(running=[running(1, "acme", 16, expires_at=NOW + timedelta(seconds=20))])
    assert dry_run(soon, pending(96, "acme", 1)).headline.endswith("start within a minute.")
    never = dry_run(snapshot(), pending(95, "acme", 3, flavor="l4"))
    assert never.verdict == "never_fits" and never.headline == "Never fits."
