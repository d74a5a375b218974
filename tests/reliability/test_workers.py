"""``reliability.workers`` at its quick size: a round of provisioning, suspension,
resumption, job runs and deletion with worker faults in each phase loses nothing."""

from __future__ import annotations

from typing import Any

import pytest

from reliability import workers
from reliability.rig import seed

pytestmark = pytest.mark.slow


def test_worker_faults_lose_nothing(make_rig: Any, inbox: Any) -> None:
    rig = make_rig(**inbox.env())
    result = workers.exercise(rig, seed(), inbox, quick=True)
    assert result.total_faults == 5 * workers.QUICK["faults_per_phase"]
    assert result.unconverged == [], result.audit.details
    assert result.audit.clean, result.audit.details
    # 2 clusters ready, 1 suspended, ready again, 1 job finished: at least 5 mails.
    assert result.deliveries >= 5, workers.section(result, quick=True)
    assert result.mail_lost == 0
    # SMTP has no idempotency key: a worker killed after the server took a mail and
    # before the row was marked sent sends it again (with the same X-Gangway-Delivery,
    # on which receivers de-duplicate). At most once per kill per pool child.
    kills = sum(n for (_, kind), n in result.faults.items() if kind != "SIGTERM")
    assert result.mail_twice <= 2 * kills
    assert "Worker faults" in workers.section(result, quick=True)
