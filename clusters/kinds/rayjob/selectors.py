"""Reads only a job needs."""

from __future__ import annotations

from typing import Any

from clusters.domain.states import State
from clusters.models import ClusterKind
from clusters.selectors import cluster_list
from tenants.models import Tenant


def job_hosts_of(*, tenant: Tenant, owner: Any) -> list[str]:
    """Names of the owner's ready dev clusters in the tenant: where a job of theirs may run
    instead of on a Ray cluster of its own (the service checks it again on submission)."""
    return list(
        cluster_list(tenant=tenant)
        .filter(owner=owner, kind=ClusterKind.DEV, state=State.READY)
        .order_by("name")
        .values_list("name", flat=True)
    )
