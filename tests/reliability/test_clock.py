"""``reliability.clock`` at its quick size: TTLs and idle timers that ran out while the
worker was down are acted on once each after it comes back, and never twice."""

from __future__ import annotations

from typing import Any

import pytest

from reliability import clock
from reliability.rig import seed

pytestmark = pytest.mark.slow


def test_timers_that_ran_out_while_the_worker_was_down(make_rig: Any) -> None:
    rig = make_rig(**clock.WORKER_ENV)
    result = clock.exercise(rig, seed(), quick=True)
    report = clock.section(result, quick=True)
    assert result.convergence is not None, report
    assert (result.missed, result.doubled, result.wrong) == (0, 0, []), report
