"""The collector pause around an admission pass: paused inside, resumed after the last of
overlapping pauses (a pass and a dry-run recording in another thread), never resumed if
it was off before, and resumed when the block raises."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from controlplane.gc_pause import collector_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_paused_inside_and_resumed_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_pauses_resume_with_the_last() -> None:
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(5)
    # This block ended first: the other thread's pause still holds.
    assert not gc.isenabled()
    leave.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_resumed_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the pass failed")
    assert gc.isenabled()
