"""The fleet benchmark at a tiny size (``--quick``: 8 clusters per member over 2 and then
3 kubesim members): every cluster made through the API becomes ready, placement spreads
them over every member, and the section has its figures and the pass check.

The run happens in a child process: the benchmark points Django at a database of its own
(``benchmarks.support.setup_django``), which this test process must not do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import support

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_fleet_run_makes_every_cluster_ready_on_every_member(tmp_path: Path) -> None:
    suffix = f"fleet_smoke_{os.getpid()}"  # dropped after: a full run may use its own
    figures = tmp_path / "fleet.json"
    command = [sys.executable, "-m", "benchmarks.fleet", "--quick", "--suffix", suffix]
    try:
        result = subprocess.run(
            [*command, "--json", str(figures)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    finally:
        _drop(suffix)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(figures.read_text())
    assert [(r["members"], r["clusters"]) for r in runs] == [(2, 16), (3, 24)]
    for r in runs:
        assert r["failures"] == [], r["failures"][:3]
        assert r["ready"] == r["clusters"], r
        members = {f"member-{i}" for i in range(r["members"])}
        # Each member's share is one node of 8 GPUs: the first fills, the rest spill over.
        assert r["placed"] == dict.fromkeys(members, 8), r["placed"]
        passes = r["passes"]["members"]
        assert set(passes) == members
        for name, member in passes.items():
            assert member["rows"] == 8, (name, member)
            assert member["full_folded"] == 8, (name, member)
            assert member["steady_folded"] == 0, (name, member)
            assert member["full"] > 0 and member["full_calls"] > 0, (name, member)
        assert r["kube_requests"] >= r["clusters"], r
    section = result.stdout
    assert "## Fleet: clusters spread over several kubesim members" in section
    assert "| 2 | 16 | 8 to 8 |" in section and "| 3 | 24 | 8 to 8 |" in section, section
    assert "clusters/s**" in section
    assert "A member's pass at 8 clusters per member: full" in section, section
    assert "Failed creates: 0; runs with clusters not ready: 0." in section, section


def _drop(suffix: str) -> None:
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway")
    name = f"{url.rsplit('/', 1)[-1]}_{suffix}"
    with support.admin_connection(url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
