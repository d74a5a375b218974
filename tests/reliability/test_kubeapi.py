"""``reliability.kubeapi`` at its quick size: every fault kind kubesim injects, on every
verb the engine sends, while clusters are provisioned, reconciled, suspended, resumed, run
as jobs and deleted; then a kubesim that forgets everything and permanent errors. Nothing
lost, nothing made twice or left behind, GPU holds released once, nothing permanent
retried, every 429 waited out."""

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
    assert result.stuck == [], report
    assert result.audit.clean, result.audit.details
    assert result.converged == result.asked
    assert result.releases_not_once == [], report
    # Every kind injected, on every verb the engine sent, and in every phase.
    kinds = {kubeapi._kind(code) for code in kubeapi.KINDS}
    assert {k for k, n in result.faults.items() if n} >= kinds | {"422"}, report
    verbs = {verb for _, verb in result.engine_requests}
    faulted = {verb for (_, verb, _), n in result.matrix.items() if n}
    assert verbs >= {"list", "watch", "get", "create", "apply", "delete", "log", "proxy"}
    assert faulted == verbs, report
    phases = {phase for (phase, _, _), n in result.matrix.items() if n}
    assert phases >= set(kubeapi.PHASES), report
    assert result.permanent_retries == 0
    assert result.throttled_too_soon == [], report
    assert result.reads_too_soon == [], report


def _seen(at: float, code: int | None = None, client: str = "gangway-engine (pid 1)") -> Any:
    from kubesim.faults import Seen

    answered = at if code is not None else None
    return Seen(at, "GET", "/apis/ray.io/v1/rayclusters", code, client, answered)


def test_a_read_is_judged_by_when_its_process_could_know_of_the_429() -> None:
    # Another thread of the refused process, in flight while the 429 was answered: a
    # race, not a retry; the read after it is judged, and that one did not wait.
    result = kubeapi.Result()
    kubeapi._retry_after([_seen(10.0, 429), _seen(10.01), _seen(10.3)], result)
    assert [r.split(" by ")[0] for r in result.reads_too_soon] == [
        "GET /apis/ray.io/v1/rayclusters"
    ]
    assert "0.30 s after" in result.reads_too_soon[0]
    # A read once the process knew, and later than Retry-After: it waited.
    result = kubeapi.Result()
    kubeapi._retry_after([_seen(10.0, 429), _seen(10.01), _seen(11.0)], result)
    assert result.reads_too_soon == []
    # Another process learns of it through the shared cache, a little later still.
    result = kubeapi.Result()
    other = "gangway-engine (pid 2)"
    kubeapi._retry_after([_seen(10.0, 429), _seen(10.08, client=other), _seen(10.2)], result)
    assert len(result.reads_too_soon) == 1 and "0.20 s after" in result.reads_too_soon[0]
