"""``reliability.infra`` at its quick size: Redis and PostgreSQL (the suite's own
throwaway servers) stopped and restarted under the stack. Every request the API accepted
converges, nothing is made twice or left behind, and while the database is down the API
and the dashboard answer 503 with a clear body, then recover on their own."""

from __future__ import annotations

from typing import Any

import pytest

from reliability import infra

pytestmark = pytest.mark.slow


def test_broker_and_database_faults(django_db_blocker: Any) -> None:
    with django_db_blocker.unblock(), infra.stack() as stack:
        result = infra.exercise(stack, quick=True)
    report = infra.section(result, quick=True)
    assert result.refused == [] and result.unconverged == [], report
    assert result.audit.clean, report
    asked = sum(result.probes.values())
    assert asked == 2 * infra.QUICK["postgres"], report
    assert result.probes == {("API", "clear 503"): 2, ("dashboard", "clear 503"): 2}, report
    assert len(result.recovery) == infra.QUICK["postgres"], report
