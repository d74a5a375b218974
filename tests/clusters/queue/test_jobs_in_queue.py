"""Jobs in the built-in queue: the same pass as clusters, with a job's two differences —
a running job reclaimed for borrowed quota is given notice and then requeued (never
suspended; docs/preemption.md), and its deadline is when the queue expects its GPUs
back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.kinds.rayjob import requests as jobs
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest
from clusters.queue.admission_pass import run_admission_pass
from clusters.queue.snapshot_reads import build_snapshot, pending_of
from clusters.requests import checkpoints, services
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from tests.factories import borrower_fills_the_fleet

pytestmark = pytest.mark.django_db


def _running(job: ClusterRequest) -> None:
    transition(job, State.STARTING, reason="applied")
    transition(job, State.RUNNING, reason="running")


def test_a_borrowing_job_is_given_notice_then_requeued_to_resume_from_its_checkpoint(
    settings: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    settings.RECLAIM_GRACE_SECONDS = 3600
    borrower_fills_the_fleet(acme, globex, h100)
    own = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="own", kind="prod", flavor=h100)
    )
    borrowing = jobs.job_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="batch", kind="prod", flavor=h100),
        job=JobSpec(entrypoint="python train.py"),
    )
    assert sorted(run_admission_pass().admitted) == sorted([own.pk, borrowing.pk])
    _running(ClusterRequest.objects.get(pk=borrowing.pk))
    submitted = ClusterRequest.objects.get(pk=borrowing.pk).created_at

    need = services.cluster_request_create(
        actor=charlie, tenant=globex, spec=ClusterSpec(name="mine", flavor=h100, workers=8)
    )
    result = run_admission_pass()
    assert result.admitted == [] and result.suspended == []
    # acme is 8 GPUs over its quota: the reclaim falls on the newer of its two, the job.
    job = ClusterRequest.objects.get(pk=borrowing.pk)
    assert job.reclaim_after is not None and job.notice_at is not None
    assert job.notice_reason and job.state == State.RUNNING
    notice = job.events.get(reason="preemption_notice")
    assert "requeued" in notice.message and "checkpoint" in notice.message
    assert ClusterRequest.objects.get(pk=own.pk).reclaim_after is None
    need.refresh_from_db()
    assert need.queue_reason == "reclaim_pending"

    # The run saves its state; at the deadline the job is requeued, not failed.
    checkpoints.report_checkpoint(actor=alice, cluster=job, uri="s3://ckpt/batch/step-40")
    ClusterRequest.objects.filter(pk=job.pk).update(
        reclaim_after=timezone.now() - timedelta(seconds=1)
    )
    result = run_admission_pass()
    assert result.suspended == [job.pk]
    job.refresh_from_db()
    assert job.state == State.QUEUED and not job.holds_gpus
    assert job.resume_from == "s3://ckpt/batch/step-40" and job.preemptions == 1
    assert job.notice_at is None and job.reclaim_after is None and not job.notice_reason
    assert job.created_at == submitted  # its place in line: the original submission
    moved = job.events.get(reason="preempted")
    assert moved.from_state == State.RUNNING and moved.to_state == State.QUEUED
    assert "resumes from s3://ckpt/batch/step-40" in moved.message
    # The lender's request takes the GPUs the job gave back (on the next pass).
    run_admission_pass()
    assert ClusterRequest.objects.get(pk=need.pk).state == State.ADMITTED
    # Waiting again, the job is ahead of a request submitted after it.
    later = jobs.job_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="later", kind="prod", flavor=h100),
        job=JobSpec(entrypoint="python train.py"),
    )
    run_admission_pass()
    job.refresh_from_db()
    later.refresh_from_db()
    assert job.queue_position is not None and later.queue_position is not None
    assert job.queue_position < later.queue_position


def test_a_reprieved_job_loses_its_notice(
    settings: Any, alice: Any, charlie: Any, acme: Any, globex: Any, h100: Any
) -> None:
    borrower_fills_the_fleet(acme, globex, h100)
    services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="own", kind="prod", flavor=h100)
    )
    borrowing = jobs.job_create(
        actor=alice,
        tenant=acme,
        spec=ClusterSpec(name="batch", kind="prod", flavor=h100),
        job=JobSpec(entrypoint="python train.py"),
    )
    run_admission_pass()
    _running(ClusterRequest.objects.get(pk=borrowing.pk))
    need = services.cluster_request_create(
        actor=charlie, tenant=globex, spec=ClusterSpec(name="mine", flavor=h100, workers=8)
    )
    run_admission_pass()
    assert ClusterRequest.objects.get(pk=borrowing.pk).notice_at is not None
    services.cluster_delete(actor=charlie, cluster=need)
    run_admission_pass()
    job = ClusterRequest.objects.get(pk=borrowing.pk)
    assert job.notice_at is None and job.reclaim_after is None and not job.notice_reason
    assert job.state == State.RUNNING and job.preemptions == 0


def test_a_waiting_request_expects_the_gpus_at_the_jobs_deadline(
    bob: Any, alice: Any, acme: Any, l4: Any
) -> None:
    # acme may hold 2 L4s: bob's job takes both for at most an hour.
    job = jobs.job_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(name="hour", flavor=l4, workers=2),
        job=JobSpec(entrypoint="python train.py", active_deadline_seconds=3600),
    )
    assert run_admission_pass().admitted == [job.pk]
    _running(ClusterRequest.objects.get(pk=job.pk))
    admitted_at = ClusterRequest.objects.get(pk=job.pk).admitted_at
    waiting = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="next", flavor=l4, workers=1)
    )
    run_admission_pass()
    waiting.refresh_from_db()
    assert waiting.queue_eta is not None
    expected = admitted_at + timedelta(seconds=3600)
    assert abs((waiting.queue_eta - expected).total_seconds()) < 120, (waiting.queue_eta, expected)
    # Without a deadline, nothing says when the GPUs come back.
    ClusterRequest.objects.filter(pk=job.pk).update(admitted_at=timezone.now())
    job.job.active_deadline_seconds = None
    job.job.save()
    run_admission_pass()
    waiting.refresh_from_db()
    assert waiting.queue_eta is None or waiting.queue_eta > expected + timedelta(days=1)


def test_a_queued_jobs_deadline_is_its_ttl_so_what_waits_behind_it_has_an_eta(
    bob: Any, alice: Any, acme: Any, l4: Any
) -> None:
    """A job that has not started yet ends at the latest its deadline after it starts:
    the queue counts on that for what waits behind it, as for a cluster's TTL."""
    # acme may hold 2 L4s: alice's cluster takes both for two hours.
    acme.max_dev_clusters_per_user = acme.max_dev_gpus_per_user = 50
    acme.save()
    cluster = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="dev", flavor=l4, workers=2)
    )
    assert run_admission_pass().admitted == [cluster.pk]
    ends = timezone.now() + timedelta(hours=2)
    ClusterRequest.objects.filter(pk=cluster.pk).update(expires_at=ends)
    job = jobs.job_create(
        actor=bob,
        tenant=acme,
        spec=ClusterSpec(name="hour", flavor=l4, workers=2),
        job=JobSpec(entrypoint="python train.py", active_deadline_seconds=3600),
    )
    behind = services.cluster_request_create(
        actor=alice, tenant=acme, spec=ClusterSpec(name="next", flavor=l4, workers=1)
    )
    snapshot, _ = build_snapshot()
    queued = {p.id: p for p in snapshot.pending}
    assert queued[job.pk].ttl == timedelta(seconds=3600)
    assert pending_of(ClusterRequest.objects.get(pk=job.pk)).ttl == timedelta(seconds=3600)
    run_admission_pass()
    job.refresh_from_db()
    behind.refresh_from_db()
    assert job.queue_eta is not None and abs((job.queue_eta - ends).total_seconds()) < 120
    # The job starts when the cluster ends, and gives the GPUs back an hour later.
    expected = ends + timedelta(seconds=3600)
    assert behind.queue_eta is not None, "the job's deadline bounds its run"
    assert abs((behind.queue_eta - expected).total_seconds()) < 120, (behind.queue_eta, expected)
