"""The queue's order: where a request stands in its tenant's queue, and where a tenant's
head stands among the heads of every tenant (the heap an admission pass pops).

A higher priority class goes first, above everything else that orders the queue
(docs/preemption.md); with every request in one class the order is the one of prod
before dev, the explicit priority, aging and the tenants' shares."""

from __future__ import annotations

from datetime import datetime

from clusters.admission.snapshot import PROD, Pending

# (class, -priority, promised/aged/neither, share, created, id, tenant): the heap of
# tenant heads. The
# class folds the priority class and prod-before-dev into one number (see :func:`level`).
HeadKey = tuple[int, int, int, float, float, int, str]


def level(p: Pending) -> int:
    """The first thing the heap orders by, smaller first: a higher priority class, then,
    within a class, prod before dev (-1 and 0 in the default class of value 0). A dev
    request promised what a reclaim frees stands with prod: otherwise a prod run it
    preempted, back in line, would take its GPUs back."""
    return -(2 * p.class_value + (1 if p.kind == PROD or p.earmarked else 0))


def head_key(p: Pending, aged_before: datetime, share: float) -> HeadKey:
    """Where ``p`` goes among the tenants' heads when its tenant's share is ``share``."""
    created = p.created_at.timestamp()
    klass = level(p)
    if p.earmarked:
        # A request promised what a reclaim frees goes first within its priority: it is
        # its. Before aged ones too, since a preempted run requeued in its old place is
        # aged and older, and would otherwise take back the GPUs it just gave up.
        return (klass, -p.priority, 0, 0.0, created, p.id, p.tenant)
    if p.created_at <= aged_before:
        # Aged requests go next within their priority, oldest first, whatever their
        # tenant's share: this is what bounds their wait.
        return (klass, -p.priority, 1, 0.0, created, p.id, p.tenant)
    return (klass, -p.priority, 2, share, created, p.id, p.tenant)


# (-class value, dev?, -priority, promised/aged/neither, owner's recent GPU-hours, created,
# id)
TenantOrder = tuple[int, bool, int, int, float, datetime, int]


def tenant_order(p: Pending, aged_before: datetime, owner_use: float = 0.0) -> TenantOrder:
    """``p``'s place in its tenant's own queue. ``owner_use``, its engineer's decayed
    GPU-hours (0 with usage-decayed fair share off), puts the engineers who used less
    recently first among requests of one priority that have not aged."""
    aged = p.earmarked or p.created_at <= aged_before
    return (
        -p.class_value,
        p.kind != PROD and not p.earmarked,
        -p.priority,
        0 if p.earmarked else 1 if aged else 2,
        0.0 if aged else owner_use,
        p.created_at,
        p.id,
    )
