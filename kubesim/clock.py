"""Time as kubesim's time-driven behaviour sees it, so that tests can move it by hand.

:class:`Clock` reads the wall clock; :class:`ManualClock` stands still until a test calls
:meth:`ManualClock.advance`, so an hour's expiry is tested without sleeping an hour.
Everything that depends on elapsed time (TTLs, retries, deadlines, drivers, backoffs,
pod logs, node boots) reads it, and so do the time stamps those write (``util.stamp``);
others come from the real clock (``util.now``). ``advance`` runs nothing itself: the
ticker thread does within 50 ms, or a test calls ``sim.cluster.tick()``.
"""

from __future__ import annotations

import threading
import time


class Clock:
    """The real clock: seconds since the epoch, as ``time.time``."""

    def time(self) -> float:
        """Seconds since the epoch."""
        return time.time()


class ManualClock(Clock):
    """A clock that moves only when told to (tests).

    It starts at the real time of its creation (or ``start``), so that deadlines derived
    from the time stamps written into objects stay comparable with it.
    """

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        # The ticker thread reads the clock while a test advances it.
        self._lock = threading.Lock()

    def time(self) -> float:
        """The current (frozen) time."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds``; returns the new time."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds
            return self._now
