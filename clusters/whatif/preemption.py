"""Work lost when a run is preempted, and when it is stopped: pure accounting.

A run that carries work (``Demand.checkpoint_every`` set) saves a checkpoint every
``checkpoint_every`` seconds of its run (a run resumed from a checkpoint starts counting
again); the time those periodic saves take is not modelled. Stopped, it keeps the work up
to its last checkpoint and loses the rest, which its next run does again.

Today's policy warns a victim ``reclaim_grace`` before it is stopped, but the run does not
act on the warning: it works on and loses what it did since its last periodic checkpoint.
With notice (``World.notice``, issue 49), a run that checkpoints on notice
(``Demand.save_seconds`` set) saves the state it had when told, taking ``save_seconds``,
and is stopped once saved: it loses nothing, the save being GPU time that does no work.
If the notice is shorter than the save, it is stopped at the end of the notice with the
save unfinished and loses what it did since its last periodic checkpoint.

A run that carries no work (``checkpoint_every`` ``None``: an interactive cluster) loses
nothing that counts: it queues again with what was left of its life, as it always did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def stop_after(grace: float, *, notice: bool, save_seconds: float | None) -> float:
    """Seconds from the warning to the stop: the save's when the run is given notice and
    saves within it, else the whole grace."""
    if notice and save_seconds is not None and save_seconds <= grace:
        return save_seconds
    return grace


def periodic_kept(ran: float, every: float) -> float:
    """Work up to the last periodic checkpoint of a run that ran ``ran`` seconds."""
    if not math.isfinite(every) or every <= 0:
        return 0.0
    return math.floor(ran / every) * every


@dataclass(frozen=True)
class Kept:
    """What a stopped run keeps and loses, in seconds of its run's work."""

    kept: float
    lost: float


def work_kept(
    ran: float,
    *,
    checkpoint_every: float | None,
    warned_at: float | None = None,
    grace: float = 0.0,
    notice: bool = False,
    save_seconds: float | None = None,
) -> Kept:
    """What a run that ran ``ran`` seconds keeps when stopped; ``warned_at``: how far into
    the run it was warned (``None``: stopped without warning), ``grace`` the warning's
    length, ``notice`` whether the warning is a notice the run may act on."""
    if checkpoint_every is None:
        return Kept(ran, 0.0)
    saved_on_notice = (
        warned_at is not None
        and notice
        and save_seconds is not None
        and save_seconds <= grace
        and ran >= warned_at + save_seconds
    )
    if saved_on_notice:
        assert warned_at is not None
        # The state it had when told; the save itself does no work.
        return Kept(warned_at, 0.0)
    kept = periodic_kept(ran, checkpoint_every)
    return Kept(kept, ran - kept)
