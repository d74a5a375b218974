"""The reads only a job needs (clusters.kinds.rayjob.selectors)."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.domain.states import State
from clusters.kinds.rayjob.selectors import job_hosts_of

pytestmark = pytest.mark.django_db


def test_a_job_may_run_only_on_its_owners_ready_dev_clusters(
    make_cluster: Any, acme: Any, bob: Any, alice: Any
) -> None:
    make_cluster(name="b-ready", state=State.READY).save()
    make_cluster(name="a-ready", state=State.READY).save()
    make_cluster(name="queued", state=State.QUEUED).save()
    make_cluster(name="prod", kind="prod", state=State.READY).save()
    make_cluster(name="alices", owner=alice, state=State.READY).save()

    assert job_hosts_of(tenant=acme, owner=bob) == ["a-ready", "b-ready"]
    assert job_hosts_of(tenant=acme, owner=alice) == ["alices"]
