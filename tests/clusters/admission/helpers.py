"""Small builders for admission snapshots, shared by the admission tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from clusters.admission import FlavorQ, Pending, QuotaQ, Running, Snapshot, TenantQ

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
H100 = FlavorQ("h100", gpus_per_node=8, node_count=4)
L4 = FlavorQ("l4", gpus_per_node=1, node_count=4)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def running(
    id: int, tenant: str, gpus: int, *, flavor: str = "h100", owner: int = 1, **kw: Any
) -> Running:
    kw.setdefault("kind", "dev")
    kw.setdefault("admitted_at", NOW - minutes(60))
    return Running(id=id, tenant=tenant, owner=owner, flavor=flavor, gpus=Decimal(gpus), **kw)


def pending(
    id: int, tenant: str, gpus: int, *, flavor: str = "h100", owner: int = 1, **kw: Any
) -> Pending:
    kw.setdefault("kind", "dev")
    kw.setdefault("created_at", NOW - minutes(1))
    kw.setdefault("workers", gpus)
    return Pending(id=id, tenant=tenant, owner=owner, flavor=flavor, gpus=Decimal(gpus), **kw)


def snapshot(**kw: Any) -> Snapshot:
    kw.setdefault("now", NOW)
    kw.setdefault("tenants", [TenantQ("acme"), TenantQ("globex")])
    kw.setdefault("flavors", [H100, L4])
    kw.setdefault(
        "quotas",
        [
            QuotaQ("acme", "h100", 16, 0),
            QuotaQ("globex", "h100", 16, 8),
            QuotaQ("acme", "l4", 2, 0),
        ],
    )
    return Snapshot(**kw)
