"""Screenshots of the dashboard for the README, taken over the demo data.

Not part of the test suite (the file name does not match ``test_*.py``): it writes PNGs,
and ``python scripts/screenshots.py`` runs it explicitly with ``GANGWAY_SCREENSHOTS_DIR``
set (default ``docs/screenshots``). Clusters are put into their states by the services and the real
admission pass; ``provisioning``/``ready`` use the transition helper as the reconciler
would, since no Kubernetes runs here. Usage spans are moved three days back so that
the usage page has something to show. Jobs are submitted by their service; one is run
to its end with the transition helper and ``release_gpus``, as the engine would. The ready
``eli-notebook`` also runs in kubesim (its page shows real pod logs), in use, then idle
for an hour and warned by the activity pass (``cluster-idle.png``).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

import tests.frontend.browser  # noqa: F401  (sets DJANGO_ALLOW_ASYNC_UNSAFE first)
from clusters.domain.states import State
from clusters.engine import provisioning
from clusters.engine.idle import apply_activity, check_activity
from clusters.kinds.rayjob.requests import job_create
from clusters.kinds.rayjob.spec import JobSpec
from clusters.kube.gateway import get_gateway
from clusters.kube.raydash import Activity
from clusters.models import ClusterEvent, ClusterRequest, Job, UsageSpan
from clusters.queue.admission_pass import run_admission_pass
from clusters.requests import services
from clusters.rows.spec import ClusterSpec
from clusters.rows.transitions import release_gpus, transition
from tenants.demo import DEMO_PASSWORD, demo_seed
from tenants.models import GpuFlavor, Tenant
from tenants.services import tenant_update
from tests.clusters.engine.conftest import running_kubesim, wait_for
from tests.clusters.live.conftest import head_ready
from tests.factories import usage_span

OUT = os.environ.get("GANGWAY_SCREENSHOTS_DIR", "docs/screenshots")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def _ready(cluster: ClusterRequest) -> None:
    cluster.refresh_from_db()
    transition(cluster, State.PROVISIONING, reason="applied", message="RayCluster applied")
    transition(cluster, State.READY, reason="ready", message="head and 1 worker ready")


def _scene() -> None:
    """vision and speech fill the shared H100 fleet; eli's second request waits."""
    demo_seed()
    users = {u.username: u for u in get_user_model().objects.all()}
    vision, speech = Tenant.objects.get(slug="vision"), Tenant.objects.get(slug="speech")
    tenant_update(
        actor=users["admin"],
        tenant=vision,
        changes={"max_dev_clusters_per_user": 4, "max_dev_gpus_per_user": 8},
    )
    vision.refresh_from_db()
    h100, l4 = GpuFlavor.objects.get(name="h100"), GpuFlavor.objects.get(name="l4")

    def ask(actor: str, tenant: Tenant, name: str, **shape: Any) -> ClusterRequest:
        values: dict[str, Any] = {"kind": "dev", "flavor": h100, "workers": 1, **shape}
        return services.cluster_request_create(
            actor=users[actor], tenant=tenant, spec=ClusterSpec(name=name, **values)
        )

    first = [
        ask("ada", vision, "train-llm", kind="prod", workers=1, ttl_hours=6),
        ask("ada", vision, "eval-batch", kind="prod", workers=1, ttl_hours=1),
        ask("sam", speech, "asr-finetune", kind="prod", workers=2, ttl_hours=3),
        ask("eli", vision, "eli-notebook", flavor=l4, ttl_hours=8),
        ask("ada", vision, "ada-l4-debug", flavor=l4),
    ]
    run_admission_pass()
    for cluster in first:
        _ready(cluster)
    services.cluster_suspend(actor=users["ada"], cluster=first[-1])
    # The H100 fleet is now full (vision 16, speech 16): these wait.
    ask("eli", vision, "eli-sweep", workers=2)
    ask("ada", vision, "train-70b", kind="prod", workers=2, ttl_hours=12)
    # Jobs: ada's evaluation takes vision's free L4 and runs to its end; eli's waits for
    # an H100.
    evaluation = job_create(
        actor=users["ada"],
        tenant=vision,
        spec=ClusterSpec(kind="dev", flavor=l4, workers=1),
        job=JobSpec(
            name="ada-eval",
            entrypoint="python eval.py --checkpoint s3://vision/ckpt/step-4000",
            runtime_env={
                "pip": ["torch==2.4.0", "datasets>=2"],
                "env_vars": {"HF_HUB_OFFLINE": "1"},
            },
            active_deadline_seconds=7200,
        ),
    )
    job_create(
        actor=users["eli"],
        tenant=vision,
        spec=ClusterSpec(kind="dev", flavor=h100, workers=1),
        job=JobSpec(name="eli-finetune", entrypoint="python finetune.py --epochs 3"),
    )
    run_admission_pass()
    _run_to_the_end(evaluation)
    UsageSpan.objects.unscoped().update(started_at=timezone.now() - timedelta(days=3))
    UsageSpan.objects.unscoped().filter(cluster__name="ada-l4-debug").update(
        ended_at=timezone.now() - timedelta(days=1)
    )
    ran = ClusterRequest.objects.unscoped().get(name="ada-eval")
    UsageSpan.objects.unscoped().filter(cluster=ran).update(
        started_at=ran.admitted_at, ended_at=ran.gpus_released_at
    )
    _history(users, vision, speech, h100, l4)


def _history(
    users: dict[str, Any], vision: Tenant, speech: Tenant, h100: GpuFlavor, l4: GpuFlavor
) -> None:
    """Four weeks of finished clusters, so that the usage charts have days to draw: a
    nightly training run and daytime notebooks, more of them on weekdays."""
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    for back in range(4, 29):
        day = today - timedelta(days=back)
        weekday = day.weekday() < 5
        runs = [
            (vision, "ada", h100, 8, 20, 6 + back % 4),
            (speech, "sam", h100, 16 if back % 3 else 8, 22, 5),
            (vision, "eli", l4, 1, 9, 8 if weekday else 3),
        ]
        if weekday:
            runs.append((speech, "emma", h100, 2, 10, 4 + back % 3))
        for tenant, owner, flavor, gpus, hour, hours in runs:
            start = day + timedelta(hours=hour)
            usage_span(
                tenant=tenant,
                owner=users[owner],
                flavor=flavor,
                gpus=gpus,
                start=start,
                end=start + timedelta(hours=hours),
            )


def _run_to_the_end(job: ClusterRequest) -> None:
    """What the engine records of a job whose driver exits 0 and whose pods then go."""
    job.refresh_from_db()
    now = timezone.now()
    started, ended = now - timedelta(minutes=50), now - timedelta(minutes=3)
    transition(job, State.STARTING, reason="applied", message="RayJob applied")
    transition(job, State.RUNNING, reason="running", message="the driver runs")
    transition(job, State.SUCCEEDED, reason="succeeded", message="the driver exited 0")
    steps = "".join(
        f"step {n:>5}  eval/accuracy {0.61 + n / 40000:.4f}  loss {1.9 - n / 3000:.3f}\n"
        for n in range(0, 4001, 250)
    )
    Job.objects.filter(pk=job.pk).update(
        ray_job_id="raysubmit_hB3xqZ9kT1",
        ray_cluster_name="ada-eval-x7k2p",
        job_status="SUCCEEDED",
        message="Job finished successfully.",
        started_at=started,
        ended_at=ended,
        log_tail=f"loading s3://vision/ckpt/step-4000\n{steps}done: accuracy 0.7100\n",
    )
    release_gpus(job, message="its pods are gone; GPUs released")
    # A timeline as the engine would have written it over the run, not all at once.
    requested = started - timedelta(minutes=2)
    released = ended + timedelta(seconds=20)
    ClusterRequest.objects.filter(pk=job.pk).update(
        created_at=requested,
        admitted_at=requested + timedelta(seconds=5),
        gpus_released_at=released,
    )
    at = {
        "requested": requested,
        "admitted": requested + timedelta(seconds=5),
        "applied": requested + timedelta(seconds=6),
        "running": started,
        "succeeded": ended,
        "gpus_released": released,
    }
    for event in ClusterEvent.objects.filter(cluster_id=job.pk):
        if event.reason in at:
            ClusterEvent.objects.filter(pk=event.pk).update(at=at[event.reason])


def _run_in_kubesim(name: str, sim: Any) -> ClusterRequest:
    """Apply a ready cluster's RayCluster to kubesim, as provisioning does, and wait for
    its head: its page then shows real logs and its dashboard answers through the proxy."""
    cluster = ClusterRequest.objects.unscoped().select_related("tenant", "flavor", "owner")
    row = cluster.get(name=name)
    provisioning.apply_cluster(row, get_gateway())
    wait_for(lambda: head_ready(row), timeout=30, what=f"{name}'s head")
    sim.set_ray_driver(row.namespace, row.name, "active")  # a notebook is connected
    return row


def _idle_for(row: ClusterRequest, sim: Any, minutes: int) -> None:
    """The notebook disconnects; Ray saw the last use ``minutes`` ago; the pass warns."""
    sim.set_ray_driver(row.namespace, row.name, "idle")
    now = timezone.now()
    ClusterRequest.objects.unscoped().filter(pk=row.pk).update(
        ready_at=now - timedelta(hours=3), last_active_at=now - timedelta(minutes=minutes)
    )
    fresh = ClusterRequest.objects.unscoped().select_related("tenant", "flavor", "owner")
    quiet = Activity(False, now - timedelta(minutes=minutes), "no Ray driver or job is running")
    apply_activity(fresh.get(pk=row.pk), quiet, now=now)


def test_screenshots(
    page: Any, live_server: Any, browser_env: None, tmp_path: Path, settings: Any
) -> None:
    from playwright.sync_api import expect

    _scene()
    with running_kubesim(tmp_path, settings) as sim:
        _take(page, live_server.url, sim, expect)


def _take(page: Any, base: str, sim: Any, expect: Any) -> None:
    notebook = _run_in_kubesim("eli-notebook", sim)
    check_activity()
    out = Path(OUT)
    out.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1280, "height": 860})
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill("eli")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/")

    def shot(path: str, name: str) -> None:
        page.goto(base + path)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(out / f"{name}.png"), full_page=True)

    shot("/", "home")
    shot("/t/vision/", "cluster-list")
    shot("/t/vision/clusters/eli-sweep/", "cluster-detail-queued")
    page.goto(base + "/t/vision/clusters/eli-notebook/")
    expect(page.locator("#cluster-log pre.log")).to_contain_text("Ray runtime started.")
    shot("/t/vision/clusters/eli-notebook/", "cluster-detail-ready")
    _idle_for(notebook, sim, 64)
    page.goto(base + "/t/vision/clusters/eli-notebook/")
    expect(page.locator("[data-idle-warning]")).to_be_visible()
    page.screenshot(path=str(out / "cluster-idle.png"), full_page=False)
    shot("/t/vision/queue/", "queue")
    shot("/t/vision/usage/?days=7", "usage")
    shot("/t/vision/jobs/", "job-list")
    shot("/t/vision/jobs/ada-eval/", "job-detail")
    page.goto(f"{base}/t/vision/clusters/new/")
    page.get_by_label("Workers").fill("2")
    page.get_by_label("Workers").press("Tab")
    # Wait for the verdict on two workers, not the one the form loaded with.
    expect(page.locator("#verdict")).to_contain_text("borrow 2 h100 GPUs")
    expect(page.locator("#verdict [data-verdict]")).to_have_attribute("data-verdict", "will_queue")
    page.screenshot(path=str(out / "new-cluster.png"), full_page=True)
    page.goto(f"{base}/t/vision/jobs/new/")
    page.get_by_label("Entrypoint").fill("python sweep.py --trials 8")
    page.get_by_label("pip packages").fill("optuna==4.0.0")
    page.get_by_label("Workers").fill("2")
    page.get_by_label("Workers").press("Tab")
    expect(page.locator("#verdict [data-verdict]")).to_have_attribute("data-verdict", "will_queue")
    page.screenshot(path=str(out / "new-job.png"), full_page=True)
    _take_admin(page, base, out, expect)


def _take_admin(page: Any, base: str, out: Path, expect: Any) -> None:
    """The administrators' pages, signed in as the demo's platform admin."""
    page.context.clear_cookies()
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/")

    def shot(path: str, name: str) -> None:
        page.goto(base + path)
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(out / f"{name}.png"), full_page=True)

    shot("/platform/tenants/", "platform-tenants")
    # A quota beyond the fleet, typed but not saved: the preview warns.
    page.goto(f"{base}/platform/tenants/speech/")
    expect(page.locator("#quota-preview [data-preview]")).to_be_visible()
    page.get_by_label("h100 nominal GPUs").fill("40")
    expect(page.locator("#quota-preview [data-warning]").first).to_be_visible()
    page.screenshot(path=str(out / "platform-tenant-quota.png"), full_page=True)
    shot("/platform/users/", "platform-users")
    shot("/platform/flavors/", "platform-flavors")
    shot("/t/vision/members/", "tenant-members")
    page.goto(f"{base}/t/vision/clusters/train-70b/manage/")
    priority = page.locator("form", has=page.get_by_role("heading", name="Priority"))
    priority.get_by_label("Priority").fill("20")
    priority.get_by_label("Reason").fill("the 70B run gates Friday's release")
    page.screenshot(path=str(out / "queue-manage.png"), full_page=True)
    page.goto(f"{base}/capacity/")
    expect(page.locator("[data-node]").first).to_be_visible()
    page.screenshot(path=str(out / "capacity.png"), full_page=True)
    shot("/fair-share/", "fair-share")
    shot("/usage/?days=30", "platform-usage")
    shot("/audit/", "audit")
    # A simulated day of the synthetic workload, as is and with 16 fewer H100 nodes.
    shot(
        "/platform/whatif/?run=1&source=synthetic&days=1&seed=19&changes=nodes%3Ah100%3D-16",
        "platform-whatif",
    )
    page.set_viewport_size({"width": 390, "height": 844})
    shot("/t/vision/queue/", "queue-phone")
