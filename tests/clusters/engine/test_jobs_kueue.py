"""Jobs in Kueue mode: Kueue (emulated by kubesim, with its RayJob integration) queues
each RayJob, the rows follow its verdicts — waiting with Kueue's position and reason,
admitted, run, ended, GPUs released — and an eviction puts a running job back in line."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.kube.gateway import get_gateway
from clusters.models import ClusterRequest, UsageSpan
from kubesim import KubeSim
from tests.clusters.engine.conftest import running_kubesim, wait_for

JOBS = "/api/v1/tenants/acme/jobs/"
CLUSTERS = "/api/v1/tenants/acme/clusters/"


@pytest.fixture
def kubesim(tmp_path: Path, settings: Any) -> Iterator[KubeSim]:
    with running_kubesim(tmp_path, settings, kueue=True) as sim:
        yield sim


def _row(name: str) -> ClusterRequest:
    return ClusterRequest.objects.unscoped().select_related("job").get(name=name)


def test_kueue_queues_admits_and_finishes_a_job(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, bob: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=2, pending_seconds=0)
    gw = get_gateway()
    # alice's production cluster takes both of acme's 8-GPU H100 nodes' worth of quota.
    big = {"name": "hog", "kind": "prod", "flavor": "h100", "workers": 2}
    assert as_user(alice).post(CLUSTERS, big, format="json").status_code == 201
    wait_for(lambda: _row("hog").state == "ready", what="the prod cluster ready", timeout=90)

    body = {"name": "kjob", "entrypoint": "python train.py", "flavor": "h100", "workers": 1}
    assert as_user(bob).post(JOBS, body, format="json").status_code == 201
    rayjob = wait_for(lambda: gw.get("ray.io/v1", "RayJob", "kjob", "gw-acme"), what="RayJob")
    assert rayjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gangway"
    waiting = wait_for(
        lambda: (
            ClusterRequest.objects.filter(name="kjob", queue_message__startswith="Kueue:")
            .exclude(queue_position=None)
            .first()
        ),
        what="Kueue's position and reason on the job",
    )
    assert waiting.state == "queued" and not waiting.holds_gpus
    assert gw.get("ray.io/v1", "RayJob", "kjob", "gw-acme")["spec"]["suspend"] is True

    assert as_user(alice).delete(CLUSTERS + "hog/").status_code == 202
    wait_for(lambda: _row("kjob").state in ("running", "succeeded"), what="admitted and running")
    done = wait_for(
        lambda: (row := _row("kjob")).state == "succeeded" and not row.holds_gpus and row,
        what="succeeded and released",
        timeout=90,
    )
    assert done.job.job_status == "SUCCEEDED"
    assert UsageSpan.objects.filter(cluster=done, ended_at__isnull=True).count() == 0


def test_an_evicted_job_goes_back_in_line(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    body = {"name": "evictee", "entrypoint": "python long.py", "flavor": "l4"}
    assert as_user(bob).post(JOBS, body, format="json").status_code == 201
    wait_for(lambda: _row("evictee").state == "running", what="running", timeout=90)
    request = urllib.request.Request(
        f"{kubesim.url}/_kubesim/kueue/evict",
        data=json.dumps(
            {"namespace": "gw-acme", "name": "evictee", "reason": "InactiveWorkload"}
        ).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(request, timeout=5).read()
    row = wait_for(
        lambda: (r := _row("evictee")).events.filter(reason="InactiveWorkload").exists() and r,
        what="the eviction folded into the row",
    )
    assert row.events.filter(to_state="queued", from_state="running").exists()
    (span,) = UsageSpan.objects.filter(cluster=row)[:1]
    assert span.ended_at is not None


def test_failure_stop_and_a_hosted_job_in_kueue_mode(
    worker: Any, kubesim: Any, as_user: Any, bob: Any
) -> None:
    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    api = as_user(bob)
    body = {"name": "kstop", "entrypoint": "python loop.py", "flavor": "l4"}
    assert api.post(JOBS, body, format="json").status_code == 201
    wait_for(lambda: _row("kstop").state == "running", what="running", timeout=90)
    assert api.post(JOBS + "kstop/stop/").json()["state"] == "stopped"
    wait_for(lambda: not _row("kstop").holds_gpus, what="the stopped job's GPUs released")
    assert get_gateway().get("ray.io/v1", "RayJob", "kstop", "gw-acme") is None

    kubesim.set_rayjob_defaults(
        run_seconds=1, pending_seconds=0, outcome="failed", message="loss is NaN"
    )
    failing = {"name": "kfail", "entrypoint": "python big.py", "flavor": "l4"}
    assert api.post(JOBS, failing, format="json").status_code == 201
    row = wait_for(lambda: (r := _row("kfail")).state == "failed" and r, what="failed", timeout=90)
    assert "loss is NaN" in row.job.message
    wait_for(lambda: not _row("kfail").holds_gpus, what="released", timeout=90)

    # A job on a ready dev cluster joins no Kueue queue and takes no quota.
    kubesim.set_rayjob_defaults(run_seconds=1, pending_seconds=0, outcome="succeeded")
    bench = {"name": "kbench", "flavor": "l4", "workers": 1}
    assert api.post(CLUSTERS, bench, format="json").status_code == 201
    wait_for(lambda: _row("kbench").state == "ready", what="dev cluster ready", timeout=90)
    hosted = {"name": "khosted", "entrypoint": "python probe.py", "cluster": "kbench"}
    assert api.post(JOBS, hosted, format="json").status_code == 201
    rayjob = wait_for(
        lambda: get_gateway().get("ray.io/v1", "RayJob", "khosted", "gw-acme"), what="RayJob"
    )
    assert "kueue.x-k8s.io/queue-name" not in rayjob["metadata"]["labels"]
    done = wait_for(lambda: (r := _row("khosted")).state == "succeeded" and r, what="succeeded")
    assert not done.holds_gpus and not UsageSpan.objects.filter(cluster=done).exists()


def test_kueue_gives_a_job_of_several_flavors_the_first_that_fits(
    worker: Any, kubesim: Any, as_user: Any, alice: Any, bob: Any, acme: Any, h100: Any
) -> None:
    from tenants.models import Quota

    kubesim.set_rayjob_defaults(run_seconds=600, pending_seconds=0)
    Quota.objects.filter(tenant=acme, flavor=h100).update(gpus=8, borrow_limit=0)
    hog = {"name": "khog", "kind": "prod", "flavor": "h100", "workers": 1}
    assert as_user(alice).post(CLUSTERS, hog, format="json").status_code == 201
    wait_for(lambda: _row("khog").state == "ready", what="h100 quota taken", timeout=90)

    either = {"name": "keither", "entrypoint": "python eval.py", "flavors": ["h100", "l4"]}
    assert as_user(bob).post(JOBS, either, format="json").status_code == 201
    rayjob = wait_for(
        lambda: get_gateway().get("ray.io/v1", "RayJob", "keither", "gw-acme"), what="RayJob"
    )
    worker_spec = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    # Kueue chooses among the accepted products (and, once it admits, adds its flavor's
    # node labels as Kueue does).
    assert "affinity" in worker_spec
    row = wait_for(lambda: (r := _row("keither")).state == "running" and r, what="running")
    assert row.flavor.name == "l4"
    (span,) = UsageSpan.objects.filter(cluster=row)
    assert span.flavor_name == "l4"
