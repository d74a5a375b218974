"""The queue's order: where a request stands in its tenant's queue, and where a tenant's
head stands among the heads of every tenant (the heap an admission pass pops)."""

from __future__ import annotations

from datetime import datetime

from clusters.admission.snapshot import PROD, Pending

# (class, -priority, aged?, share, created, id, tenant): the heap of tenant heads.
HeadKey = tuple[int, int, int, float, float, int, str]


def head_key(p: Pending, aged_before: datetime, share: float) -> HeadKey:
    """Where ``p`` goes among the tenants' heads when its tenant's share is ``share``."""
    created = p.created_at.timestamp()
    klass = -1 if p.kind == PROD else 0
    if p.created_at <= aged_before or p.earmarked:
        # Aged requests go first within their priority, oldest first, whatever their
        # tenant's share: this is what bounds their wait. So do requests promised what
        # a reclaim frees: it is theirs.
        return (klass, -p.priority, 0, 0.0, created, p.id, p.tenant)
    return (klass, -p.priority, 1, share, created, p.id, p.tenant)


# (dev?, -priority, not aged?, owner's recent GPU-hours, created, id)
TenantOrder = tuple[bool, int, int, float, datetime, int]


def tenant_order(p: Pending, aged_before: datetime, owner_use: float = 0.0) -> TenantOrder:
    """``p``'s place in its tenant's own queue. ``owner_use``, its engineer's decayed
    GPU-hours (0 with usage-decayed fair share off), puts the engineers who used less
    recently first among requests of one priority that have not aged."""
    aged = p.earmarked or p.created_at <= aged_before
    return (
        p.kind != PROD,
        -p.priority,
        0 if aged else 1,
        0.0 if aged else owner_use,
        p.created_at,
        p.id,
    )
