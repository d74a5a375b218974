"""GPU-hours by UTC day (:func:`clusters.rows.usage.hours_by_day`): PostgreSQL cuts and sums
the spans itself, and must give what the Python reference gives on the same spans.

The reference (:func:`clusters.rows.usage._hours_python`) is what the SQLite of ``make run``
uses and what the usage pages' exact figures were first pinned against.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.models import UsageSpan
from clusters.rows import usage
from tests.factories import usage_span

pytestmark = pytest.mark.django_db

BASE = datetime(2026, 11, 17, 0, 0, tzinfo=UTC)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def both(since: datetime, end: datetime) -> tuple[dict[Any, Decimal], dict[Any, Decimal]]:
    spans = UsageSpan.objects.unscoped()
    clipped = spans.filter(started_at__lt=end).exclude(ended_at__lte=since)
    return usage.hours_by_day(spans, since, end), usage._hours_python(clipped, since, end)


def test_a_span_across_midnight_counts_on_both_days_and_an_open_one_runs_to_the_end(
    acme: Any, alice: Any, bob: Any, h100: Any, l4: Any
) -> None:
    # bob: 2 GPUs 22:30 -> 02:00 across midnight; alice: 1 GPU from 09:00, still held;
    # bob again: a span that began before the period counts only inside it.
    usage_span(tenant=acme, owner=bob, flavor=h100, gpus=2, start=at(18, 22, 30), end=at(19, 2))
    usage_span(tenant=acme, owner=alice, flavor=l4, gpus=1, start=at(20, 9), end=None)
    usage_span(tenant=acme, owner=bob, flavor=h100, gpus="0.5", start=at(16, 0), end=at(18, 6))

    with CaptureQueriesContext(connection) as queries:
        hours = usage.hours_by_day(UsageSpan.objects.unscoped(), at(17, 0), at(20, 12))

    assert len(queries) == 1
    assert hours == {
        (at(17, 0).date(), "acme", "bob", "h100"): Decimal(12),  # 24 h x 0.5
        (at(18, 0).date(), "acme", "bob", "h100"): Decimal(3) + Decimal(3),  # 6 h x 0.5, 1.5 h x 2
        (at(19, 0).date(), "acme", "bob", "h100"): Decimal(4),  # 2 h x 2
        (at(20, 0).date(), "acme", "alice", "l4"): Decimal(3),  # 09:00 -> 12:00
    }
    assert hours == both(at(17, 0), at(20, 12))[1]


def test_a_report_costs_the_same_queries_however_many_spans(
    acme: Any, alice: Any, h100: Any
) -> None:
    for n in range(30):
        start = at(17, 0) + timedelta(hours=3 * n)
        usage_span(
            tenant=acme,
            owner=alice,
            flavor=h100,
            gpus=1,
            start=start,
            end=start + timedelta(hours=2),
        )
    with CaptureQueriesContext(connection) as queries:
        used, idled = usage.period_hours(
            tenant=acme, since=at(17, 0), until=at(21, 0), now=at(21, 0)
        )
    assert len(queries) == 2
    assert sum(used.values()) == Decimal(60)
    assert idled == {}


@st.composite
def spans(draw: Any) -> list[tuple[int, int | None, str]]:
    """Spans as (start second, length in seconds or None for open, GPUs) over 5 days."""
    count = draw(st.integers(min_value=0, max_value=8))
    out = []
    for _ in range(count):
        start = draw(st.integers(min_value=0, max_value=5 * 86400))
        length = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=3 * 86400)))
        gpus = draw(st.sampled_from(["1", "8", "0.5", "2.125", "0.001"]))
        out.append((start, length, gpus))
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    rows=spans(),
    since=st.integers(min_value=0, max_value=4 * 86400),
    length=st.integers(min_value=1, max_value=4 * 86400),
    micro=st.integers(min_value=0, max_value=999_999),
)
def test_postgresql_buckets_equal_the_python_reference(
    acme: Any,
    alice: Any,
    h100: Any,
    rows: list[tuple[int, int | None, str]],
    since: int,
    length: int,
    micro: int,
) -> None:
    with transaction.atomic():
        for start, span_length, gpus in rows:
            begin = BASE + timedelta(seconds=start, microseconds=micro)
            end = None if span_length is None else begin + timedelta(seconds=span_length)
            usage_span(tenant=acme, owner=alice, flavor=h100, gpus=gpus, start=begin, end=end)
        period_start = BASE + timedelta(seconds=since)
        hours, reference = both(period_start, period_start + timedelta(seconds=length))
        transaction.set_rollback(True)
    assert hours.keys() == {k for k, v in reference.items() if v > 0}
    for key, value in hours.items():
        # The reference sums seconds taken through a float: exact to well under a
        # millionth of a GPU-hour, which reports round to thousandths.
        assert abs(value - reference[key]) < Decimal("1e-9"), key
