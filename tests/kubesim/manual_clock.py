"""A simulator on a clock moved by hand, for the kubesim tests that follow time.

A test module imports ``clock`` and ``sim`` (which overrides conftest's real-clock ``sim``)
and calls :func:`advance` to move simulated time and run what became due.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubesim import KubeSim
from kubesim.clock import ManualClock

__all__ = ["advance", "clock", "sim"]


@pytest.fixture
def clock() -> ManualClock:
    """The simulator's clock, moved by hand."""
    return ManualClock()


@pytest.fixture
def sim(clock: ManualClock) -> Iterator[KubeSim]:
    """A simulator on the manual clock (overrides conftest's)."""
    s = KubeSim(startup_delay=0.0, clock=clock).start()
    try:
        yield s
    finally:
        s.stop()


def advance(sim: KubeSim, clock: ManualClock, seconds: float) -> None:
    """Move simulated time and run what became due (as the ticker would)."""
    clock.advance(seconds)
    sim.cluster.tick()
