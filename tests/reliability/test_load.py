"""The load suite at a small size: the whole stack (gunicorn, PostgreSQL, a Celery worker
and beat on Redis, kubesim) under the open-loop generator of ``reliability/load.py``,
steady and then with the worker SIGKILLed mid-traffic. Every request must be answered
without a server error or any failure, and every cluster must converge (the kept ones
ready, the deleted ones deleted). Latencies are the full run's business, not a test's.

The run happens in a child process: the suite points Django at a database of its own
(``benchmarks.support.setup_django``), which this test process must not do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mixed_traffic_with_worker_kills_loses_nothing() -> None:
    # 10 requests/s for 6 s per phase, the worker killed every 2 s of the second phase.
    result = subprocess.run(
        [sys.executable, "-m", "reliability.load", "--summary", "10", "6", "2"],
        cwd=ROOT,
        # A database of its own: a full `make reliability` run may be using the suite's.
        # Three writes in ten (the full run sends one): more creates and deletes for the
        # kills to land among.
        env={
            **os.environ,
            "RELIABILITY_LOAD_DATABASE": "reliability_load_test",
            "RELIABILITY_LOAD_WRITES_IN_TEN": "3",
        },
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steady, killed = json.loads(result.stdout.strip().splitlines()[-1])
    for phase in (steady, killed):
        assert phase["requests"] >= 50, phase
        assert phase["writes"] > 0, phase
        assert phase["server_errors"] == 0, phase
        assert phase["failures"] == [], phase
        assert phase["unconverged"] == [], phase
    assert killed["kills"] >= 2, killed
