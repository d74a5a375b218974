"""What an admission pass writes on the rows (clusters.queue.writeback): the admitted
move on together, each on the flavor the pass chose with its demand there, and a
waiting request's standing per flavor is stored as the API shows it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.admission.snapshot import Decision, FlavorStanding, QueueStatus
from clusters.domain.states import State
from clusters.models import ClusterRequest
from clusters.queue.snapshot_reads import build_snapshot
from clusters.queue.writeback import admit, apply_waiting, flavor_standing, place_on

pytestmark = pytest.mark.django_db


def test_flavor_standing_is_stored_per_accepted_flavor() -> None:
    eta = timezone.now()
    status = QueueStatus(
        position=2,
        flavor_position=1,
        reason="quota",
        message="m",
        eta=None,
        flavors=(
            FlavorStanding("h100", 1, "quota", "x" * 600, eta),
            FlavorStanding("l4", 3, "capacity", "busy", None),
        ),
    )
    first, second = flavor_standing(status)
    assert first == {
        "flavor": "h100",
        "position": 1,
        "reason": "quota",
        "message": "x" * 500,
        "eta": eta.isoformat(),
    }
    assert second["eta"] is None
    assert flavor_standing(QueueStatus(1, 1, "quota", "m", None)) == []


def test_place_on_another_flavor_takes_the_demand_there(make_cluster: Any, l4: Any) -> None:
    row = make_cluster(accepted_flavors=["h100", "l4"])
    assert place_on(row, None) == {} and place_on(row, "h100") == {}
    fields = place_on(row, "l4")
    assert fields["flavor"] == l4 and row.flavor == l4
    assert set(fields) == {"flavor", "gpus", "cpu", "memory_gib"}


def test_admit_moves_the_rows_with_their_ttl_and_clears_the_queue_fields(
    make_cluster: Any, l4: Any
) -> None:
    now = timezone.now()
    plain = make_cluster(name="plain", ttl_hours=8, queue_position=1, queue_reason="quota")
    fungible = make_cluster(name="fungible", accepted_flavors=["h100", "l4"])
    gone = make_cluster(name="gone")
    for row in (plain, fungible, gone):
        row.save()
    # Deleted after the pass read it: the conditional move leaves it as it is.
    ClusterRequest.objects.filter(pk=gone.pk).update(state=State.DELETING)
    moved = admit([plain, fungible, gone], now=now, placed={fungible.pk: "l4"})
    assert moved == [plain.pk, fungible.pk]
    rows = {r.name: r for r in ClusterRequest.objects.all()}
    assert rows["plain"].state == State.ADMITTED
    assert rows["plain"].expires_at == now + timedelta(hours=8)
    assert (rows["plain"].queue_position, rows["plain"].queue_reason) == (None, "")
    assert rows["fungible"].flavor == l4
    assert rows["fungible"].events.latest("at").message.startswith("admitted on l4; ")
    assert rows["gone"].state == State.DELETING


def test_apply_waiting_writes_what_changed_on_rows_still_queued(make_cluster: Any) -> None:
    """One statement writes every changed row's queue fields exactly (quotes, backslashes,
    a long message cut at 500, an ETA to the microsecond, a standing per flavor); a row
    deleted since the read is left alone, and writing the same again costs no query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    waiting = make_cluster(name="waiting")
    fungible = make_cluster(name="fungible", accepted_flavors=["h100", "l4"])
    gone = make_cluster(name="gone")
    for row in (waiting, fungible, gone):
        row.save()
    _, queued = build_snapshot()
    ClusterRequest.objects.filter(pk=gone.pk).update(state=State.DELETING)
    eta = timezone.now().replace(microsecond=123456)
    message = 'It\'s "quoted", a back\\slash, é, and\na new line. ' + "x" * 600
    standing = (
        FlavorStanding("h100", 4, "quota", "on h100", eta),
        FlavorStanding("l4", 1, "capacity", "on l4", None),
    )
    decision = Decision(
        waiting={
            waiting.pk: QueueStatus(2, 5, "quota", message, eta),
            fungible.pk: QueueStatus(1, 4, "quota", "either", eta, standing),
            gone.pk: QueueStatus(3, 6, "quota", "gone", None),
        }
    )
    apply_waiting(queued, decision)
    rows = {r.name: r for r in ClusterRequest.objects.all()}
    first = rows["waiting"]
    assert (first.queue_position, first.queue_flavor_position, first.queue_reason) == (
        2,
        5,
        "quota",
    )
    assert first.queue_message == message[:500] and first.queue_eta == eta
    assert first.queue_flavors == []
    assert rows["fungible"].queue_flavors == flavor_standing(decision.waiting[fungible.pk])
    assert rows["gone"].queue_position is None and rows["gone"].queue_message == ""
    with CaptureQueriesContext(connection) as queries:
        apply_waiting(queued, decision)
    assert len(queries) == 0
