"""The timer heap every timed kubesim controller keeps (kubesim/controller.py)."""

from kubesim.controller import TimerHeap


def test_due_timers_mark_their_objects_dirty_earliest_first() -> None:
    timers = TimerHeap()
    timers.wake_at(5.0, "ns", "late")
    timers.wake_at(1.0, "ns", "early")
    timers.wake_at(9.0, "ns", "not-yet")
    dirty: set[tuple[str, str]] = set()

    assert timers.mark_due(5.0, dirty) is True
    assert dirty == {("ns", "early"), ("ns", "late")}
    assert timers.pop_due(8.9) == []
    assert timers.pop_due(9.0) == [(9.0, "ns", "not-yet")]


def test_a_timer_set_twice_for_the_same_time_fires_once() -> None:
    timers = TimerHeap()
    timers.wake_at(2.0, "ns", "a")
    timers.wake_at(2.0, "ns", "a")
    timers.wake_at(3.0, "ns", "a")

    assert timers.pop_due(3.0) == [(2.0, "ns", "a"), (3.0, "ns", "a")]
    assert timers.mark_due(10.0, set()) is False
    # Once fired, the same time may be set again.
    timers.wake_at(2.0, "ns", "a")
    assert timers.pop_due(10.0) == [(2.0, "ns", "a")]
