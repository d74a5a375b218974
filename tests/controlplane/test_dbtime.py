"""Timestamps are read by psycopg's C loader (controlplane/dbtime.py) and come out exactly
as Django's own loader gives them: the same instants, in ``datetime.timezone.utc``."""

from __future__ import annotations

import datetime

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.utils import timezone

from clusters.models import PendingPass
from controlplane.dbtime import UtcTimestamptzLoader

pytestmark = pytest.mark.django_db

TIMESTAMPTZ = 1184
VALUES = [
    "2026-11-24 19:20:45.172654+00",
    "1969-07-20 20:17:40.000001+00",
    "2038-01-19 03:14:07.999999+00",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
    "2026-03-29 01:30:00+02",  # written in another offset: read back in UTC
    "2026-10-25 02:30:00-09:30",
]
QUERY = "SELECT v::timestamptz FROM unnest(%s::text[]) AS v"


def test_every_connection_reads_timestamps_with_the_c_loader() -> None:
    with connection.cursor() as cursor:
        # Django's cursor wrapper found its own time zone on the loader and did not
        # register its Python loader on this cursor.
        assert cursor.cursor.adapters.get_loader(TIMESTAMPTZ, 0) is UtcTimestamptzLoader


def test_values_are_those_django_s_loader_reads() -> None:
    with connection.cursor() as cursor:
        cursor.execute(QUERY, [VALUES])
        fast = [row[0] for row in cursor.fetchall()]
    with connection.connection.cursor() as raw:
        register_tzloader(datetime.UTC, raw)  # Django's own, on this cursor only
        raw.execute(QUERY, [VALUES])
        django_s = [row[0] for row in raw.fetchall()]
    assert fast == django_s
    assert [v.tzinfo for v in fast] == [datetime.UTC] * len(VALUES)
    assert [v.utcoffset() for v in fast] == [datetime.timedelta(0)] * len(VALUES)
    assert fast[5] == datetime.datetime(2026, 3, 28, 23, 30, tzinfo=datetime.UTC)


def test_a_model_s_timestamp_round_trips() -> None:
    now = timezone.now()
    PendingPass.objects.update_or_create(name="admission", defaults={"started_at": now})
    assert PendingPass.objects.get(name="admission").started_at == now
