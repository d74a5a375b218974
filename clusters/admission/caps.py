"""The per-engineer caps on dev clusters: one rule for submission, dry-run and admission.

A tenant may cap how many dev clusters, and dev GPUs, one engineer has at once. Every
live dev request of the engineer asked for before this one counts (running, admitted,
suspended, queued), so queueing more than the cap allows cannot dodge it. In a pass, a
queued request counts only the owner's queued ones ahead of it, so a lower-priority
request never holds back a higher one and a lowered cap lets the front go first.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class CapBreach:
    """Which cap a request would pass: ``limit`` is ``"clusters"`` or ``"gpus"``;
    ``clusters`` and ``gpus`` what the owner already has (as counted above)."""

    limit: str
    clusters: int
    gpus: Decimal
    cap: int


def user_cap_breach(
    *,
    max_clusters: int | None,
    max_gpus: int | None,
    clusters: int,
    gpus: Decimal,
    more_gpus: Decimal,
) -> CapBreach | None:
    """The cap one more dev request of ``more_gpus`` would pass, or ``None``.

    ``clusters`` and ``gpus`` are the owner's live dev requests that count before this
    one (see the module docstring); a cap of ``None`` is no cap.
    """
    if max_clusters is not None and clusters + 1 > max_clusters:
        return CapBreach("clusters", clusters, gpus, max_clusters)
    if max_gpus is not None and gpus + more_gpus > max_gpus:
        return CapBreach("gpus", clusters, gpus, max_gpus)
    return None
