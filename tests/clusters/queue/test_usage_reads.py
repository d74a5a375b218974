"""Recent GPU-hours from the usage ledger: PostgreSQL's one aggregate query against the
pure closed form, the horizon, the off switch, and the snapshot an admission pass reads."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.admission.decayed_usage import RecentUsage, Span, recent_usage
from clusters.queue.snapshot_reads import build_snapshot
from clusters.queue.usage_reads import HORIZON_HALF_LIVES, read_recent_usage
from tests.factories import usage_span

WEEK = timedelta(days=7)


@pytest.fixture
def history(alice: Any, bob: Any, charlie: Any, acme: Any, globex: Any, h100: Any, l4: Any) -> Any:
    """acme's alice and bob and globex's charlie, over the last weeks; one span long
    past the horizon, one still open."""
    now = timezone.now()
    spans = [
        (acme, alice, h100, 8, now - 3 * WEEK, now - 2 * WEEK),
        (acme, bob, h100, 1, now - timedelta(days=2), now - timedelta(hours=1)),
        (acme, bob, l4, "0.5", now - timedelta(hours=5), now - timedelta(hours=2)),
        (globex, charlie, h100, 16, now - timedelta(days=1), None),
        (globex, charlie, h100, 16, now - (HORIZON_HALF_LIVES + 1) * WEEK, now - 45 * WEEK),
    ]
    for tenant, owner, flavor, gpus, start, end in spans:
        usage_span(tenant=tenant, owner=owner, flavor=flavor, gpus=gpus, start=start, end=end)
    return (
        now,
        [Span(t.slug, o.pk, f.name, Decimal(g), s, e) for t, o, f, g, s, e in spans[:4]],
        (alice, bob, charlie),
    )


def test_the_aggregate_query_sums_the_closed_form(history: Any) -> None:
    now, spans, (alice, _bob, charlie) = history
    with CaptureQueriesContext(connection) as queries:
        read = read_recent_usage(now=now, half_life=WEEK)
    assert len(queries) == 1
    expected = recent_usage(spans, now=now, half_life=WEEK)
    assert read.half_life == WEEK
    assert read.gpu_hours.keys() == expected.gpu_hours.keys()
    for key, hours in expected.gpu_hours.items():
        assert read.gpu_hours[key] == pytest.approx(hours, rel=1e-9)
    for key, hours in expected.owner_gpu_hours.items():
        assert read.owner_gpu_hours[key] == pytest.approx(hours, rel=1e-9)
    # Alice's 8 GPUs of three to two weeks ago weigh an eighth to a quarter; charlie's
    # 16 for the last day a little under 16 x 24.
    assert 8 * 168 / 8 < read.owner_gpu_hours["acme", alice.pk] < 8 * 168 / 4
    assert 16 * 22 < read.owner_gpu_hours["globex", charlie.pk] < 16 * 24


def test_off_reads_nothing(history: Any) -> None:
    now, _, _ = history
    with CaptureQueriesContext(connection) as queries:
        assert read_recent_usage(now=now, half_life=None) == RecentUsage()
    assert len(queries) == 0


def test_the_snapshot_carries_recent_usage_only_when_configured(
    history: Any, settings: Any
) -> None:
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 0
    assert not build_snapshot()[0].recent.on
    settings.FAIR_SHARE_HALF_LIFE_HOURS = 168
    recent = build_snapshot()[0].recent
    assert recent.half_life == WEEK and recent.tenant_hours("globex") > recent.tenant_hours("acme")
