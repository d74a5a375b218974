"""The integrated admission pass on PostgreSQL: snapshot read, decision, rows written back.

30 tenants in 3 cohorts share a catalogue matching kubesim's large fleet (64 nodes x
8 H100, 32 x 1 L4, 16 CPU nodes), which runs in-process: one reconcile pass records its
free capacity per flavor before the passes are timed, so admission is capacity-aware.
The benchmark fills a dedicated database (``<name>_bench``, created and migrated on
first use) with 1,500 and then 15,000 queued requests and times one
``run_admission_pass()`` each: one query per table for the snapshot, the pure decision,
the conditional UPDATEs of the admitted rows and the bulk update of every waiting
request's position, reason, message and ETA. The first pass writes every queue field
(the expensive case); a second pass over the same queue is timed too (only what changed
is written — after admissions the fair-share order moves, so most flavor positions do).
"""

from __future__ import annotations

import os
import random
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

TENANTS = 30


def _setup_django() -> None:
    import dj_database_url
    import psycopg

    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway")
    parsed = dj_database_url.parse(url)
    name = f"{parsed['NAME']}_bench"
    admin = psycopg.connect(
        host=parsed["HOST"],
        port=parsed["PORT"] or 5432,
        user=parsed["USER"],
        dbname="postgres",
        autocommit=True,
    )
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    base = url.rsplit("/", 1)[0]
    os.environ["DATABASE_URL"] = f"{base}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _fill(waiting: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from clusters.models import ClusterRequest
    from tenants.models import GpuFlavor, Quota, Tenant

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE clusters_usagespan, clusters_clusterevent, clusters_clusterrequest, "
            "tenants_quota, tenants_membership, tenants_auditevent, tenants_tenant, "
            "tenants_gpuflavor RESTART IDENTITY CASCADE"
        )
    users = get_user_model()
    owners = [users.objects.get_or_create(username=f"bench{i}")[0] for i in range(TENANTS * 5)]
    h100 = GpuFlavor.objects.create(
        name="h100",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpus_per_node=8,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        node_count=64,
    )
    l4 = GpuFlavor.objects.create(
        name="l4",
        gpu_product="NVIDIA-L4",
        gpus_per_node=1,
        cpu_per_node=16,
        memory_per_node_gib=64,
        node_count=32,
        sharing=True,
    )
    tenants = Tenant.objects.bulk_create(
        Tenant(
            slug=f"team{i:02d}",
            name=f"Team {i}",
            namespace=f"gw-team{i:02d}",
            cohort=f"cohort{i % 3}",
            weight=Decimal(1 + i % 3),
            max_dev_clusters_per_user=1000,
            max_dev_gpus_per_user=1000,
        )
        for i in range(TENANTS)
    )
    Quota.objects.bulk_create(
        [Quota(tenant=t, flavor=h100, gpus=16, borrow_limit=8) for t in tenants]
        + [Quota(tenant=t, flavor=l4, gpus=1, borrow_limit=1) for t in tenants]
    )
    rng = random.Random(7)
    from django.utils import timezone

    now = timezone.now()
    rows = []
    for i in range(waiting):
        tenant = tenants[i % TENANTS]
        on_l4 = rng.random() < 0.2
        workers = 1 if on_l4 else rng.choice([1, 1, 2, 4, 8])
        rows.append(
            ClusterRequest(
                tenant=tenant,
                owner=owners[(i % TENANTS) * 5 + rng.randrange(5)],
                name=f"req-{i}",
                kind="dev",
                flavor=l4 if on_l4 else h100,
                workers=workers,
                ttl_hours=rng.choice([2, 4, 8]),
                gpus=Decimal(workers),
                cpu=Decimal(2 + 24 * workers),
                memory_gib=Decimal(8 + 225 * workers),
            )
        )
    ClusterRequest.objects.bulk_create(rows, batch_size=2000)
    # Spread creation times so that age and aging matter.
    ClusterRequest.objects.update(created_at=now - timedelta(minutes=30))


def _timed_pass() -> tuple[float, Any]:
    from django.db import connection

    from clusters.queue.admission_pass import run_admission_pass

    started = time.perf_counter()
    result = run_admission_pass()
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed, result


def _observe_large_fleet() -> Any:
    """Start kubesim with the large fleet and let one reconcile pass record its capacity."""
    import tempfile
    from pathlib import Path

    from django.conf import settings

    from kubesim import KubeSim

    fleet = Path(__file__).resolve().parent.parent / "kubesim" / "fleets" / "large.yaml"
    sim = KubeSim(fleet=str(fleet), port=0).start()
    kubeconfig = Path(tempfile.mkdtemp()) / "kubeconfig"
    sim.write_kubeconfig(str(kubeconfig))
    settings.KUBECONFIG = str(kubeconfig)
    return sim


def run() -> str:
    """Time the integrated pass at 1,500 and 15,000 waiting requests."""
    _setup_django()
    from clusters.engine.reconciler import reconcile_once
    from clusters.models import ClusterRequest
    from tenants.models import GpuFlavor

    sim = _observe_large_fleet()
    rows = []
    times: dict[int, float] = {}
    for waiting in (1_500, 15_000):
        _fill(waiting)
        reconcile_once()
        observed = {f.name: f.observed_free_gpus for f in GpuFlavor.objects.all()}
        assert observed == {"h100": 512, "l4": 32}, observed
        first, result = _timed_pass()
        second, _ = _timed_pass()
        times[waiting] = first
        with_eta = ClusterRequest.objects.filter(state="queued", queue_eta__isnull=False).count()
        rows.append(
            f"| {waiting:,} | {first * 1000:,.0f} ms | {first / waiting * 1e6:,.0f} µs | "
            f"{second * 1000:,.0f} ms | {len(result.admitted):,} | {result.waiting:,} "
            f"({with_eta:,} with an ETA) |"
        )
    sim.stop()
    ratio = times[15_000] / times[1_500]
    return "\n".join(
        [
            "## Admission pass on PostgreSQL (`run_admission_pass`)",
            "",
            "One integrated pass: snapshot from one query per table, the pure decision, "
            "conditional UPDATEs of the admitted rows and a bulk update of every waiting "
            "request's position, reason, message and ETA, under the advisory lock. 30 "
            "tenants in 3 cohorts on kubesim's large fleet (64 x 8 H100, 32 x 1 L4), whose "
            "free capacity a reconcile pass recorded first (capacity-aware admission).",
            "",
            "| waiting requests | first pass | per request | second pass (same queue) "
            "| admitted | left waiting |",
            "|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
            f"Ratio 15,000 / 1,500 (first pass): **{ratio:.1f}x** for 10x the requests "
            "(linear would be about 10x, quadratic about 100x). Load average at the end: "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.",
        ]
    )
