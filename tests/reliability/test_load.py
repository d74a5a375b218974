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

from benchmarks import support

ROOT = Path(__file__).resolve().parents[2]


def test_mixed_traffic_with_worker_kills_loses_nothing() -> None:
    # A database of this run's own, dropped after: a full `make reliability` run, or
    # another checkout's suite on the same server, may be running the generator too, and
    # two generators in one database ask for the same cluster names.
    suffix = f"reliability_load_test_{os.getpid()}"
    try:
        result = _run_the_generator(suffix)
    finally:
        _drop(suffix)
    assert result.returncode == 0, result.stderr[-3000:]
    steady, killed = json.loads(result.stdout.strip().splitlines()[-1])
    for phase in (steady, killed):
        assert phase["requests"] >= 50, phase
        assert phase["writes"] > 0, phase
        assert phase["server_errors"] == 0, phase
        assert phase["failures"] == [], phase
        assert phase["unconverged"] == [], phase
    assert killed["kills"] >= 2, killed


def _run_the_generator(suffix: str) -> subprocess.CompletedProcess[str]:
    # 10 requests/s for 6 s per phase, the worker killed every 2 s of the second phase.
    return subprocess.run(
        [sys.executable, "-m", "reliability.load", "--summary", "10", "6", "2"],
        cwd=ROOT,
        # Three writes in ten (the full run sends one): more creates and deletes for the
        # kills to land among.
        env={
            **os.environ,
            "RELIABILITY_LOAD_DATABASE": suffix,
            "RELIABILITY_LOAD_WRITES_IN_TEN": "3",
        },
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )


def _drop(suffix: str) -> None:
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway")
    name = f"{url.rsplit('/', 1)[-1]}_{suffix}"
    with support.admin_connection(url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
