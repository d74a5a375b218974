"""Preemption without lost work in Kueue mode, through the real loop (docs/preemption.md,
*Kueue mode*): API -> rows -> worker (reconcile, Kueue's verdicts) -> kubesim (Kueue's
emulation, KubeRay's RayJob controller, simulated Ray drivers) -> the notice endpoint
served by a live server.

Kueue preempts by itself and gives no notice, so the job's simulated driver reports a
checkpoint every few seconds of work (kubesim's ``kubesim.io/job-checkpoint: every-<n>s``:
what a driver using ``gangway_preemption`` periodically would). An urgent job of the same
tenant arrives; Kueue evicts the low one (``withinClusterQueue: LowerPriority`` by the
WorkloadPriorityClasses' values); gangway counts the preemption, sets ``resume_from`` to
the last checkpoint and re-applies the suspended RayJob with ``GANGWAY_RESUME_FROM``;
once the urgent job is done Kueue admits the low one again and it does only what was left.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from kubesim import KubeSim
from tenants.models import PriorityClass
from tests.clusters.engine.conftest import engine_worker, room_for_l4, running_kubesim, wait_for

JOBS = "/api/v1/tenants/acme/jobs/"
RUN_SECONDS = 20
EVERY = "every-3s"
RESUME = "GANGWAY_RESUME_FROM"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with running_kubesim(tmp_path, settings, kueue=True) as sim:
        yield sim


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("job").get(name=name)


def _where(name: str) -> str:
    row = _row(name)
    events = [
        f"{e.at:%H:%M:%S.%f} {e.from_state}->{e.to_state} {e.reason}: {e.message[:90]}"
        for e in row.events.order_by("at")
    ]
    said = "\n  ".join(events)
    return f"{row.state} {row.queue_message} {row.checkpoint_uri!r} {row.resume_from!r}\n  {said}"


def _job(name: str, priority_class: str) -> dict[str, Any]:
    return {
        "name": name,
        "entrypoint": "python train.py",
        "flavor": "l4",
        "workers": 1,
        "kind": "dev",
        "priority_class": priority_class,
    }


def _runs(runtime: Any, name: str) -> list[Any]:
    """The checkpointing drivers started for RayJob ``name``, in order."""
    return [run for run in runtime.checkpointing_runs if run.rayjob == name]


def _resume_envs(rayjob: dict[str, Any]) -> tuple[str, str]:
    """GANGWAY_RESUME_FROM as the RayJob gives it to its submitter and to its driver
    (the runtime env's ``env_vars``)."""
    spec = rayjob["spec"]
    submitter = spec["submitterPodTemplate"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in submitter.get("env") or []}
    runtime = yaml.safe_load(spec.get("runtimeEnvYAML") or "") or {}
    return env.get(RESUME, ""), (runtime.get("env_vars") or {}).get(RESUME, "")


def test_kueue_preempts_a_low_job_that_resumes_from_its_last_checkpoint(
    transactional_db: Any,
    kubesim: Any,
    live_server: Any,
    tmp_path: Path,
    as_user: Any,
    alice: Any,
    bob: Any,
    acme: Any,
    l4: Any,
) -> None:
    # The seeded classes (a flush between transactional tests removes them).
    PriorityClass.objects.update_or_create(name="low", defaults={"value": -100})
    PriorityClass.objects.update_or_create(
        name="urgent", defaults={"value": 1000, "may_preempt": True}
    )
    room_for_l4(acme, l4, 1)  # one L4 GPU in acme's ClusterQueue: room for one job
    runtime = kubesim.cluster.rayruntime
    # Every driver (the urgent job's too) works RUN_SECONDS and checkpoints periodically.
    kubesim.set_rayjob_defaults(run_seconds=RUN_SECONDS, pending_seconds=0, checkpoint=EVERY)
    gw = get_gateway()
    with engine_worker(tmp_path, PREEMPTION_BASE_URL=live_server.url):
        assert as_user(bob).post(JOBS, _job("train", "low"), format="json").status_code == 201
        first = wait_for(
            lambda: _runs(runtime, "train") and _runs(runtime, "train")[0],
            what=lambda: f"the driver: {_where('train')}",
            timeout=90,
        )
        rayjob = gw.get("ray.io/v1", "RayJob", "train", "gw-acme")
        assert rayjob is not None
        assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "low-dev"
        # Its checkpoints reach gangway through the notice endpoint, as they are saved.
        wait_for(
            lambda: len(first.reported) >= 2 and _row("train").checkpoint_uri in first.reported[1:],
            what=lambda: f"two checkpoints recorded: {first.reported} {_where('train')}",
            timeout=60,
        )

        assert as_user(alice).post(JOBS, _job("hotfix", "urgent"), format="json").status_code == 201
        requeued = wait_for(
            lambda: (r := _row("train")).preemptions == 1 and r.state == "queued" and r,
            what=lambda: f"the low job requeued: {_where('train')}; {_where('hotfix')}",
            timeout=90,
        )
        # Kueue preempted it for priority in the tenant's ClusterQueue, with no notice.
        moved = requeued.events.get(to_state="queued", reason="Preempted")
        assert moved.from_state == "running"
        assert "prioritization in the ClusterQueue" in moved.message
        assert not requeued.events.filter(reason="preemption_notice").exists()
        assert not requeued.events.filter(to_state="failed").exists()
        assert requeued.notice_at is None and not requeued.holds_gpus

        # Once its driver is gone (it reported what it saved), it resumes from the last.
        def driver_gone() -> bool:
            with kubesim.cluster.lock:
                live = [r.checkpointing for t in runtime.heads.values() for r in t.values()]
            return all(run is not first for run in live)

        wait_for(driver_gone, what="the preempted driver stopped", timeout=60)
        resumed = wait_for(
            lambda: (r := _row("train")).resume_from == first.reported[-1] and r,
            what=lambda: f"resume_from {first.reported[-1]}: {_where('train')}",
        )
        assert resumed.checkpoint_uri == first.reported[-1]
        assert resumed.preemptions == 1
        # Its RayJob, suspended by Kueue, is applied again with the checkpoint.
        suspended = wait_for(
            lambda: (
                (rj := gw.get("ray.io/v1", "RayJob", "train", "gw-acme"))
                and _resume_envs(rj) == (first.reported[-1], first.reported[-1])
                and rj
            ),
            what=lambda: f"the RayJob re-applied with {RESUME}: {_where('train')}",
        )
        assert suspended["spec"]["suspend"] is True

        # The urgent job runs meanwhile; the low one waits for it.
        wait_for(
            lambda: _row("hotfix").state == "succeeded",
            what=lambda: f"the urgent job done: {_where('hotfix')}",
            timeout=90,
        )
        done = wait_for(
            lambda: _row("train").state == "succeeded" and _row("train"),
            what=lambda: f"the low job readmitted and done: {_where('train')}",
            timeout=180,
        )
    runs = _runs(runtime, "train")
    assert len(runs) == 2
    second = runs[1]
    assert first.resume_from == "" and first.resumed_step == 0
    assert second.resume_from == first.reported[-1]
    assert 0 < second.resumed_step < RUN_SECONDS
    # All its work and no more: the second run did what was left after the checkpoint.
    assert second.resumed_step + second.remaining() == RUN_SECONDS
    # It started again only once the urgent job's driver had done all of its work.
    (urgent,) = _runs(runtime, "hotfix")
    assert urgent.resumed_step == 0
    assert second.start >= urgent.start + urgent.remaining()
    assert done.preemptions == 1 and done.job.job_status == "SUCCEEDED"
    assert done.events.filter(reason="Preempted").count() == 1
