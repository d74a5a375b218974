"""A real Ray driver preempted twice completes with all its work (docs/preemption.md).

kubesim runs real Ray for acme's job (``real_ray=1``, its slot kept for acme's namespace;
globex's cluster stays simulated), a real Celery worker runs the engine, and a live
server answers the notice endpoint. The job's driver (``checkpointing_driver.py``) uses
``gangway_preemption`` as a user's would: it polls for notice, saves a checkpoint, reports
its ``file://`` URI to ``GANGWAY_PREEMPTION_URL`` and resumes from ``GANGWAY_RESUME_FROM``
on its next run. Its own files show each step done exactly once across the three runs.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesim import KubeSim
from tests.clusters.engine.conftest import engine_worker, running_kubesim, wait_for
from tests.clusters.engine.test_preemption_e2e import (
    GLOBEX_CLUSTERS,
    JOBS,
    _borrowing_l4,
    _row,
    _where,
    globex_lets_go,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("real-ray")]

DRIVER = Path(__file__).with_name("checkpointing_driver.py")
STEPS = 30
# Long enough for the driver to finish its step (1 s), hear of the notice and report.
GRACE_SECONDS = "8"
# A real head on a busy two-core machine takes a minute or two to answer.
RUN_TIMEOUT = 400.0


@pytest.fixture
def real_kubesim(tmp_path: Path, settings: Any, acme: Any) -> Iterator[KubeSim]:
    """A kubesim whose one real Ray slot goes to RayClusters in acme's namespace."""
    procs = str(tmp_path / "procs")
    with running_kubesim(tmp_path, settings, procs_root=procs, real_ray=1) as sim:
        assert sim.cluster.realray is not None
        sim.cluster.realray.namespaces = {acme.namespace}
        yield sim


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _last_output(procs: Path, lines: int = 6) -> str:
    """The last lines each real process behind a pod wrote, newest pod first: what a
    timeout needs to say where a run stuck (the Ray head, its workers, the submitter)."""
    logs = sorted(procs.glob("*/*/*/output.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    said = []
    for log in logs[:6]:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        said.append(f"--- {log.relative_to(procs)}\n" + "\n".join(tail))
    return "\n".join(said)


def _preempt(api_globex: Any, work: Path, run_index: int) -> None:
    """Once run ``run_index`` has done two steps of its own, globex asks for its GPU; the
    job is given notice, checkpoints, is requeued; globex lets go again."""
    procs = work.parent / "procs"
    wait_for(
        lambda: len(_lines(work / "runs.log")) > run_index,
        what=lambda: f"run {run_index} of the driver: {_where('train')}\n{_last_output(procs)}",
        timeout=RUN_TIMEOUT,
    )
    before = len(_lines(work / "steps.log"))
    wait_for(lambda: len(_lines(work / "steps.log")) >= before + 2, what="two steps")
    assert _row("train").state == "running", _where("train")
    mine = {"name": f"mine-{run_index}", "flavor": "l4", "workers": 1}
    assert api_globex.post(GLOBEX_CLUSTERS, mine).status_code == 201
    requeued = wait_for(
        lambda: (r := _row("train")).preemptions == run_index + 1 and r,
        what=lambda: f"the job requeued: {_where('train')}",
        timeout=120,
    )
    saved = sorted(work.glob("step-*.json"), key=lambda p: p.stat().st_mtime)
    assert saved, _where("train")
    assert requeued.resume_from == saved[-1].as_uri(), _where("train")
    globex_lets_go(api_globex, mine["name"], "train")


def test_a_real_ray_driver_preempted_twice_completes_with_all_its_work(
    transactional_db: Any,
    real_kubesim: KubeSim,
    live_server: Any,
    tmp_path: Path,
    as_user: Any,
    alice: Any,
    charlie: Any,
    acme: Any,
    globex: Any,
    l4: Any,
) -> None:
    _borrowing_l4(acme, globex, l4)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PREEMPTION_BASE_URL": live_server.url, "RECLAIM_GRACE_SECONDS": GRACE_SECONDS}
    with engine_worker(tmp_path, **env):
        body = {
            "name": "train",
            "entrypoint": f"{sys.executable} {DRIVER} {work} {STEPS}",
            "flavor": "l4",
            "workers": 1,
            "kind": "dev",
        }
        assert as_user(alice).post(JOBS, body, format="json").status_code == 201
        globex_api = as_user(charlie)
        _preempt(globex_api, work, 0)
        _preempt(globex_api, work, 1)
        done = wait_for(
            lambda: _row("train").state in ("succeeded", "failed") and _row("train"),
            what=lambda: f"the job done: {_where('train')}",
            timeout=RUN_TIMEOUT,
        )
    assert done.state == "succeeded", _where("train")
    # Every step exactly once across the three runs, in order.
    assert _lines(work / "steps.log") == [str(step) for step in range(STEPS)]
    runs = [line.split(" ") for line in _lines(work / "runs.log")]
    assert len(runs) == 3 and runs[0] == ["-", "0"], runs
    # Each later run started from the checkpoint the one before reported.
    for resumed, first in runs[1:]:
        assert resumed == (work / f"step-{first}.json").as_uri(), runs
    assert 2 <= int(runs[1][1]) < int(runs[2][1]) < STEPS, runs
    assert done.preemptions == 2 and done.resume_from == runs[2][0]
    assert done.events.filter(reason="preempted", to_state="queued").count() == 2
    resumed_from = [e.message for e in done.events.filter(reason="preempted").order_by("at")]
    assert [r for r, _ in runs[1:]] == [
        next(w for w in m.split() if w.startswith("file://")).rstrip(".") for m in resumed_from
    ], resumed_from
    assert done.events.filter(reason="checkpoint_saved").count() >= 2
