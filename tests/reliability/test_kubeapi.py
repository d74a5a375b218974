"""``reliability.kubeapi`` at its quick size: errors, dropped connections, paged lists,
slow answers, a kubesim that forgets everything and permanent errors lose nothing, make
nothing twice and retry nothing permanent."""

from __future__ import annotations

from typing import Any

import pytest

from reliability import kubeapi
from reliability.rig import seed

pytestmark = pytest.mark.slow


def test_kubernetes_api_faults_lose_nothing(make_rig: Any) -> None:
    rig = make_rig(**kubeapi.WORKER_ENV)
    result = kubeapi.exercise(rig, seed(), quick=True)
    report = kubeapi.section(result, quick=True)
    print(report)
    assert None not in result.convergence.values(), report
    assert result.audit.clean, result.audit.details
    assert result.converged == result.asked
    assert result.faults["429"] and result.faults["0"] and result.faults["delay"], report
    assert result.permanent_retries == 0
    assert result.throttled_too_soon == [], report
    assert result.reads_too_soon == [], report
