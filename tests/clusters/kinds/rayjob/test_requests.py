"""The job services (clusters.kinds.rayjob.requests) on the database, without a worker: a job is
queued with its run's details and audited, refused with nothing written when its body
is wrong, and stopped only while it has not ended."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from clusters.domain.states import State
from clusters.kinds.rayjob import requests as jobs
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest, Job, Workload
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import transition
from controlplane.exceptions import ServiceConflict
from tenants.models import AuditEvent

pytestmark = pytest.mark.django_db


def _submit(actor: Any, tenant: Any, h100: Any, **job: Any) -> ClusterRequest:
    values: dict[str, Any] = {"entrypoint": "python train.py", "name": "train"}
    values.update(job)
    return jobs.job_create(
        actor=actor,
        tenant=tenant,
        spec=ClusterSpec(kind="dev", flavor=h100, workers=1, name=values["name"]),
        job=JobSpec(**values),
    )


def test_a_job_is_queued_with_its_run_and_audited(acme: Any, bob: Any, h100: Any) -> None:
    row = _submit(bob, acme, h100, runtime_env={"pip": ["torch==2.5.1"]})
    assert (row.workload, row.state, row.owner_id) == (Workload.JOB, State.QUEUED, bob.pk)
    details = Job.objects.get(pk=row.pk)
    assert (details.entrypoint, details.runtime_env) == (
        "python train.py",
        {"pip": ["torch==2.5.1"]},
    )
    assert details.host is None
    event = row.events.get()
    assert (event.reason, event.message) == ("requested", "job submitted (on h100)")
    assert AuditEvent.objects.filter(action="job.create", tenant=acme).count() == 1


def test_a_wrong_body_is_refused_and_nothing_is_written(acme: Any, bob: Any, h100: Any) -> None:
    with pytest.raises(ValidationError):
        _submit(bob, acme, h100, entrypoint="")
    with pytest.raises(ValidationError):
        _submit(bob, acme, h100, runtime_env={"pip": ["--index-url https://evil.example"]})
    assert not ClusterRequest.objects.exists() and not Job.objects.exists()


def test_a_second_job_of_the_same_name_is_refused(acme: Any, bob: Any, h100: Any) -> None:
    _submit(bob, acme, h100)
    with pytest.raises(ValidationError):
        _submit(bob, acme, h100)
    assert ClusterRequest.objects.count() == 1


def test_stop_is_for_the_owner_and_admins_and_only_before_the_end(
    acme: Any, alice: Any, bob: Any, vera: Any, h100: Any
) -> None:
    row = _submit(bob, acme, h100)
    with pytest.raises(PermissionDenied):
        jobs.job_stop(actor=vera, request=row)
    stopped = jobs.job_stop(actor=alice, request=row)
    assert stopped.state == State.STOPPED and stopped.provision_requested_at is not None
    assert Job.objects.get(pk=row.pk).ended_at is not None
    assert jobs.job_stop(actor=bob, request=stopped).state == State.STOPPED  # already

    done = _submit(bob, acme, h100, name="done")
    for state in (State.ADMITTED, State.STARTING, State.RUNNING, State.SUCCEEDED):
        transition(done, state, reason="test")
    with pytest.raises(ServiceConflict) as refused:
        jobs.job_stop(actor=bob, request=done)
    assert refused.value.code == "invalid_state"
    assert "has ended (succeeded)" in refused.value.message
