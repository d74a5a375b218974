"""The what-if planner on the database: a recorded history replayed with no change
reproduces its waits, and ``manage.py whatif`` refuses bad input with a clear error.

Runtime: about 3 s (one replay of three requests, a synthetic tenth of a day).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from clusters.domain.states import State
from clusters.models import ClusterRequest, UsageSpan
from clusters.whatif import services
from clusters.whatif.history import recorded_period, world_now
from clusters.whatif.simulator import simulate

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
# A replayed wait may differ from the recorded one by one pass step of the grid used here.
TOLERANCE_SECONDS = 60


def _recorded(
    tenant: Any, owner: Any, flavor: Any, *, gpus: int, asked: int, ran: tuple[int, int]
) -> None:
    """A dev request asked for at ``asked`` minutes after T0 that held its GPUs over
    ``ran`` (minutes), as the queue and the usage ledger recorded it."""
    row = ClusterRequest.objects.create(
        tenant=tenant,
        owner=owner,
        name=f"r{asked}",
        flavor=flavor,
        workers=gpus,
        gpus=Decimal(gpus),
        state=State.DELETED,
    )
    ClusterRequest.objects.filter(pk=row.pk).update(created_at=T0 + timedelta(minutes=asked))
    UsageSpan.objects.create(
        tenant=tenant,
        cluster=row,
        username=owner.username,
        flavor_name=flavor.name,
        kind="dev",
        gpus=Decimal(gpus),
        started_at=T0 + timedelta(minutes=ran[0]),
        ended_at=T0 + timedelta(minutes=ran[1]),
    )


@pytest.mark.django_db
def test_no_change_replays_the_recorded_waits(acme: Any, alice: Any, h100: Any) -> None:
    """One node of 8 H100: a full-node cluster for an hour, then two half-node ones that
    queued behind it (recorded waits 0, 50 and 40 min)."""
    h100.node_count = 1
    h100.save()
    _recorded(acme, alice, h100, gpus=8, asked=0, ran=(0, 60))
    _recorded(acme, alice, h100, gpus=4, asked=10, ran=(60, 90))
    _recorded(acme, alice, h100, gpus=4, asked=20, ran=(60, 120))
    workload = recorded_period(start=T0 - timedelta(minutes=1), end=T0 + timedelta(hours=3))
    assert len(workload.demands) == 3
    outcome = simulate(world_now(), workload, pass_seconds=TOLERANCE_SECONDS)
    for demand in workload.demands:
        assert demand.recorded_wait is not None
        replayed = outcome.records[demand.id].wait
        assert abs(replayed - demand.recorded_wait) <= TOLERANCE_SECONDS, demand
    assert sorted(d.recorded_wait or 0 for d in workload.demands) == [0, 2400, 3000]


@pytest.mark.django_db
def test_the_command_compares_and_says_what_it_does_not_model(acme: Any) -> None:
    out = StringIO()
    call_command("whatif", "--synthetic", "--days", "0.1", "--change", "nodes:h100=+8", stdout=out)
    text = out.getvalue()
    assert "nodes:h100=+8" in text and "as is" in text and "changed" in text
    assert "Not modelled:" in text
    for line in services.NOT_MODELLED:
        assert line in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--synthetic", "--change", "nodes:h200=+1"], "No flavor called 'h200'"),
        (["--synthetic", "--change", "more gpus"], "Cannot read the change"),
        (["--synthetic", "--change", "weight:team01=+1"], "Only node counts"),
        (["--synthetic", "--change", "weight:team01=0"], "above 0"),
        (["--synthetic", "--change", "quota:team01=4"], "quota:TENANT/FLAVOR=N"),
        (["--synthetic", "--change", "nodes:h100=-100"], "fewer than no nodes"),
        (["--synthetic", "--days", "0"], "between 0 and 28 days"),
        (["--synthetic", "--from", "2026-11-01"], "drop --from/--to"),
        (["--from", "last tuesday"], "Cannot read the time"),
        (["--from", "2026-11-08", "--to", "2026-11-01"], "must end after it starts"),
        (["--from", "2026-01-01", "--to", "2026-11-01"], "at most 28 days"),
    ],
)
@pytest.mark.django_db
def test_bad_input_is_a_clear_error(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("whatif", *args, stdout=StringIO())
