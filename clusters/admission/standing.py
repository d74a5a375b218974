"""A waiting request's standing in words and numbers, from where it waits on each flavor
it accepts (:class:`~clusters.admission.snapshot.QueueStatus`). Pure."""

from __future__ import annotations

from datetime import datetime

from clusters.admission.eta import WaitKey
from clusters.admission.snapshot import FlavorStanding, Pending, QueueStatus


def queue_status(
    position: int,
    standing: list[tuple[Pending, int, str, str]],
    etas: dict[WaitKey, datetime | None],
) -> QueueStatus:
    """A waiting request's status from its standing on each flavor it waits on
    ((option, flavor position, reason, message), most preferred first)."""
    first, flavor_position, reason, message = standing[0]
    if len(standing) == 1:
        return QueueStatus(position, flavor_position, reason, message, etas.get(_key(first)))
    flavors = tuple(
        FlavorStanding(o.flavor, fpos, why, text, etas.get(_key(o)))
        for o, fpos, why, text in standing
    )
    known = [f.eta for f in flavors if f.eta is not None]
    names = ", ".join(f.flavor for f in flavors)
    each = " ".join(f"On {f.flavor}: {f.message}" for f in flavors)
    return QueueStatus(
        position,
        flavor_position,
        reason,
        f"It can start on any of {names} and waits for the first with room. {each}",
        min(known) if known else None,
        flavors,
    )


def _key(p: Pending) -> WaitKey:
    return (p.id, p.flavor)
