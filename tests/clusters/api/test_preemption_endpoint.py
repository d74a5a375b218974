"""The preemption notice endpoint and checkpoint reports (docs/preemption.md): by token
without credentials, through the owner's job API, and through ``gangway_preemption`` run
as a real driver would run it (a subprocess against the live server)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.domain import preemption as pre
from clusters.kinds.rayjob import requests as jobs
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest
from clusters.rows.spec import ClusterSpec

ROOT = Path(__file__).resolve().parents[3]
JOBS = "/api/v1/tenants/acme/jobs/"


def _job(owner: Any, tenant: Any, flavor: Any, name: str = "train") -> ClusterRequest:
    return jobs.job_create(
        actor=owner,
        tenant=tenant,
        spec=ClusterSpec(name=name, flavor=flavor),
        job=JobSpec(entrypoint="python train.py"),
    )


def _give_notice(row: ClusterRequest) -> None:
    ClusterRequest.objects.filter(pk=row.pk).update(
        notice_at=timezone.now(),
        reclaim_after=timezone.now() + timedelta(minutes=10),
        notice_reason="globex needs its l4 GPUs back.",
    )


@pytest.mark.django_db
def test_the_notice_by_token_and_checkpoints_by_token(bob: Any, acme: Any, l4: Any) -> None:
    row = _job(bob, acme, l4)
    anonymous = APIClient()
    path = pre.preemption_path(row.pk)
    quiet = anonymous.get(path)
    assert quiet.status_code == 200, quiet.content
    assert quiet.json()["notice"] is False and quiet.json()["deadline"] is None

    _give_notice(row)
    told = anonymous.get(path).json()
    assert told["notice"] is True and told["deadline"] and "globex" in told["reason"]

    saved = anonymous.post(path + "checkpoint/", {"uri": "s3://ckpt/train/7"}, format="json")
    assert saved.status_code == 200, saved.content
    assert saved.json()["checkpoint_uri"] == "s3://ckpt/train/7"
    row.refresh_from_db()
    assert row.checkpoint_uri == "s3://ckpt/train/7" and row.checkpointed_at
    assert row.events.filter(reason="checkpoint_saved").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [{}, {"uri": ""}, {"uri": "not a uri"}, {"uri": "s3://x y"}, {"uri": 7}, {"uri": "a" * 1200}],
)
def test_bad_checkpoint_reports_are_refused_and_change_nothing(
    bob: Any, acme: Any, l4: Any, body: Any
) -> None:
    row = _job(bob, acme, l4)
    answer = APIClient().post(pre.preemption_path(row.pk) + "checkpoint/", body, format="json")
    assert answer.status_code == 400, answer.content
    row.refresh_from_db()
    assert row.checkpoint_uri == "" and not row.events.filter(reason="checkpoint_saved").exists()


@pytest.mark.django_db
def test_unknown_and_forged_tokens_are_not_found(bob: Any, acme: Any, l4: Any) -> None:
    row = _job(bob, acme, l4)
    anonymous = APIClient()
    forged = f"/api/v1/preemption/{row.pk}.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/"
    for path in ("/api/v1/preemption/nothing/", forged):
        assert anonymous.get(path).status_code == 404
        answer = anonymous.post(path + "checkpoint/", {"uri": "s3://a/b"}, format="json")
        assert answer.status_code == 404
    assert pre.request_of_token(pre.token_for(row.pk)) == row.pk


@pytest.mark.django_db
def test_the_owner_reports_a_checkpoint_through_the_job_api(
    as_user: Any, bob: Any, alice: Any, acme: Any, l4: Any
) -> None:
    row = _job(bob, acme, l4)
    answer = as_user(bob).post(JOBS + "train/checkpoint/", {"uri": "gs://b/c"}, format="json")
    assert answer.status_code == 200, answer.content
    out = answer.json()["preemption"]
    assert out["checkpoint"]["uri"] == "gs://b/c" and out["preemptions"] == 0
    assert out["notice"] is None and out["resume_from"] == ""
    bad = as_user(bob).post(JOBS + "train/checkpoint/", {"uri": "nope"}, format="json")
    assert bad.status_code == 400
    row.refresh_from_db()
    assert row.checkpoint_uri == "gs://b/c"


@pytest.mark.django_db
def test_a_job_that_ended_has_no_run_to_resume(bob: Any, acme: Any, l4: Any) -> None:
    row = _job(bob, acme, l4)
    jobs.job_stop(actor=bob, request=row)
    answer = APIClient().post(
        pre.preemption_path(row.pk) + "checkpoint/", {"uri": "s3://a/b"}, format="json"
    )
    assert answer.status_code == 409


def _driver(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``code`` as a driver would, in its own Python with only the helper on its path."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_helper_hears_the_notice_and_reports_a_checkpoint(
    transactional_db: Any, live_server: Any, bob: Any, acme: Any, l4: Any, tmp_path: Path
) -> None:
    row = _job(bob, acme, l4)
    url = live_server.url + pre.preemption_path(row.pk)
    code = (
        "import gangway_preemption as gp\n"
        "print('before', gp.notice())\n"
        "import sys; sys.stdout.flush()\n"
    )
    before = _driver(code, {"GANGWAY_PREEMPTION_URL": url})
    assert before.returncode == 0, before.stderr
    assert "before None" in before.stdout

    _give_notice(row)
    code = (
        "import gangway_preemption as gp\n"
        "n = gp.wait(timeout=30, interval=0.2)\n"
        "print('deadline', n.deadline)\n"
        "print('reason', n.reason)\n"
        "print('saved', gp.checkpoint_saved('s3://ckpt/train/step-12')['checkpoint_uri'])\n"
    )
    driver = _driver(code, {"GANGWAY_PREEMPTION_URL": url})
    assert driver.returncode == 0, driver.stderr
    assert "reason globex needs its l4 GPUs back." in driver.stdout
    assert "saved s3://ckpt/train/step-12" in driver.stdout
    row.refresh_from_db()
    assert row.checkpoint_uri == "s3://ckpt/train/step-12"

    # In a pod it reads the downward-API file (as the kubelet writes it), no call needed.
    podinfo = tmp_path / "annotations"
    podinfo.write_text(
        f'{pre.NOTICE_ANNOTATION}="2026-11-29T15:00:00Z"\n'
        f'{pre.REASON_ANNOTATION}="urgent work"\nray.io/other="x"\n'
    )
    code = "import gangway_preemption as gp\nprint(gp.notice(), gp.resume_from())\n"
    local = _driver(
        code,
        {
            "GANGWAY_PODINFO_ANNOTATIONS": str(podinfo),
            "GANGWAY_RESUME_FROM": "s3://ckpt/train/step-12",
        },
    )
    assert local.returncode == 0, local.stderr
    assert "deadline='2026-11-29T15:00:00Z'" in local.stdout
    assert "reason='urgent work'" in local.stdout and "s3://ckpt/train/step-12" in local.stdout
    # A bad report is the endpoint's 400, raised in the driver with the reason.
    bad = _driver(
        "import gangway_preemption as gp\ngp.checkpoint_saved('no uri')\n",
        {"GANGWAY_PREEMPTION_URL": url},
    )
    assert bad.returncode != 0 and "gangway answered 400" in bad.stderr


@pytest.mark.django_db
def test_the_job_page_and_detail_show_notice_checkpoint_and_resume(
    client: Any, as_user: Any, bob: Any, acme: Any, l4: Any
) -> None:
    row = _job(bob, acme, l4)
    _give_notice(row)
    ClusterRequest.objects.filter(pk=row.pk).update(
        checkpoint_uri="s3://ckpt/train/9",
        checkpointed_at=timezone.now(),
        resume_from="s3://ckpt/train/4",
        preemptions=1,
    )
    client.force_login(bob)
    page = client.get("/t/acme/jobs/train/").content.decode()
    assert "data-preemption-notice" in page and "globex needs its l4 GPUs back." in page
    assert "s3://ckpt/train/9" in page and "s3://ckpt/train/4" in page
    assert "data-preemptions>1<" in page
    detail = as_user(bob).get(JOBS + "train/").json()["preemption"]
    assert detail["notice"]["reason"] == "globex needs its l4 GPUs back."
    assert detail["notice"]["deadline"] and detail["checkpoint"]["uri"] == "s3://ckpt/train/9"
    assert detail["resume_from"] == "s3://ckpt/train/4" and detail["preemptions"] == 1
