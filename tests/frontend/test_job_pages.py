"""The jobs pages through Django's test client (and one journey in Chromium): scoping,
the new-job form and its verdict panel (each a service call), the driver log panel,
and the stop and delete buttons."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils.html import escape

from clusters.admission.explain import reason_label
from clusters.domain.states import State
from clusters.kinds.rayjob import requests as job_services
from clusters.kinds.rayjob.spec import JobSpec
from clusters.models import ClusterRequest, Job
from clusters.rows.spec import ClusterSpec
from tenants.models import AuditEvent
from tests.frontend.test_pages import client_for

JOBS = "/t/acme/jobs/"
NEW = JOBS + "new/"
VERDICT = NEW + "verdict/"
FORM = {"entrypoint": "python train.py", "kind": "dev", "flavor": "h100", "workers": 1}


@pytest.fixture
def submit_job(acme: Any, h100: Any) -> Any:
    """``submit_job(actor, name, **shape)``: a job queued through ``job_create``."""

    def create(actor: Any, name: str, **shape: Any) -> ClusterRequest:
        spec = ClusterSpec(**{"kind": "dev", "flavor": h100, "workers": 1, **shape})
        job = JobSpec(entrypoint="python train.py", name=name)
        return job_services.job_create(actor=actor, tenant=acme, spec=spec, job=job)

    return create


@pytest.fixture
def queued_job(bob: Any, submit_job: Any) -> ClusterRequest:
    """bob's one-H100 job, waiting (no admission pass runs)."""
    return submit_job(bob, "bob-train")


def _finished(job: ClusterRequest, *, tail: str) -> None:
    """What the engine records when a job's driver exits 0 and its pods are gone."""
    from django.utils import timezone

    ClusterRequest.objects.filter(pk=job.pk).update(state=State.SUCCEEDED, holds_gpus=False)
    Job.objects.filter(pk=job.pk).update(
        log_tail=tail,
        job_status="SUCCEEDED",
        ray_job_id="raysubmit_abc123",
        started_at=timezone.now(),
        ended_at=timezone.now(),
    )


def pages(name: str = "bob-train") -> list[str]:
    return [JOBS, NEW, f"{JOBS}{name}/", f"{JOBS}{name}/log/"]


def test_pages_render_for_members(bob: Any, alice: Any, vera: Any, queued_job: Any) -> None:
    for user in (bob, alice):
        client = client_for(user)
        for url in pages():
            assert client.get(url).status_code == 200, (user, url)
    assert client_for(vera).get(f"{JOBS}bob-train/").status_code == 200
    listing = client_for(bob).get(JOBS).content.decode()
    assert "bob-train" in listing and "badge-queued" in listing
    assert "waiting for the next admission pass" in listing  # no pass has run yet
    assert 'hx-trigger="every 3s"' in listing and "New job" in listing
    assert f'href="{JOBS}"' in listing  # the nav's Jobs link
    page = client_for(bob).get(f"{JOBS}bob-train/").content.decode()
    assert 'data-state="queued"' in page and "python train.py" in page
    assert "History" in page and "job submitted (on h100)" in page  # the timeline


def test_a_waiting_job_shows_its_queue_standing(
    bob: Any, alice: Any, request_cluster: Any, submit_job: Any
) -> None:
    from clusters.queue.admission_pass import run_admission_pass
    from tests.frontend.conftest import make_ready

    # alice holds the 16 H100s acme may hold for two hours: bob's job waits behind them.
    for name in ("fill-a", "fill-b"):
        make_ready(request_cluster(alice, name=name, kind="prod", workers=1, ttl_hours=2))
    job = submit_job(bob, "bob-waits")
    run_admission_pass()
    job.refresh_from_db()
    assert job.state == State.QUEUED and job.queue_position == 1
    listing = client_for(bob).get(JOBS).content.decode()
    assert "#1 in acme&#x27;s queue" in listing and "about 2 h" in listing
    assert f'<span class="reason">{reason_label(job.queue_reason)}</span>' in listing
    assert job.queue_reason not in listing  # the code stays in the API
    page = client_for(bob).get(f"{JOBS}bob-waits/").content.decode()
    assert "#1 in acme&#x27;s queue" in page and 'Why it waits: <span class="reason">' in page


def test_another_tenants_pages_are_404(charlie: Any, queued_job: Any) -> None:
    client = client_for(charlie)
    for url in pages():
        assert client.get(url).status_code == 404, url
    assert client.post(NEW, FORM).status_code == 404
    assert client.post(VERDICT, FORM).status_code == 404
    for action in ("stop", "delete"):
        assert client.post(f"{JOBS}bob-train/{action}/").status_code == 404
    queued_job.refresh_from_db()
    assert queued_job.state == State.QUEUED
    assert ClusterRequest.objects.count() == 1


def test_a_clusters_name_is_not_a_job(bob: Any, ready_cluster: Any) -> None:
    response = client_for(bob).get(f"{JOBS}bob-ready/")
    assert response.status_code == 404


def test_viewer_sees_no_buttons_and_no_form(vera: Any, queued_job: Any) -> None:
    client = client_for(vera)
    page = client.get(f"{JOBS}bob-train/").content.decode()
    assert ">Stop</button>" not in page and ">Delete</button>" not in page
    assert client.get(NEW).status_code == 403
    assert "New job" not in client.get(JOBS).content.decode()
    before = AuditEvent.objects.count()
    assert client.post(f"{JOBS}bob-train/stop/").status_code == 403
    queued_job.refresh_from_db()
    assert queued_job.state == State.QUEUED and AuditEvent.objects.count() == before


def test_form_submits_through_the_service(bob: Any) -> None:
    client = client_for(bob)
    body = {
        **FORM,
        "name": "bob-form",
        "working_dir": "s3://bucket/code.zip",
        "pip": "torch==2.4.0\n\ndatasets>=2\n",
        "env_vars": "WANDB_MODE=offline\nGREETING=a=b\n",
        "active_deadline_seconds": 3600,
        "ttl_seconds_after_finished": 60,
    }
    response = client.post(NEW, body)
    assert response.status_code == 302, response.content
    assert response["Location"] == f"{JOBS}bob-form/"
    row = ClusterRequest.objects.get(name="bob-form")
    assert (row.workload, row.owner, row.state, row.gpus) == ("job", bob, "queued", 1)
    assert row.job.runtime_env == {
        "working_dir": "s3://bucket/code.zip",
        "pip": ["torch==2.4.0", "datasets>=2"],
        "env_vars": {"WANDB_MODE": "offline", "GREETING": "a=b"},
    }
    assert (row.job.active_deadline_seconds, row.job.ttl_seconds_after_finished) == (3600, 60)
    assert AuditEvent.objects.filter(action="job.create").count() == 1
    page = client.get(response["Location"]).content.decode()
    assert "bob-form is queued." in page
    assert escape('"WANDB_MODE": "offline"') in page  # runtime_env as pretty JSON
    assert "60 min after it started (3600 s)" in page


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        (
            {
                "entrypoint": "  ",
                "name": "Bad_Name",
                "working_dir": "./src",
                "pip": "--index-url=http://example.com",
                "env_vars": "CUDA_VISIBLE_DEVICES=0",
            },
            {"entrypoint", "name", "working_dir", "pip", "env_vars"},
        ),
        ({"env_vars": "JUST_A_NAME"}, {"env_vars"}),
        ({"active_deadline_seconds": 0}, {"active_deadline_seconds"}),
        ({"flavor": "a100"}, {"flavor"}),
        ({"workers": 33}, {"workers"}),
        ({"cluster": "nope"}, {"cluster"}),
        ({"also_flavors": "a100"}, {"also_flavors"}),
        ({"flavor": "l4", "also_flavors": "l4"}, {"also_flavors"}),
    ],
)
def test_bad_input_shows_field_errors_and_writes_nothing(
    bob: Any, changes: dict[str, Any], fields: set[str]
) -> None:
    response = client_for(bob).post(NEW, {**FORM, **changes})
    assert response.status_code == 400
    assert set(response.context["form"].errors) == fields
    html = response.content.decode()
    for field in fields:
        assert f'id="id_{field}_errors"' in html, field
    assert not ClusterRequest.objects.exists() and not Job.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_job_may_accept_other_flavors_in_order(bob: Any) -> None:
    body = {**FORM, "name": "either", "flavor": "h100", "also_flavors": "l4"}
    verdict = client_for(bob).post(f"{JOBS}new/verdict/", body)
    assert verdict.status_code == 200
    response = client_for(bob).post(NEW, body)
    assert response.status_code == 302, response.content
    row = ClusterRequest.objects.get(name="either")
    assert list(row.accepted_flavors) == ["h100", "l4"]
    assert 'name="also_flavors"' in client_for(bob).get(NEW).content.decode()


def test_the_forbidden_gpu_variable_is_named_next_to_its_input(bob: Any) -> None:
    response = client_for(bob).post(NEW, {**FORM, "env_vars": "NVIDIA_VISIBLE_DEVICES=all"})
    (message,) = response.context["form"].errors["env_vars"]
    assert "NVIDIA_VISIBLE_DEVICES" in message and "GPUs" in message


def test_prod_is_offered_to_admins_only(bob: Any, alice: Any) -> None:
    assert 'value="prod"' not in client_for(bob).get(NEW).content.decode()
    assert 'value="prod"' in client_for(alice).get(NEW).content.decode()
    response = client_for(bob).post(NEW, {**FORM, "kind": "prod"})
    assert response.status_code == 400 and not ClusterRequest.objects.exists()


def test_without_a_ready_dev_cluster_the_form_says_so(bob: Any) -> None:
    form = client_for(bob).get(NEW).content.decode()
    assert "You have no ready dev cluster in acme" in form


def test_a_job_on_my_ready_dev_cluster(bob: Any, alice: Any, ready_cluster: Any) -> None:
    form = client_for(bob).get(NEW).content.decode()
    assert '<option value="bob-ready">bob-ready</option>' in form
    assert "data-hides-shape" in form and "data-shape-field" in form
    # Not offered to anybody else: a job runs only on its owner's cluster.
    assert "bob-ready" not in client_for(alice).get(NEW).content.decode()
    # The shape inputs are sent (hidden, not removed) and ignored, faults and all.
    client = client_for(bob)
    response = client.post(NEW, {**FORM, "workers": 5000, "cluster": "bob-ready"})
    assert response.status_code == 302, response.content
    job = ClusterRequest.objects.get(workload="job")
    assert (job.state, job.gpus, job.workers, job.job.host) == ("starting", 0, 0, ready_cluster)
    page = client.get(response["Location"]).content.decode()
    assert "is starting." in page and 'href="/t/acme/clusters/bob-ready/"' in page


def test_verdict_panel(bob: Any, ready_cluster: Any, as_user: Any) -> None:
    client = client_for(bob)
    html = client.post(VERDICT, FORM).content.decode()
    assert 'data-verdict="fits_now"' in html
    api = as_user(bob).post("/api/v1/tenants/acme/jobs/dry-run/", FORM, format="json")
    assert api.json()["verdict"] == "fits_now"
    html = client.post(VERDICT, {**FORM, "flavor": "l4", "workers": 3}).content.decode()
    assert 'data-verdict="never_fits"' in html
    html = client.post(VERDICT, {**FORM, "env_vars": "CUDA_VISIBLE_DEVICES=0"}).content.decode()
    assert 'data-verdict="invalid"' in html and "<li>Environment variables: " in html
    html = client.post(VERDICT, {**FORM, "cluster": "bob-ready"}).content.decode()
    assert 'data-hosted="true"' in html and "Starts now on bob-ready" in html
    assert ClusterRequest.objects.filter(workload="job").count() == 0
    assert client_for(bob).get(NEW).content.decode().count('hx-post="/t/acme/jobs/new/verdict/"')


def test_log_panel_shows_the_saved_tail_and_stops_polling(bob: Any, queued_job: Any) -> None:
    client = client_for(bob)
    url = f"{JOBS}bob-train/log/?id={queued_job.pk}"
    waiting = client.get(url).content.decode()
    assert 'data-origin="none"' in waiting and "not started yet" in waiting
    assert 'hx-trigger="every 3s"' in waiting  # it waits for the driver's first words
    _finished(queued_job, tail="epoch 1 loss 0.5\nepoch 2 loss 0.25 <done>\n")
    done = client.get(url).content.decode()
    assert 'data-origin="saved"' in done and "hx-trigger" not in done
    assert "epoch 2 loss 0.25 &lt;done&gt;" in done and "Kept when the job ended" in done
    page = client.get(f"{JOBS}bob-train/").content.decode()
    assert "epoch 1 loss 0.5" in page and "raysubmit_abc123" in page and "SUCCEEDED" in page
    assert "badge-succeeded" in page and ">Stop</button>" not in page  # nothing to stop
    assert ">Delete</button>" in page


class FakeGateway:
    """The submitter pod's ``pods/log``, as much as a chatty driver printed."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.asked: dict[str, Any] = {}

    def pod_log(self, namespace: str, name: str, **bounds: Any) -> str:
        self.asked = {"namespace": namespace, "name": name, **bounds}
        return self.text


def test_log_panel_reads_a_running_driver_live_and_bounded(
    bob: Any, queued_job: Any, monkeypatch: Any
) -> None:
    from clusters.kinds.rayjob import driver_logs as logs

    ClusterRequest.objects.filter(pk=queued_job.pk).update(state=State.RUNNING)
    lines = "".join(f"step {n}\n" for n in range(1000))
    gateway = FakeGateway(lines)
    monkeypatch.setattr(logs, "gateway_of", lambda request: gateway)
    monkeypatch.setattr(
        logs.engine, "submitter_pod", lambda job, gw: {"metadata": {"name": "bob-train-abc"}}
    )
    html = client_for(bob).get(f"{JOBS}bob-train/log/?id={queued_job.pk}").content.decode()
    assert 'data-origin="pod"' in html and "Live from <code>bob-train-abc</code>" in html
    assert 'hx-trigger="every 3s"' in html  # it runs: the panel keeps asking
    assert "step 999" in html and "step 799\n" not in html and "the last lines only" in html
    assert gateway.asked["tail_lines"] == 201 and gateway.asked["limit_bytes"] == 64 * 1024 + 1


def test_log_panel_shows_a_coloured_driver_log_as_plain_text(
    bob: Any, queued_job: Any, monkeypatch: Any
) -> None:
    from clusters.kinds.rayjob import driver_logs as logs

    ClusterRequest.objects.filter(pk=queued_job.pk).update(state=State.RUNNING)
    # As Ray prints a task's output on its driver, and ``ray start`` its node's address.
    coloured = (
        "\x1b[36m(where pid=4711)\x1b[0m on a GPU\n"
        "\x1b[37mLocal node IP\x1b[39m: \x1b[1m127.0.0.1\x1b[22m\n"
        "\x1b]8;;http://127.0.0.1:8265\x1b\\dashboard\x1b]8;;\x1b\\ <up>\n"
    )
    monkeypatch.setattr(logs, "gateway_of", lambda request: FakeGateway(coloured))
    monkeypatch.setattr(
        logs.engine, "submitter_pod", lambda job, gw: {"metadata": {"name": "bob-train-abc"}}
    )
    html = client_for(bob).get(f"{JOBS}bob-train/log/?id={queued_job.pk}").content.decode()
    assert "(where pid=4711) on a GPU\nLocal node IP: 127.0.0.1\n" in html
    assert "dashboard &lt;up&gt;" in html  # still escaped as HTML
    assert "\x1b" not in html and "[36m" not in html


def test_stop_and_delete_buttons_call_the_services(bob: Any, queued_job: Any) -> None:
    client = client_for(bob)
    url = f"{JOBS}bob-train/"
    page = client.get(url).content.decode()
    stop = re.search(r'<form[^>]*action="[^"]*/stop/"[^>]*>', page)
    assert stop and 'data-confirm="Stop bob-train?' in stop.group(0)
    assert client.post(url + "stop/").status_code == 302
    queued_job.refresh_from_db()
    assert queued_job.state == State.STOPPED and queued_job.job.ended_at is not None
    page = client.get(url).content.decode()
    assert "Stopped; its GPUs" in page and "queued → stopped" in page
    assert ">Stop</button>" not in page
    assert client.post(url + "delete/").status_code == 302
    queued_job.refresh_from_db()
    assert queued_job.state == State.DELETING
    # A refusal by state is the page with the service's reason, under 409.
    response = client.post(url + "stop/")
    assert response.status_code == 409
    assert "is being deleted (deleting); there is nothing to stop" in response.content.decode()
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["job.create", "job.stop", "job.delete"]


def test_an_admin_may_stop_anybodys_job_and_another_engineer_may_not(
    alice: Any, acme: Any, queued_job: Any
) -> None:
    from tenants.models import Role
    from tests.factories import MembershipFactory, UserFactory

    dana = UserFactory(username="dana")
    MembershipFactory(tenant=acme, user=dana, role=Role.ENGINEER)
    assert ">Stop</button>" not in client_for(dana).get(f"{JOBS}bob-train/").content.decode()
    assert client_for(dana).post(f"{JOBS}bob-train/stop/").status_code == 403
    assert ">Stop</button>" in client_for(alice).get(f"{JOBS}bob-train/").content.decode()
    assert client_for(alice).post(f"{JOBS}bob-train/stop/").status_code == 302


def test_list_filters_by_state_and_shows_duration_and_gpu_hours(
    bob: Any, alice: Any, submit_job: Any, queued_job: Any
) -> None:
    other = submit_job(alice, "alice-eval")
    _finished(other, tail="ok\n")
    client = client_for(bob)
    page = client.get(JOBS + "?state=succeeded").content.decode()
    assert "alice-eval" in page and "bob-train" not in page
    assert "less than a minute" in page  # started and ended just now
    page = client.get(JOBS + "?state=queued&owner=bob").content.decode()
    assert "bob-train" in page and "alice-eval" not in page
    assert 'value="running"' in page and 'value="ready"' not in page  # a job's states
    partial = client.get(JOBS, HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="job-rows"') and "<html" not in partial


def test_list_query_count_does_not_grow_with_jobs(
    bob: Any, alice: Any, acme: Any, submit_job: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    acme.max_dev_clusters_per_user = 10
    acme.max_dev_gpus_per_user = 10
    acme.save()
    client = client_for(bob)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(JOBS).status_code == 200
        return len(ctx.captured_queries)

    submit_job(bob, "bob-one")
    few = count()
    for n in range(3):
        submit_job(alice, f"alice-{n}")
    assert count() == few


def test_waiting_jobs_link_to_their_job_pages(bob: Any, queued_job: Any) -> None:
    for url in ("/", "/t/acme/queue/"):
        page = client_for(bob).get(url).content.decode()
        assert f'href="{JOBS}bob-train/"' in page, url


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_submit_a_job_in_a_browser_and_land_on_its_page(
    page: Any, live_server: Any, browser_env: None, bob: Any, ready_cluster: Any
) -> None:
    from playwright.sync_api import expect

    import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
    from tests.frontend.test_browser import sign_in

    base = live_server.url
    sign_in(page, base, "bob")
    page.goto(f"{base}/t/acme/jobs/new/")
    verdict = page.locator("#verdict [data-verdict]")
    page.get_by_label("Entrypoint").fill("python train.py")
    page.get_by_label("Flavor").select_option("l4")
    page.get_by_label("Workers").fill("3")
    page.get_by_label("Workers").press("Tab")
    expect(verdict).to_have_attribute("data-verdict", "never_fits")
    # On bob's ready dev cluster the shape is hidden and does not count.
    page.get_by_label("Run on my dev cluster").select_option("bob-ready")
    expect(page.get_by_label("Workers")).to_be_hidden()
    expect(verdict).to_have_attribute("data-hosted", "true")
    page.get_by_label("Run on my dev cluster").select_option("")
    expect(page.get_by_label("Workers")).to_be_visible()
    page.get_by_label("Workers").fill("1")
    page.get_by_label("pip packages").fill("numpy\npandas==2.2.0")
    page.get_by_label("Environment variables").fill("WANDB_MODE=offline")
    page.get_by_label("Name", exact=True).fill("bob-browser-job")
    page.get_by_label("Name", exact=True).press("Tab")
    expect(verdict).to_have_attribute("data-verdict", "fits_now")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"{base}/t/acme/jobs/bob-browser-job/")
    expect(page.locator("#job-live [data-state]")).to_have_attribute("data-state", "queued")
    expect(page.get_by_text("bob-browser-job is queued.")).to_be_visible()
    expect(page.locator("#job-log [data-log-message]")).to_contain_text("not started yet")
    job = ClusterRequest.objects.get(name="bob-browser-job")
    assert job.job.runtime_env["pip"] == ["numpy", "pandas==2.2.0"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_pip_option_typed_into_the_new_job_form_is_refused_next_to_the_field(
    page: Any, live_server: Any, browser_env: None, bob: Any
) -> None:
    from playwright.sync_api import expect

    import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
    from tests.frontend.test_browser import sign_in

    base = live_server.url
    sign_in(page, base, "bob")
    page.goto(f"{base}/t/acme/jobs/new/")
    page.get_by_label("Entrypoint").fill("python train.py")
    page.get_by_label("Workers").fill("1")
    page.get_by_label("pip packages").fill(
        "torch==2.4.0\ntorch --index-url https://evil.example/simple\nevil @ https://e.example/e.whl"
    )
    page.get_by_label("Name", exact=True).fill("bob-pip-job")
    page.get_by_role("button", name="Submit job").click()
    errors = page.locator("#field-pip .error")
    expect(errors).to_contain_text(
        "'torch --index-url https://evil.example/simple': pip options are not allowed: "
        "the platform chooses the package index."
    )
    expect(errors).to_contain_text(
        "'evil @ https://e.example/e.whl': direct URL references are not allowed unless "
        "your tenant's policy allows them."
    )
    expect(page.get_by_label("pip packages")).to_have_value(re.compile("evil.example"))
    page.screenshot(path="/tmp/pip-job-form.png", full_page=True)
    assert not ClusterRequest.objects.filter(name="bob-pip-job").exists()
    assert not Job.objects.exists()
