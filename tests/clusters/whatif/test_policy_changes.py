"""The planner's policy changes of issue 49 (``half-life:``, ``notice:``, ``requeue:``):
parsed, applied to the world, refused with a clear message, and compared."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from clusters.admission import PROD, FlavorQ, QuotaQ, TenantQ
from clusters.whatif.model import EPOCH, Demand, Workload, World
from clusters.whatif.services import (
    WhatIfError,
    apply_changes,
    parse_changes,
    render_text,
    summary_rows,
    whatif_compare,
)


def _world() -> World:
    return World(
        flavors=[FlavorQ("h100", 8, 2)],
        tenants=[TenantQ("a", cohort="lab"), TenantQ("b", cohort="lab")],
        quotas=[QuotaQ(t, "h100", 8, borrow_limit=8) for t in ("a", "b")],
    )


def test_half_life_notice_and_requeue_changes_are_read_and_applied() -> None:
    changes = parse_changes(["half-life:168", "notice:600", "requeue:back"])
    changed = apply_changes(_world(), changes)
    assert changed.half_life == timedelta(hours=168)
    assert changed.notice == timedelta(seconds=600)
    assert changed.keep_place is False
    # Off again: a half-life of 0, today's warning, the original place.
    off = apply_changes(changed, parse_changes(["half-life:0", "notice:off", "requeue:place"]))
    assert (off.half_life, off.notice, off.keep_place) == (None, None, True)
    assert apply_changes(_world(), parse_changes(["half-life:1.5"])).half_life == timedelta(
        minutes=90
    )
    assert apply_changes(_world(), parse_changes(["notice:0"])).notice == timedelta(0)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("half-life:-1", "half-life:N with N hours from 0 to 8,760 (0: off)"),
        ("half-life:week", "half-life:N with N hours"),
        ("half-life:9000", "from 0 to 8,760"),
        ("notice:NaN", "notice:N with N seconds from 0 to 86,400, or notice:off"),
        ("notice:1e9", "from 0 to 86,400"),
        ("requeue:front", "write requeue:back or requeue:place"),
        ("half-life=168", "half-life:HOURS, notice:SECONDS"),
    ],
)
def test_bad_policy_changes_are_refused_with_what_to_write(line: str, says: str) -> None:
    with pytest.raises(WhatIfError, match="Cannot read") as error:
        parse_changes([line])
    assert says in str(error.value)


def test_a_notice_change_reports_the_work_it_saves() -> None:
    # a borrows the whole pool; b's request within its quota reclaims one of a's gangs.
    demands = [
        Demand(i, t, 1, PROD, ("h100",), 1, at, hold, checkpoint_every=3600.0, save_seconds=180.0)
        for i, t, at, hold in [
            (1, "a", 0.0, 36000.0),
            (2, "a", 0.0, 36000.0),
            (3, "b", 5400.0, 3600.0),
        ]
    ]
    workload = Workload(EPOCH, 86400.0, demands, label="two tenants")
    c = whatif_compare(
        world=_world(),
        workload=workload,
        changes=parse_changes(["notice:600", "requeue:back", "half-life:24"]),
        pass_seconds=60,
    )
    rows = {what: (a, b) for what, a, b in summary_rows(c)}
    assert rows["GPU-hours lost to preemption"] == ("6", "0")
    assert rows["Preemptions per request (mean / most)"] == ("0.33 / 1", "0.33 / 1")
    assert rows["Weekly fairness (Jain's index over the period)"][0] != "-"
    assert "notice:600, requeue:back, half-life:24" in render_text(c)
    assert c.changed.lost_gpu_hours == 0 and c.as_is.lost_gpu_hours == pytest.approx(6)


@pytest.mark.django_db
def test_the_command_compares_a_half_life_and_a_notice_and_refuses_a_bad_one() -> None:
    out = StringIO()
    call_command(
        "whatif",
        "--synthetic",
        "--days",
        "0.1",
        "--change",
        "half-life:168",
        "--change",
        "notice:600",
        stdout=out,
    )
    text = out.getvalue()
    assert "half-life:168, notice:600" in text
    for what in (
        "Weekly fairness (Jain's index over the period)",
        "GPU-hours lost to preemption",
        "Preemptions per request (mean / most)",
    ):
        assert what in text
    with pytest.raises(CommandError, match="write notice:N with N seconds"):
        call_command("whatif", "--synthetic", "--days", "0.1", "--change", "notice:-5")
