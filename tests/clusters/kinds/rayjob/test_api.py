"""The jobs API without a cluster behind it: what is accepted, what is refused (400 with
field errors, nothing written), who may do what, and how a job reads back."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from clusters.domain.states import State
from clusters.models import ClusterRequest, Job, UsageSpan
from tenants.models import AuditEvent, GpuFlavor

JOBS = "/api/v1/tenants/acme/jobs/"
DRY_RUN = JOBS + "dry-run/"
TRAIN = {"entrypoint": "python train.py", "flavor": "h100", "workers": 2}


def _cluster(owner: Any, name: str, *, state: str = "ready", kind: str = "dev") -> Any:
    return ClusterRequest.objects.create(
        tenant=owner.memberships.get().tenant,
        owner=owner,
        name=name,
        kind=kind,
        flavor=GpuFlavor.objects.get(name="h100"),
        workers=1,
        gpus=1 if kind == "dev" else 8,
        state=state,
        holds_gpus=state == "ready",
        admitted_at=timezone.now(),
    )


def test_a_job_is_queued_with_its_run_and_its_shape(as_user: Any, bob: Any) -> None:
    body = {
        **TRAIN,
        "name": "finetune",
        "runtime_env": {
            "working_dir": "s3://bucket/code.zip",
            "pip": ["torch==2.4.0", "datasets>=2"],
            "env_vars": {"WANDB_MODE": "offline"},
        },
        "active_deadline_seconds": 3600,
        "ttl_seconds_after_finished": 60,
    }
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 201, response.content
    out = response.json()
    assert out["name"] == "finetune" and out["state"] == "queued"
    assert out["gpus"] == 2 and out["flavor"] == "h100" and out["kind"] == "dev"
    assert out["job"]["entrypoint"] == "python train.py"
    assert out["job"]["runtime_env"]["pip"] == ["torch==2.4.0", "datasets>=2"]
    assert out["job"]["active_deadline_seconds"] == 3600
    assert out["job"]["cluster"] is None
    assert out["queue"]["reason"] and out["gpu_hours"] == 0
    assert "ttl_hours" not in out and out["endpoints"] is None
    row = ClusterRequest.objects.get(name="finetune")
    assert row.workload == "job" and row.ttl_hours is None and row.expires_at is None
    assert AuditEvent.objects.filter(action="job.create").count() == 1
    # Jobs and clusters are listed apart.
    assert [j["name"] for j in as_user(bob).get(JOBS).json()["results"]] == ["finetune"]
    clusters = as_user(bob).get("/api/v1/tenants/acme/clusters/").json()["results"]
    assert clusters == []
    detail = as_user(bob).get(JOBS + "finetune/").json()
    assert detail["job"]["ttl_seconds_after_finished"] == 60
    assert [e["reason"] for e in detail["events"]] == ["requested"]


def test_a_generated_name_fits_kuberays_limit(as_user: Any, acme: Any) -> None:
    from tests.factories import MembershipFactory, UserFactory

    long = UserFactory(username="a-very-long-username-of-somebody-in-research")
    MembershipFactory(tenant=acme, user=long, role="engineer")
    response = as_user(long).post(JOBS, {"entrypoint": "python x.py", "flavor": "l4"})
    assert response.status_code == 201, response.content
    name = response.json()["name"]
    assert len(name) <= 47 and "-job-" in name


BIG = {"pip": [f"package-number-{i}==1.0.{i}" for i in range(100)], "env_vars": {}}
BIG["env_vars"] = {f"VAR_{i}": "x" * 150 for i in range(100)}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({**TRAIN, "entrypoint": "   "}, {"entrypoint"}),
        ({"flavor": "h100"}, {"entrypoint"}),
        ({**TRAIN, "runtime_env": BIG}, {"runtime_env"}),
        (
            {**TRAIN, "runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": "0,1"}}},
            {"runtime_env.env_vars"},
        ),
        (
            {**TRAIN, "runtime_env": {"env_vars": {"NVIDIA_VISIBLE_DEVICES": "all"}}},
            {"runtime_env.env_vars"},
        ),
        ({**TRAIN, "runtime_env": {"conda": "env.yaml"}}, {"runtime_env"}),
        ({**TRAIN, "runtime_env": {"working_dir": "./src"}}, {"runtime_env.working_dir"}),
        ({**TRAIN, "runtime_env": {"pip": ["--index-url=http://x"]}}, {"runtime_env.pip"}),
        ({**TRAIN, "runtime_env": "pip: [torch]"}, {"runtime_env"}),
        ({**TRAIN, "flavor": "a100"}, {"flavor"}),
        ({"entrypoint": "python x.py"}, {"flavor"}),
        ({**TRAIN, "name": "x" * 48}, {"name"}),
        ({**TRAIN, "name": "Bad_Name"}, {"name"}),
        ({**TRAIN, "ttl_hours": 4}, {"ttl_hours"}),
        ({**TRAIN, "active_deadline_seconds": 0}, {"active_deadline_seconds"}),
        ({**TRAIN, "ttl_seconds_after_finished": -1}, {"ttl_seconds_after_finished"}),
        ({**TRAIN, "workers": 33}, {"workers"}),
        # Several faults are reported at once.
        ({**TRAIN, "entrypoint": "", "name": "Bad_Name"}, {"entrypoint", "name"}),
    ],
)
def test_bad_input_is_a_400_naming_the_fields_and_writes_nothing(
    as_user: Any, bob: Any, body: dict[str, Any], fields: set[str]
) -> None:
    for url in (JOBS, DRY_RUN):
        response = as_user(bob).post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        error = response.json()["error"]
        assert set(error["fields"]) == fields, error
    assert not ClusterRequest.objects.exists() and not Job.objects.exists()
    assert not AuditEvent.objects.exists()


def test_the_forbidden_variable_is_named_with_the_reason(as_user: Any, bob: Any) -> None:
    body = {**TRAIN, "runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": "0"}}}
    error = as_user(bob).post(JOBS, body, format="json").json()["error"]
    (message,) = error["fields"]["runtime_env.env_vars"]
    assert "CUDA_VISIBLE_DEVICES" in message and "GPUs" in message


@pytest.mark.parametrize(
    ("setup", "fault"),
    [
        (lambda bob, alice: None, "no cluster named"),
        (lambda bob, alice: _cluster(alice, "host"), "not yours"),
        (lambda bob, alice: _cluster(bob, "host", state="queued"), "is queued"),
        (lambda bob, alice: _cluster(bob, "host", kind="prod"), "production cluster"),
    ],
)
def test_a_host_must_be_your_ready_dev_cluster(
    as_user: Any, bob: Any, alice: Any, setup: Any, fault: str
) -> None:
    setup(bob, alice)
    before = ClusterRequest.objects.count()
    response = as_user(bob).post(JOBS, {"entrypoint": "python x.py", "cluster": "host"})
    assert response.status_code == 400, response.content
    (message,) = response.json()["error"]["fields"]["cluster"]
    assert fault in message
    assert ClusterRequest.objects.count() == before and not Job.objects.exists()


def test_a_host_and_a_shape_exclude_each_other(as_user: Any, bob: Any) -> None:
    _cluster(bob, "host")
    body = {"entrypoint": "python x.py", "cluster": "host", "flavor": "h100", "workers": 2}
    response = as_user(bob).post(JOBS, body, format="json")
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {"flavor", "workers"}


def test_a_job_on_your_ready_cluster_takes_no_gpus_and_skips_the_queue(
    as_user: Any, bob: Any, acme: Any
) -> None:
    _cluster(bob, "workbench")
    acme.max_dev_clusters_per_user = 1  # the workbench is bob's one dev cluster
    acme.save()
    verdict = (
        as_user(bob).post(DRY_RUN, {"entrypoint": "python eval.py", "cluster": "workbench"}).json()
    )
    assert verdict["verdict"] == "fits_now" and verdict["reasons"][0]["code"] == "hosted"
    (manifest,) = verdict["manifests"]
    assert manifest["spec"]["clusterSelector"] == {"ray.io/cluster": "workbench"}
    assert "rayClusterSpec" not in manifest["spec"]
    response = as_user(bob).post(JOBS, {"entrypoint": "python eval.py", "cluster": "workbench"})
    assert response.status_code == 201, response.content
    out = response.json()
    assert out["state"] == "starting" and out["gpus"] == 0
    assert out["job"]["cluster"] == "workbench"
    row = ClusterRequest.objects.get(name=out["name"])
    assert not row.holds_gpus and not UsageSpan.objects.filter(cluster=row).exists()
    # It is not one more dev cluster of bob's: a second job on the workbench is fine,
    # and so is a dev cluster in place of the workbench once it is gone.
    again = {"entrypoint": "python eval.py --split test", "cluster": "workbench"}
    assert as_user(bob).post(JOBS, again, format="json").status_code == 201
    ClusterRequest.objects.filter(name="workbench").update(state="deleted", holds_gpus=False)
    cluster = as_user(bob).post("/api/v1/tenants/acme/clusters/", {"flavor": "l4"})
    assert cluster.status_code == 201, cluster.content


def test_roles_and_tenants(as_user: Any, bob: Any, vera: Any, charlie: Any) -> None:
    assert as_user(vera).post(JOBS, TRAIN, format="json").status_code == 403
    assert as_user(charlie).post(JOBS, TRAIN, format="json").status_code == 404
    created = as_user(bob).post(JOBS, TRAIN, format="json").json()
    assert as_user(vera).get(JOBS + created["name"] + "/").status_code == 200
    assert as_user(vera).post(JOBS + created["name"] + "/stop/").status_code == 403
    assert as_user(charlie).get(JOBS + created["name"] + "/").status_code == 404
    assert as_user(charlie).get(JOBS + created["name"] + "/logs/").status_code == 404
    # A production job needs a tenant admin, as a production cluster does.
    prod = {**TRAIN, "kind": "prod", "workers": 1}
    assert as_user(bob).post(JOBS, prod, format="json").status_code == 403


def test_stop_and_delete(as_user: Any, bob: Any) -> None:
    client = as_user(bob)
    name = client.post(JOBS, TRAIN, format="json").json()["name"]
    stopped = client.post(JOBS + name + "/stop/")
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
    assert stopped.json()["job"]["ended_at"] is not None
    assert client.post(JOBS + name + "/stop/").json()["state"] == "stopped"  # idempotent
    deleting = client.delete(JOBS + name + "/")
    assert deleting.status_code == 202 and deleting.json()["state"] == "deleting"
    again = client.post(JOBS + name + "/stop/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_state"
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["job.create", "job.stop", "job.delete"]


def test_a_finished_job_cannot_be_stopped(as_user: Any, bob: Any) -> None:
    client = as_user(bob)
    name = client.post(JOBS, TRAIN, format="json").json()["name"]
    ClusterRequest.objects.filter(name=name).update(state=State.SUCCEEDED)
    response = client.post(JOBS + name + "/stop/")
    assert response.status_code == 409
    assert "has ended" in response.json()["error"]["message"]


def test_logs_of_a_waiting_job_say_why_there_are_none(as_user: Any, bob: Any) -> None:
    client = as_user(bob)
    name = client.post(JOBS, TRAIN, format="json").json()["name"]
    body = client.get(JOBS + name + "/logs/").json()
    assert body["origin"] == "none" and body["text"] == ""
    assert "not started" in body["message"]
    bad = client.get(JOBS + name + "/logs/?tail=0")
    assert bad.status_code == 400 and "tail" in bad.json()["error"]["fields"]
    # Decimal digits only, as the schema's type: integer (int() takes all of these).
    for loose in ("1_000", "+5", "%205", "\uff15", "5.0"):
        refused = client.get(JOBS + name + f"/logs/?tail={loose}&limit_bytes={loose}")
        assert refused.status_code == 400, loose
        assert set(refused.json()["error"]["fields"]) == {"tail", "limit_bytes"}, loose
    # As text: the reason in one line (an empty body would lose its Content-Type).
    empty = client.get(JOBS + name + "/logs/?format=text")
    assert empty["Content-Type"].startswith("text/plain")
    assert empty.content == f"({body['message']})\n".encode()
    # Once it ended, the tail kept on the row, as JSON or as plain text.
    ClusterRequest.objects.filter(name=name).update(state=State.SUCCEEDED)
    Job.objects.filter(request__name=name).update(log_tail="step 1\nstep 2\ndone\n")
    saved = client.get(JOBS + name + "/logs/?tail=2").json()
    assert saved["origin"] == "saved" and saved["text"] == "step 2\ndone\n"
    assert saved["truncated"] is True
    text = client.get(JOBS + name + "/logs/?format=text")
    assert text.status_code == 200 and text["Content-Type"].startswith("text/plain")
    assert text.content == b"step 1\nstep 2\ndone\n"
    refused = client.get(JOBS + name + "/logs/?tail=x&format=text")
    assert refused.status_code == 400 and refused.content.startswith(b"invalid: ")


def test_the_dry_run_shows_the_rayjob_it_would_apply(as_user: Any, bob: Any) -> None:
    body = {**TRAIN, "runtime_env": {"pip": ["numpy"]}, "active_deadline_seconds": 600}
    response = as_user(bob).post(DRY_RUN, body, format="json")
    assert response.status_code == 200, response.content
    verdict = response.json()
    assert verdict["verdict"] == "fits_now"
    (job,) = verdict["manifests"]
    assert job["kind"] == "RayJob" and job["metadata"]["name"] == "dry-run-job"
    spec = job["spec"]
    assert spec["entrypoint"] == "python train.py"
    assert spec["shutdownAfterJobFinishes"] is True and spec["activeDeadlineSeconds"] == 600
    assert spec["runtimeEnvYAML"].strip() == "pip:\n- numpy"
    workers = spec["rayClusterSpec"]["workerGroupSpecs"][0]
    assert workers["replicas"] == 2
    # acme may hold 2 L4s and borrow none: 3 can never be admitted.
    never = as_user(bob).post(DRY_RUN, {**TRAIN, "workers": 3, "flavor": "l4"}, format="json")
    assert never.json()["verdict"] == "never_fits"
    assert not ClusterRequest.objects.exists()


@pytest.mark.parametrize("hosted", [False, True], ids=["queued", "hosted"])
def test_a_submission_answers_what_a_read_of_the_job_answers(
    as_user: Any, bob: Any, hosted: bool
) -> None:
    # The submission answers from the rows it saved instead of reading the job back
    # through the detail's selector; a read must not tell a different story, to the byte
    # (a hosted job was moved to starting and has two events, a queued one one).
    client = as_user(bob)
    if hosted:
        _cluster(bob, "workbench")
        body: dict[str, Any] = {"entrypoint": "python eval.py", "cluster": "workbench"}
    else:
        body = {**TRAIN, "runtime_env": {"env_vars": {"A": "1"}}, "active_deadline_seconds": 60}
    created = client.post(JOBS, {**body, "name": "same"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["state"] == ("starting" if hosted else "queued")
    assert created.content == client.get(JOBS + "same/").content
    deleting = client.delete(JOBS + "same/")
    assert deleting.status_code == 202, deleting.content
    assert deleting.content == client.get(JOBS + "same/").content


def test_a_detail_is_found_by_its_name_whatever_list_filters_the_url_carries(
    as_user: Any, bob: Any
) -> None:
    # A list's query parameters (django-filter, ordering) say nothing about which job a
    # name means: a lookup ignores them (DRF's own get_object would have answered 404).
    client = as_user(bob)
    assert client.post(JOBS, {**TRAIN, "name": "waiting"}, format="json").status_code == 201
    assert client.get(JOBS + "?state=ready").json()["results"] == []
    assert client.get(JOBS + "waiting/?state=ready&ordering=name").status_code == 200
    assert client.delete(JOBS + "waiting/?state=ready").status_code == 202
    assert ClusterRequest.objects.get(name="waiting").state == "deleting"
