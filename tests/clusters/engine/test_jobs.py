"""Jobs through the real loop: API -> row -> worker -> kubesim (KubeRay's RayJob
controller and simulated Ray drivers) -> row.

A job waits suspended behind a full quota, starts when capacity frees, runs, ends, and
gives its GPUs back as soon as its pods are gone; failure, deadline, stop, delete, a job
on an existing dev cluster, and a worker killed mid-job. The simulated driver's run time
and outcome are kubesim's knobs (its README), set here on the simulator or as the
RayJob's ``kubesim.io/*`` annotations — never anything the product writes.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.test import Client

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, UsageSpan
from tests.clusters.engine.conftest import wait_for

JOBS = "/api/v1/tenants/acme/jobs/"
CLUSTERS = "/api/v1/tenants/acme/clusters/"


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("job").get(name=name)


def _state(name: str) -> str:
    return _row(name).state


def _rayjob(name: str) -> Any:
    return get_gateway().get("ray.io/v1", "RayJob", name, "gw-acme")


def _pods(pk: int) -> list[Any]:
    return get_gateway().list("v1", "Pod", label_selector=f"gangway.dev/cluster-id={pk}")


def _holding(pk: int) -> list[Any]:
    return [p for p in _pods(pk) if p["status"].get("phase") not in ("Succeeded", "Failed")]


def _annotate(name: str, **annotations: str) -> None:
    """Set the simulator's knobs on a RayJob while it waits (read when it is submitted)."""
    get_gateway().merge_patch(
        "ray.io/v1",
        "RayJob",
        name,
        {
            "metadata": {
                "annotations": {
                    f"kubesim.io/{k.replace('_', '-')}": v for k, v in annotations.items()
                }
            }
        },
        "gw-acme",
    )


def _released(name: str) -> ClusterRequest:
    row = _row(name)
    return row if not row.holds_gpus else None  # type: ignore[return-value]


def test_a_queued_job_starts_when_a_cluster_goes_runs_and_gives_its_gpus_back(
    worker: Any, kubesim: Any, as_user: Any, bob: Any, alice: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=2, pending_seconds=0)
    api = as_user(bob)
    # acme may hold 2 L4s and borrow none: alice's cluster takes them all.
    full = {"name": "full", "flavor": "l4", "workers": 2}
    assert as_user(alice).post(CLUSTERS, full).status_code == 201
    wait_for(lambda: _state("full") == "ready", what="the cluster ready")
    body = {"name": "train", "entrypoint": "python train.py", "flavor": "l4", "workers": 1}
    response = api.post(JOBS, body, format="json")
    assert response.status_code == 201, response.content
    wait_for(lambda: _row("train").queue_reason, what="a queue reason")
    # It waits with its RayJob written and suspended: nothing of it holds anything.
    rayjob = wait_for(lambda: _rayjob("train"), what="the suspended RayJob")
    assert rayjob["spec"]["suspend"] is True
    pk = _row("train").pk
    assert _state("train") == "queued" and not _pods(pk)
    waiting = api.get(JOBS + "train/").json()
    assert waiting["queue"]["position"] == 1 and waiting["queue"]["reason"]

    assert as_user(alice).delete(CLUSTERS + "full/").status_code == 202
    wait_for(lambda: _state("train") in ("running", "succeeded"), what="the job running")
    done = wait_for(lambda: _state("train") == "succeeded" and _released("train"), what="released")
    assert not _holding(pk)
    job = done.job
    assert job.ray_job_id and job.ray_cluster_name and job.job_status == "SUCCEEDED"
    # The end of the driver's output was kept when it ended, from the pass's own pods.
    assert "succeeded" in job.log_tail, job.log_tail
    assert job.started_at and job.ended_at and job.started_at <= job.ended_at
    assert done.gpus_released_at and done.gpus_released_at >= job.ended_at
    (span,) = UsageSpan.objects.filter(cluster=done)
    assert span.ended_at == done.gpus_released_at and span.gpus == Decimal(1)
    # Its Ray cluster went with the run (shutdownAfterJobFinishes); the ledger is empty.
    assert get_gateway().get("ray.io/v1", "RayCluster", job.ray_cluster_name, "gw-acme") is None
    assert not ClusterRequest.objects.unscoped().filter(holds_gpus=True).exists()
    out = api.get(JOBS + "train/").json()
    assert out["state"] == "succeeded" and out["gpu_hours"] > 0
    assert [e["to_state"] for e in out["events"] if e["from_state"] != e["to_state"]][-4:] == [
        "admitted",
        "starting",
        "running",
        "succeeded",
    ]
    logs = api.get(JOBS + "train/logs/").json()
    assert logs["origin"] in ("pod", "saved") and "succeeded" in logs["text"], logs


def test_a_failing_job_ends_failed_with_the_drivers_message(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    kubesim.set_rayjob_defaults(
        run_seconds=1, pending_seconds=0, outcome="failed", message="CUDA out of memory"
    )
    api = as_user(bob)
    assert (
        api.post(JOBS, {"name": "oom", "entrypoint": "python big.py", "flavor": "l4"}).status_code
        == 201
    )
    row = wait_for(lambda: _state("oom") == "failed" and _row("oom"), what="failed", timeout=90)
    assert "CUDA out of memory" in row.job.message
    assert "CUDA out of memory" in row.state_reason
    wait_for(lambda: _released("oom"), what="GPUs released", timeout=90)
    text = api.get(JOBS + "oom/logs/?tail=50").json()["text"]
    assert "failed" in text.lower()


def test_the_active_deadline_stops_a_job(worker: Any, kubesim: Any, as_user: Any, bob: Any) -> None:
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    api = as_user(bob)
    body = {
        "name": "slow",
        "entrypoint": "python slow.py",
        "flavor": "l4",
        "active_deadline_seconds": 3,
    }
    assert api.post(JOBS, body, format="json").status_code == 201
    row = wait_for(lambda: _state("slow") == "failed" and _row("slow"), what="deadline", timeout=60)
    assert row.events.filter(reason="DeadlineExceeded").exists()
    assert "activeDeadlineSeconds" in row.job.message
    wait_for(lambda: _released("slow"), what="GPUs released")


def test_stop_and_delete_mid_run(worker: Any, kubesim: Any, as_user: Any, bob: Any) -> None:
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    api = as_user(bob)
    for name in ("halt", "gone"):
        body = {"name": name, "entrypoint": "python loop.py", "flavor": "l4"}
        assert api.post(JOBS, body, format="json").status_code == 201
    wait_for(lambda: _state("halt") == "running" and _state("gone") == "running", what="running")
    halt, gone = _row("halt").pk, _row("gone").pk

    assert api.post(JOBS + "halt/stop/").json()["state"] == "stopped"
    assert api.delete(JOBS + "gone/").status_code == 202
    wait_for(lambda: _released("halt"), what="the stopped job's GPUs released")
    wait_for(lambda: _state("gone") == "deleted", what="the deleted job gone")
    assert _rayjob("halt") is None and _rayjob("gone") is None
    assert not _holding(halt) and not _pods(gone)
    assert _row("halt").job.log_tail  # kept before its pods went
    assert api.get(JOBS + "halt/logs/").json()["origin"] == "saved"
    assert not ClusterRequest.objects.unscoped().filter(holds_gpus=True).exists()
    assert UsageSpan.objects.filter(ended_at__isnull=True).count() == 0


def test_a_driver_log_that_cannot_be_read_is_read_again_before_its_pods_go(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    """Every read of a driver's log fails for a while: a job that ends keeps NULL and is
    read again by later passes; a stopped job's RayJob (and so its pods) is not deleted
    until its output was kept. Nothing is lost once the reads work again."""
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    api = as_user(bob)
    body = {"name": "halt", "entrypoint": "python loop.py", "flavor": "l4"}
    assert api.post(JOBS, body, format="json").status_code == 201
    wait_for(lambda: _state("halt") == "running", what="running")
    kubesim.set_rayjob_defaults(run_seconds=2, pending_seconds=0)
    kubesim.set_faults(rate=0.0, codes=(503,), verb_rates={"log": 1.0})
    body = {"name": "ends", "entrypoint": "python short.py", "flavor": "l4"}
    assert api.post(JOBS, body, format="json").status_code == 201
    try:
        assert api.post(JOBS + "halt/stop/").json()["state"] == "stopped"
        wait_for(lambda: _state("ends") == "succeeded", what="the job ended", timeout=60)
        # Only log reads are faulted: several refused means several passes tried.
        wait_for(lambda: kubesim.faults.stats()["faults"].get("total", 0) >= 4, what="retries")
        for name in ("ends", "halt"):
            assert _row(name).job.log_tail is None, name  # not kept, not given up
        assert _rayjob("halt") is not None  # held back: deleting it would lose the output
    finally:
        kubesim.clear_faults()
    for name in ("ends", "halt"):
        wait_for(lambda n=name: _row(n).job.log_tail, what=f"{name}'s output kept")
    wait_for(lambda: _rayjob("halt") is None, what="the stopped job's RayJob deleted")
    assert api.get(JOBS + "halt/logs/").json()["origin"] == "saved"


def test_a_job_on_your_dev_cluster_takes_no_quota(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=1, pending_seconds=0)
    api = as_user(bob)
    assert api.post(CLUSTERS, {"name": "bench", "flavor": "l4", "workers": 2}).status_code == 201
    wait_for(lambda: _state("bench") == "ready", what="the dev cluster ready")
    response = api.post(
        JOBS, {"name": "probe", "entrypoint": "python probe.py", "cluster": "bench"}
    )
    assert response.status_code == 201, response.content
    assert response.json()["state"] == "starting"
    row = wait_for(lambda: _state("probe") == "succeeded" and _row("probe"), what="succeeded")
    assert not row.holds_gpus and not UsageSpan.objects.filter(cluster=row).exists()
    # It ran on the dev cluster, which is still there and still the only GPU holder.
    assert row.job.ray_cluster_name in ("", "bench")
    assert _state("bench") == "ready"
    holders = list(
        ClusterRequest.objects.unscoped().filter(holds_gpus=True).values_list("name", flat=True)
    )
    assert holders == ["bench"]

    # Its page says so, and that its finished driver's log is not live.
    page = Client()
    page.force_login(bob)
    html = page.get("/t/acme/jobs/probe/").content.decode()
    assert "which stays when the job ends" in html
    assert "its Ray cluster goes when it ends" not in html
    log = page.get(f"/t/acme/jobs/probe/log/?id={row.pk}").content.decode()
    assert "Live from" not in log and "refreshed every few seconds" not in log
    assert "Its output, from" in log or "Kept when the job ended" in log


def test_a_worker_killed_mid_job_loses_and_duplicates_nothing(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=4, pending_seconds=0)
    api = as_user(bob)
    body = {"name": "sturdy", "entrypoint": "python train.py", "flavor": "l4"}
    assert api.post(JOBS, body, format="json").status_code == 201
    wait_for(lambda: _state("sturdy") in ("starting", "running"), what="started")
    worker.kill()
    worker.start()
    row = wait_for(lambda: _state("sturdy") == "succeeded" and _released("sturdy"), what="done")
    rayjobs = get_gateway().list(
        "ray.io/v1", "RayJob", label_selector=f"gangway.dev/cluster-id={row.pk}"
    )
    assert len(rayjobs) == 1
    assert UsageSpan.objects.filter(cluster=row).count() == 1
    assert row.events.filter(to_state="succeeded").exclude(from_state="succeeded").count() == 1
