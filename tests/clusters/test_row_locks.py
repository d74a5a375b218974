"""The row locks the engine and admission take never hold up a foreign-key check.

Django's foreign keys on PostgreSQL are checked at commit with FOR KEY SHARE on the row
they point at. A FOR UPDATE lock blocks that check; FOR NO KEY UPDATE does not. With many
members' passes locking flavors and requests while the API creates rows that point at
them, FOR UPDATE made a create and a pass wait for each other: a deadlock, and a 500.
Each test holds one lock in another connection and commits a row pointing at the locked
row here, under a lock timeout: the commit must not wait for the lock at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from clusters.models import ClusterRequest, UsageSpan
from clusters.queue import free_capacity
from clusters.rows import lifecycle
from clusters.rows.transitions import usage_span

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def held(lock: Callable[[], Any]) -> Iterator[None]:
    """Run ``lock`` in a transaction of another connection, and keep it open."""
    taken, done = threading.Event(), threading.Event()
    failed: list[Exception] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                lock()
                taken.set()
                done.wait(30)
        except Exception as exc:  # noqa: BLE001 - reported below, not lost in the thread
            failed.append(exc)
            taken.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    taken.wait(30)
    try:
        assert not failed, failed
        yield
    finally:
        done.set()
        thread.join(30)


def _commit_without_waiting(write: Callable[[], Any]) -> None:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '3s'")
        write()


def _row(alice: Any, acme: Any, h100: Any, name: str) -> ClusterRequest:
    return ClusterRequest.objects.create(
        tenant=acme,
        owner=alice,
        flavor=h100,
        name=name,
        kind="dev",
        gpus=Decimal(1),
        cpu=Decimal(1),
        memory_gib=Decimal(8),
    )


def test_a_create_commits_while_a_pass_holds_the_flavors(alice: Any, acme: Any, h100: Any) -> None:
    with held(free_capacity.locked_flavor_ids):
        _commit_without_waiting(lambda: _row(alice, acme, h100, "made-while-locked"))
    assert ClusterRequest.objects.filter(name="made-while-locked").exists()


def test_a_usage_span_commits_while_its_request_is_locked(alice: Any, acme: Any, h100: Any) -> None:
    row = _row(alice, acme, h100, "locked-row")
    with held(lambda: lifecycle.locked(row)):
        _commit_without_waiting(lambda: usage_span(row, timezone.now()).save())
    assert UsageSpan.objects.filter(cluster=row).exists()
