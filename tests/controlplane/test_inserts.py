"""controlplane.inserts: a new row and the rows that name it go to PostgreSQL in one
statement, and end as ``save()`` leaves them; elsewhere one INSERT each, the same rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import signals
from django.test.utils import CaptureQueriesContext

from clusters.models import ClusterEvent, ClusterRequest, Job
from clusters.requests.services import build_request
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import first_note
from controlplane.inserts import insert_together
from tenants.audit import audit_entry
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def saved() -> Iterator[list[tuple[type, Any, bool]]]:
    """What ``post_save`` said, in order."""
    said: list[tuple[type, Any, bool]] = []

    def record(sender: type, instance: Any, created: bool = False, **kwargs: Any) -> None:
        said.append((sender, instance, created))

    signals.post_save.connect(record, dispatch_uid="test_inserts")
    yield said
    signals.post_save.disconnect(dispatch_uid="test_inserts")


def _new(acme: Any, alice: Any, h100: Any, name: str) -> tuple[Any, Any, Any]:
    row = build_request(
        tenant=acme, owner=alice, spec=ClusterSpec(name=name, kind="dev", flavor=h100, workers=1)
    )
    event = first_note(row, reason="requested", message="dev cluster requested", actor=alice)
    audit = audit_entry(actor=alice, action="cluster.create", obj=row, tenant=acme)
    return row, event, audit


@pytest.mark.parametrize("vendor", ["postgresql", "other"])
def test_the_row_its_details_event_and_audit_are_written_and_linked(
    vendor: str, monkeypatch: Any, saved: Any, acme: Any, alice: Any, h100: Any
) -> None:
    if vendor == "other":  # as on SQLite: one INSERT each
        monkeypatch.setattr(connection, "vendor", "sqlite")
    with transaction.atomic():
        row, event, audit = _new(acme, alice, h100, "train")
        details = Job(entrypoint="python train.py")
        followers = [(details, "request"), (event, "cluster"), (audit, "object_id")]
        saved.clear()  # what the fixtures saved
        with CaptureQueriesContext(connection) as captured:
            insert_together(row, followers)
    assert len(captured) == (1 if vendor == "postgresql" else 4), [q["sql"][:80] for q in captured]
    stored = ClusterRequest.objects.unscoped().get(name="train")
    assert row.pk == stored.pk and not row._state.adding and row._state.db == "default"
    assert Job.objects.get(pk=row.pk).entrypoint == "python train.py"
    assert details.pk == row.pk
    assert ClusterEvent.objects.get(pk=event.pk).cluster_id == row.pk == event.cluster_id
    written = AuditEvent.objects.get(pk=audit.pk)
    assert written.object_id == str(row.pk) == audit.object_id
    assert written.object_repr == f"{acme.slug}/train" and written.actor == alice
    # The timestamps save() would have set are the ones stored.
    assert ClusterEvent.objects.get(pk=event.pk).at == event.at
    assert [(s, i, c) for s, i, c in saved] == [
        (ClusterRequest, row, True),
        (Job, details, True),
        (ClusterEvent, event, True),
        (AuditEvent, audit, True),
    ]


def test_a_follower_that_fails_leaves_nothing_written(acme: Any, alice: Any, h100: Any) -> None:
    row, event, _ = _new(acme, alice, h100, "train")
    bad = ClusterEvent(actor_name="x" * 500, reason="requested")  # past the column's length
    with pytest.raises(Exception), transaction.atomic():  # noqa: B017 - the database's own
        insert_together(row, [(event, "cluster"), (bad, "cluster")])
    assert not ClusterRequest.objects.unscoped().filter(name="train").exists()
    assert not ClusterEvent.objects.exists()


def test_a_taken_name_is_an_integrity_error_and_writes_nothing(
    acme: Any, alice: Any, h100: Any
) -> None:
    first = _new(acme, alice, h100, "train")
    with transaction.atomic():
        insert_together(first[0], [(first[1], "cluster"), (first[2], "object_id")])
    row, event, audit = _new(acme, alice, h100, "train")
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_together(row, [(event, "cluster"), (audit, "object_id")])
    assert ClusterEvent.objects.count() == 1
    assert AuditEvent.objects.filter(action="cluster.create").count() == 1


def test_only_new_rows_are_taken(acme: Any, alice: Any, h100: Any) -> None:
    row, event, audit = _new(acme, alice, h100, "train")
    with transaction.atomic():
        insert_together(row, [(event, "cluster")])
    with pytest.raises(ValueError, match="only a new row"), transaction.atomic():
        insert_together(row, [(audit, "object_id")])
