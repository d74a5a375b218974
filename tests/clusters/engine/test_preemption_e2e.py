"""Preemption without lost work through the real loop (docs/preemption.md): API -> rows ->
worker (admission, reconcile) -> kubesim (KubeRay's RayJob controller, simulated Ray
drivers) -> the notice endpoint served by a live server.

acme's job borrows globex's L4 GPU; each time globex asks for it back, the job is given
notice (on its pods, as a file and by the endpoint), its simulated driver reports a
checkpoint (kubesim's ``kubesim.io/job-checkpoint: on-notice``: the driver does what one
using ``gangway_preemption`` would), and at the deadline the job is requeued with that
checkpoint and resumes from it when globex lets go. A driver that ignores the notice is
requeued at the deadline all the same, with no checkpoint to resume from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusters.domain import preemption as pre
from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest
from notifications.models import Delivery
from tenants.models import Quota
from tests.clusters.engine.conftest import engine_worker, wait_for

JOBS = "/api/v1/tenants/acme/jobs/"
GLOBEX_CLUSTERS = "/api/v1/tenants/globex/clusters/"
RUN_SECONDS = 45
GRACE_SECONDS = "4"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("job").get(name=name)


def _borrowing_l4(acme: Any, globex: Any, l4: Any) -> None:
    """One L4 GPU in the cohort, globex's; acme may borrow it."""
    for tenant in (acme, globex):
        tenant.max_dev_clusters_per_user = tenant.max_dev_gpus_per_user = 50
        tenant.save()
    Quota.objects.filter(flavor=l4).update(gpus=0, borrow_limit=0)
    Quota.objects.filter(flavor=l4, tenant=acme).update(gpus=0, borrow_limit=1)
    Quota.objects.filter(flavor=l4, tenant=globex).update(gpus=1, borrow_limit=0)
    l4.node_count = 10
    l4.save()


def _where(name: str) -> str:
    row = _row(name)
    events = [
        f"{e.at:%H:%M:%S.%f} {e.from_state}->{e.to_state} {e.reason}: {e.message[:90]}"
        for e in row.events.order_by("at")
    ]
    said = "\n  ".join(events)
    return f"{row.state} {row.queue_reason} {row.queue_message} {row.resume_from!r}\n  {said}"


def _head_pod(pk: int) -> Any:
    pods = get_gateway().list("v1", "Pod", label_selector=f"gangway.dev/cluster-id={pk}")
    heads = [p for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "head"]
    return heads[0] if heads else None


def _preempt_once(api_globex: Any, kubesim: Any, job_name: str, run_index: int) -> None:
    """globex asks for its GPU while run ``run_index`` of the job has done some work;
    the job is given notice, then requeued; globex lets go again."""
    runtime = kubesim.cluster.rayruntime
    wait_for(
        lambda: len(runtime.checkpointing_runs) > run_index,
        what=lambda: f"run {run_index}: {_where(job_name)}",
        timeout=90,
    )
    run = runtime.checkpointing_runs[run_index]
    clock = kubesim.cluster.clock
    wait_for(lambda: run.done_at(clock.time()) >= run.resumed_step + 2, what="two seconds of work")
    mine = {"name": f"mine-{run_index}", "flavor": "l4", "workers": 1}
    assert api_globex.post(GLOBEX_CLUSTERS, mine).status_code == 201
    noticed = wait_for(
        lambda: _row(job_name).notice_at and _row(job_name),
        what=lambda: f"the notice: {_where(job_name)}; globex: {_where(mine['name'])}",
        timeout=120,
    )
    assert noticed.reclaim_after and noticed.notice_reason
    # The notice is on its running head pod, as the downward-API file shows it.
    head = wait_for(
        lambda: (
            (p := _head_pod(noticed.pk))
            and pre.NOTICE_ANNOTATION in (p["metadata"].get("annotations") or {})
            and p
        ),
        what="the notice on the head pod",
    )
    assert head["metadata"]["annotations"][pre.REASON_ANNOTATION] == noticed.notice_reason
    volumes = {v["name"]: v for v in head["spec"]["volumes"]}
    assert volumes[pre.PODINFO_VOLUME]["downwardAPI"]["items"][0]["fieldRef"] == {
        "fieldPath": "metadata.annotations"
    }
    # The driver saved its state when told; the job goes back to the queue with it.
    requeued = wait_for(
        lambda: (r := _row(job_name)).preemptions == run_index + 1 and r,
        what=lambda: f"the job requeued: {_where(job_name)}",
        timeout=120,
    )
    assert requeued.events.filter(reason="preempted", to_state="queued").count() == run_index + 1
    assert run.reported and requeued.resume_from == run.reported[-1]
    assert requeued.checkpoint_uri == run.reported[-1]
    assert requeued.notice_at is None
    globex_lets_go(api_globex, mine["name"], job_name)


def globex_lets_go(api_globex: Any, mine: str, job_name: str) -> None:
    """globex's cluster ``mine`` gets the GPU the job gave back; globex deletes it."""
    wait_for(
        lambda: _row(mine).state == "ready",
        what=lambda: f"globex's cluster: {_where(mine)}; job: {_where(job_name)}",
        timeout=180,
    )
    assert api_globex.delete(GLOBEX_CLUSTERS + mine + "/").status_code == 202


def test_a_job_preempted_twice_completes_with_all_its_work(
    transactional_db: Any,
    kubesim: Any,
    live_server: Any,
    tmp_path: Path,
    as_user: Any,
    alice: Any,
    charlie: Any,
    acme: Any,
    globex: Any,
    l4: Any,
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=RUN_SECONDS, pending_seconds=0, checkpoint="on-notice")
    _borrowing_l4(acme, globex, l4)
    env = {"PREEMPTION_BASE_URL": live_server.url, "RECLAIM_GRACE_SECONDS": GRACE_SECONDS}
    with engine_worker(tmp_path, **env):
        api = as_user(alice)
        body = {
            "name": "train",
            "entrypoint": "python train.py",
            "flavor": "l4",
            "workers": 1,
            "kind": "dev",
        }
        assert api.post(JOBS, body, format="json").status_code == 201
        submitted = _row("train").created_at

        globex_api = as_user(charlie)
        _preempt_once(globex_api, kubesim, "train", 0)
        _preempt_once(globex_api, kubesim, "train", 1)

        done = wait_for(
            lambda: _row("train").state == "succeeded" and _row("train"),
            what=lambda: f"the job done: {_where('train')}",
            timeout=240,
        )
        # The worker delivers the notifications: waited for while it still runs (the
        # job's end is delivered after the job is seen done).
        wanted = {"preemption_notice", "preempted", "job_finished"}
        wait_for(
            lambda: (
                wanted
                <= set(Delivery.objects.filter(event__cluster=done).values_list("kind", flat=True))
            ),
            what="the owner notified of the notice, the preemption and the end",
        )
    runs = kubesim.cluster.rayruntime.checkpointing_runs
    assert len(runs) == 3
    first, second, third = runs
    # Each run after a preemption started from the checkpoint the one before it saved.
    assert first.resume_from == "" and first.resumed_step == 0
    assert second.resume_from == first.reported[-1]
    assert third.resume_from == second.reported[-1]
    assert 0 < second.resumed_step < third.resumed_step < RUN_SECONDS
    # All its work and no more: the last run did what was left after the last step.
    assert third.resumed_step + third.remaining() == RUN_SECONDS
    assert done.preemptions == 2 and done.created_at == submitted
    # Its RayJob carried the checkpoint to the driver in its runtime env and containers.
    moves = [e for e in done.events.all() if e.reason == "preempted"]
    assert len(moves) == 2 and all("resumes from sim://train/step-" in e.message for e in moves)
    saved = done.events.filter(reason="checkpoint_saved").count()
    assert saved >= 2


def test_a_job_that_ignores_the_notice_is_requeued_at_the_deadline(
    transactional_db: Any,
    kubesim: Any,
    live_server: Any,
    tmp_path: Path,
    as_user: Any,
    alice: Any,
    charlie: Any,
    acme: Any,
    globex: Any,
    l4: Any,
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    _borrowing_l4(acme, globex, l4)
    env = {"PREEMPTION_BASE_URL": live_server.url, "RECLAIM_GRACE_SECONDS": GRACE_SECONDS}
    with engine_worker(tmp_path, **env):
        api = as_user(alice)
        body = {
            "name": "stubborn",
            "entrypoint": "python loop.py",
            "flavor": "l4",
            "workers": 1,
            "kind": "dev",
        }
        assert api.post(JOBS, body, format="json").status_code == 201
        wait_for(lambda: _row("stubborn").state == "running", what="running", timeout=90)
        mine = {"name": "mine", "flavor": "l4", "workers": 1}
        assert as_user(charlie).post(GLOBEX_CLUSTERS, mine).status_code == 201
        noticed = wait_for(lambda: _row("stubborn").notice_at and _row("stubborn"), what="notice")
        deadline = noticed.reclaim_after
        requeued = wait_for(
            lambda: (r := _row("stubborn")).preemptions == 1 and r,
            what="requeued at the deadline",
            timeout=120,
        )
        moved = requeued.events.get(reason="preempted")
        # Not before its deadline, and with nothing to resume from.
        assert moved.at >= deadline
        assert requeued.resume_from == "" and requeued.checkpoint_uri == ""
        assert "starts again from the beginning" in moved.message
        wait_for(lambda: _row("mine").state == "ready", what="globex's cluster", timeout=180)
        rayjob = get_gateway().get("ray.io/v1", "RayJob", "stubborn", "gw-acme")
        assert rayjob["spec"]["suspend"] is True
