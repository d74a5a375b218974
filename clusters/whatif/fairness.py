"""Fairness over a whole period: Jain's index of what each tenant received against what
it was entitled to.

A tenant's entitlement is its weighted max-min fair part of the GPU-hours the period
delivered, given what each tenant asked for (water-filling: every tenant is entitled to
its weight's part, a tenant that asked for less to what it asked, and what it leaves is
shared out by weight among the others). When every tenant asked for more than its part,
that is GPU-hours over weight. Jain's index is then taken of received over entitled among
the tenants that asked for something: 1 when each got its entitlement. Unlike the
per-moment index (:func:`clusters.whatif.metrics.figures`), it sees a tenant that gets
its part at every moment it waits but loses the nights to another. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping


def jain(xs: list[float]) -> float:
    """Jain's fairness index of ``xs``: ``sum ** 2 / (n * sum of squares)``, 1.0 when all
    are equal (and for none or all zero), ``1 / n`` when one has everything."""
    total = sum(xs)
    squares = sum(x * x for x in xs)
    if not xs or squares == 0:
        return 1.0
    return total * total / (len(xs) * squares)


def entitlements(
    asked: Mapping[str, float], weights: Mapping[str, float], capacity: float
) -> dict[str, float]:
    """Each tenant's weighted max-min fair part of ``capacity`` given what it ``asked``
    (see the module's docstring); tenants that asked for nothing are entitled to 0."""
    out = {t: 0.0 for t in asked}
    open_ = {t for t, a in asked.items() if a > 0}
    left = capacity
    while open_ and left > 1e-9:
        total_weight = sum(weights.get(t, 1.0) for t in open_)
        share = {t: left * weights.get(t, 1.0) / total_weight for t in open_}
        full = {t for t in open_ if asked[t] - out[t] <= share[t]}
        if not full:
            for t in open_:
                out[t] += share[t]
            break
        for t in full:
            left -= asked[t] - out[t]
            out[t] = asked[t]
        open_ -= full
    return out


def weekly_jain(
    received: Mapping[str, float], asked: Mapping[str, float], weights: Mapping[str, float]
) -> float | None:
    """Jain's index of received over entitled GPU-hours among the tenants that asked for
    something (``None``: fewer than two of them, or nothing delivered)."""
    capacity = sum(received.values())
    entitled = entitlements(asked, weights, capacity)
    xs = [received.get(t, 0.0) / entitled[t] for t in sorted(asked) if entitled[t] > 0]
    if len(xs) < 2:
        return None
    return jain(xs)
