"""The DRA benchmark at a tiny size (``--quick``: 8 H100 nodes, 8 pods a run): every worker
is bound, a claim for a MIG slice lands on the partitioned nodes only, the admission pass
runs in both worlds, and the section has its tables.

The run happens in a child process, as ``make bench`` runs it (``python -m benchmarks``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_dra_run_binds_every_worker_where_its_devices_are(tmp_path: Path) -> None:
    figures = tmp_path / "dra.json"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.dra", "--quick", "--json", str(figures)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    runs = {s["claim"]: s for s in json.loads(figures.read_text())["scheduling"]}
    assert set(runs) == {"gpu", "whole", "slice"}
    for claim, s in runs.items():
        assert s["bound"] == s["bound_at_create"] == s["pods"] == 8, (claim, s)
        assert s["pods_per_second"] > 0 and 0 < s["p50_ms"] <= s["p99_ms"], (claim, s)
    assert runs["gpu"]["pools"] == {"ext-h100": 8}
    # The DRA fleet's H100 nodes have no nvidia.com/gpu: only claims place GPU workers
    # there, and a 1g.10gb slice exists on the partitioned nodes alone.
    assert runs["slice"]["pools"] == {"dra-h100-mig": 8}
    assert set(runs["whole"]["pools"]) <= {"dra-h100-mig", "dra-h100-dra"}
    passes = json.loads(figures.read_text())["admission"]
    assert [(a["world"], a["waiting"]) for a in passes] == [("extended", 300), ("dra", 300)]
    extended, dra = passes
    assert set(extended["free"]) == {"h100", "l4"}
    assert set(dra["free"]) == {"h100-dra", "h100-1g", "l4"}
    for a in passes:
        assert a["seconds"] > 0
        assert sum(a["admitted"].values()) + sum(a["reasons"].values()) == 300, a
    section = result.stdout
    assert "## DRA: device claims against the extended resource" in section
    assert "| claim: 1 MIG 1g.10gb slice (`mig.nvidia.com`) | 8 of 8 (8 at create) |" in section
    assert "| 300 | dra: h100-1g " in section, section
