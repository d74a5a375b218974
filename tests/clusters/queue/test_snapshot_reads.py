"""The snapshot submission asks "could it ever fit?" of: the tenant's own quota alone
(read in plain SQL, on every create) says what the tenant's rows say; and the queue as
the admission pass reads it says what each row says."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.admission.snapshot import QuotaQ
from clusters.kinds.rayjob import requests as jobs
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest
from clusters.queue.snapshot_reads import build_snapshot, pending_of, policy_snapshot
from clusters.rows.spec import ClusterSpec
from tenants.models import PriorityClass, Quota

pytestmark = pytest.mark.django_db


def test_alone_the_snapshot_holds_the_tenant_s_own_quota_row(
    acme: Any, globex: Any, h100: Any, l4: Any
) -> None:
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=12, borrow_limit=3, lend_limit=4)
    alone = policy_snapshot(tenant=acme, flavor=h100, alone=True)
    assert alone.quotas == [
        QuotaQ(tenant="acme", flavor="h100", gpus=12, borrow_limit=3, lend_limit=4)
    ]
    assert [t.slug for t in alone.tenants] == ["acme"] and alone.cohort_parents == {}
    full = policy_snapshot(tenant=acme, flavor=h100)
    assert [q for q in full.quotas if q.tenant == "acme"] == alone.quotas

    Quota.objects.filter(tenant=acme, flavor=l4).delete()
    assert policy_snapshot(tenant=acme, flavor=l4, alone=True).quotas == []


def test_the_queue_read_gives_each_request_as_its_row_does(
    make_cluster: Any, acme: Any, alice: Any, l4: Any
) -> None:
    """The pass reads the queue as tuples, a shape and a class computed once for many
    rows: each request must come out as :func:`pending_of` makes it from its model row,
    and its queue fields as stored."""
    klass = PriorityClass.objects.create(name="urgent-read", value=50, may_preempt=True)
    standing = [{"flavor": "h100", "position": 2, "reason": "quota", "message": "m", "eta": None}]
    rows = [
        make_cluster(name="plain"),
        make_cluster(name="plain-twin"),  # the same shape: read from the memo
        make_cluster(name="fungible", accepted_flavors=["h100", "l4"], queue_flavors=standing),
        make_cluster(name="prod", kind="prod", workers=2, min_workers=1, max_workers=3),
        make_cluster(name="frac", flavor=l4, gpu_fraction="0.5", ttl_hours=4),
        make_cluster(name="classed", priority_class=klass, earmarked_at=timezone.now()),
        make_cluster(
            name="placed", queue_position=3, queue_reason="quota", queue_message='it\'s "q"'
        ),
    ]
    for row in rows:
        row.save()
    job = jobs.job_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="deadline", flavor=l4),
        job=JobSpec(entrypoint="python train.py", active_deadline_seconds=3600),
    )
    snapshot, queued = build_snapshot()
    read = {p.id: p for p in snapshot.pending}
    for pk in [*(r.pk for r in rows), job.pk]:
        assert read[pk] == pending_of(ClusterRequest.objects.get(pk=pk)), pk
    assert read[job.pk].ttl == timedelta(hours=1)
    assert read[rows[2].pk].fallbacks  # it accepts l4 too
    fields = {q.id: q.queue for q in queued}
    assert fields[rows[2].pk][-1] == standing
    assert fields[rows[6].pk] == (3, None, "quota", 'it\'s "q"', None, [])
