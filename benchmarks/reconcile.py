"""One reconcile pass over 100, 1,000 and 5,000 live dev clusters on kubesim.

Each size gets a fresh kubesim (no start-up delay) with a fleet just big enough (8 x H100
nodes for the single-GPU workers, CPU nodes for the heads) and a fresh set of rows in
``provisioning``, whose RayClusters are applied first through the product's own gateway.
Then, timed: the first pass (it moves every row to ``ready``: the pass that does work),
then steady passes (nothing changed: the pass every beat runs, which skips every row,
``clusters.engine.foldmemo``), passes after 1% of the RayClusters changed (an annotation
written: a new resourceVersion, nothing to do), and full passes (every row folded, as
every ``RECONCILE_FULL_PASS_SECONDS``), with the Kubernetes API calls (counted at the
gateway) and the database queries of each.
"""

from __future__ import annotations

import math
import time
from decimal import Decimal
from typing import Any

from benchmarks import support

SIZES = (100, 1_000, 5_000)
STEADY_RUNS = 5
TENANTS = 10
CHANGED = 0.01  # of the RayClusters, before each "changed" pass


def _fill(size: int) -> None:
    """Tenants, a flavor and ``size`` rows in ``provisioning``."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from clusters.domain.states import State
    from clusters.models import ClusterRequest
    from tenants.models import Quota, Tenant

    support.truncate_product_tables()
    users = get_user_model()
    owners = [users.objects.get_or_create(username=f"rec{i}")[0] for i in range(TENANTS)]
    h100 = support.h100_flavor(math.ceil(size / 8) + 1)
    tenants = Tenant.objects.bulk_create(
        Tenant(
            slug=f"rec{i:02d}",
            name=f"Reconcile {i}",
            namespace=f"gw-rec{i:02d}",
            max_dev_clusters_per_user=10_000,
            max_dev_gpus_per_user=10_000,
        )
        for i in range(TENANTS)
    )
    Quota.objects.bulk_create(Quota(tenant=t, flavor=h100, gpus=size) for t in tenants)
    now = timezone.now()
    ClusterRequest.objects.bulk_create(
        (
            ClusterRequest(
                tenant=tenants[i % TENANTS],
                owner=owners[i % TENANTS],
                name=f"dev-{i}",
                kind="dev",
                flavor=h100,
                workers=1,
                gpus=Decimal(1),
                cpu=Decimal(26),
                memory_gib=Decimal(233),
                state=State.PROVISIONING,
                holds_gpus=True,
                admitted_at=now,
            )
            for i in range(size)
        ),
        batch_size=2_000,
    )


def _apply_all() -> float:
    """Apply every row's RayCluster (and the tenant bundles) through the gateway."""
    from clusters.engine import provisioning
    from clusters.kube.gateway import get_gateway
    from clusters.models import ClusterRequest

    gw = get_gateway()
    started = time.perf_counter()
    rows = ClusterRequest.objects.unscoped().select_related("tenant", "flavor", "owner")
    for row in rows:
        provisioning.apply_cluster(row, gw)
    return time.perf_counter() - started


def _timed_pass() -> tuple[float, int, int, Any, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from clusters.engine.reconciler import reconcile_once

    # Django keeps the last 9,000 queries only: emptied first, or a count after a large
    # setup reads as 0.
    connection.queries_log.clear()
    with support.count_kube_calls() as calls, CaptureQueriesContext(connection) as queries:
        started, cpu_started = time.perf_counter(), time.process_time()
        report = reconcile_once()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return elapsed, calls.total, len(queries), report, cpu


def _measure(size: int) -> dict[str, Any]:
    from clusters.kube import bundles
    from clusters.kube.gateway import get_gateway
    from clusters.models import ClusterRequest

    _fill(size)
    fleet = support.gpu_fleet(h100_nodes=math.ceil(size / 8) + 1, cpu_nodes=math.ceil(size / 50))
    with support.kubesim_for_django(fleet):
        for tenant_id in range(1, TENANTS + 1):
            bundles.forget_bundle(tenant_id)  # ids restart with every fill
        applied = _apply_all()
        pods = len(get_gateway().list("v1", "Pod"))
        first, first_calls, first_queries, report, first_cpu = _timed_pass()
        ready = ClusterRequest.objects.filter(state="ready").count()
        _timed_pass()  # folds the rows the first pass moved (they changed): settles them
        steady = [_timed_pass() for _ in range(STEADY_RUNS)]
        changed = [_changed_pass(size, run) for run in range(STEADY_RUNS)]
        full = [_full_pass() for _ in range(STEADY_RUNS)]
        watched = _watched(size)
    return {
        **watched,
        "size": size,
        "pods": pods,
        "applied": applied,
        "first": first,
        "first_calls": first_calls,
        "first_queries": first_queries,
        "moved": len(report.ready),
        "ready": ready,
        "steady": support.median([s[0] for s in steady]),
        "steady_cpu": support.median([s[4] for s in steady]),
        "first_cpu": first_cpu,
        "steady_max": max(s[0] for s in steady),
        "steady_calls": max(s[1] for s in steady),
        "steady_queries": max(s[2] for s in steady),
        "steady_folded": max(s[3].folded for s in steady),
        "changed": support.median([c[0] for c in changed]),
        "changed_folded": support.median([c[3].folded for c in changed]),
        "full": support.median([f[0] for f in full]),
        "full_cpu": support.median([f[4] for f in full]),
        "full_queries": max(f[2] for f in full),
    }


def _changed_pass(size: int, run: int) -> tuple[float, int, int, Any, float]:
    """A pass after 1% of the RayClusters were written to (a new resourceVersion each;
    their rows have nothing to do): it folds those rows and skips the rest."""
    from clusters.kube.gateway import get_gateway
    from clusters.models import ClusterRequest

    gw = get_gateway()
    touched = ClusterRequest.objects.select_related("tenant").order_by("pk")[
        : max(int(size * CHANGED), 1)
    ]
    for row in touched:
        gw.merge_patch(
            "ray.io/v1",
            "RayCluster",
            row.name,
            {"metadata": {"annotations": {"bench.gangway.dev/touched": str(run)}}},
            row.namespace,
        )
    return _timed_pass()


def _watched(size: int) -> dict[str, Any]:
    """The same passes on the informers' caches (``RECONCILE_WATCH``): the time until
    every kind is listed and watched, then steady and 1%-changed passes. Their CPU is the
    whole process's, the informers' threads decoding the watch events included."""
    from django.conf import settings

    from clusters.engine import informers
    from clusters.engine.reconciler import reconcile_once

    settings.RECONCILE_WATCH = True
    settings.RECONCILE_WATCH_NUDGE_SECONDS = 0  # no task messages: passes run here
    try:
        started = time.perf_counter()
        reconcile_once()  # starts the informers (this pass still lists)
        caches = informers.caches({})
        assert caches is not None
        for informer in caches.informers.values():
            if not informer.wait_until_watching(120):
                raise RuntimeError(f"the {informer.kind} informer never started watching")
        synced = time.perf_counter() - started
        _timed_pass()  # settles what the listing pass folded
        steady = [_timed_pass() for _ in range(STEADY_RUNS)]
        changed = [_changed_pass(size, STEADY_RUNS + run) for run in range(STEADY_RUNS)]
    finally:
        informers.stop()
        settings.RECONCILE_WATCH = False
    return {
        "w_synced": synced,
        "w_steady": support.median([s[0] for s in steady]),
        "w_steady_max": max(s[0] for s in steady),
        "w_steady_cpu": support.median([s[4] for s in steady]),
        "w_steady_calls": max(s[1] for s in steady),
        "w_steady_queries": max(s[2] for s in steady),
        "w_changed": support.median([c[0] for c in changed]),
        "w_changed_cpu": support.median([c[4] for c in changed]),
        "w_changed_calls": max(c[1] for c in changed),
        "w_changed_folded": support.median([c[3].folded for c in changed]),
    }


def _full_pass() -> tuple[float, int, int, Any, float]:
    """A pass that folds every row (nothing to change), as every
    ``RECONCILE_FULL_PASS_SECONDS``."""
    from clusters.engine import foldmemo

    foldmemo.MEMO.clear()
    return _timed_pass()


def run() -> str:
    """Time reconcile passes at each size; returns the markdown section."""
    support.setup_django("bench_reconcile")
    from django.conf import settings

    settings.RECONCILE_WATCH = False  # the first table: every pass lists every kind
    results = [_measure(size) for size in SIZES]
    rows = [
        f"| {r['size']:,} | {r['pods']:,} | {r['steady'] * 1000:,.0f} ms "
        f"({r['steady_max'] * 1000:,.0f}) | {r['steady_cpu'] * 1000:,.0f} ms | "
        f"{r['steady_calls']} | {r['steady_queries']} | {r['steady_folded']} | "
        f"{r['changed'] * 1000:,.0f} ms | {r['changed_folded']:,.0f} | "
        f"{r['full'] * 1000:,.0f} ms | {r['full_cpu'] * 1000:,.0f} ms | {r['full_queries']} | "
        f"{r['first'] * 1000:,.0f} ms | {r['first_cpu'] * 1000:,.0f} ms | {r['moved']:,} | "
        f"{r['first_calls']} | "
        f"{r['first_queries']} | {r['size'] / r['applied']:,.0f}/s |"
        for r in results
    ]
    watched = [
        f"| {r['size']:,} | {r['w_synced']:,.1f} s | {r['w_steady'] * 1000:,.0f} ms "
        f"({r['w_steady_max'] * 1000:,.0f}) | {r['w_steady_cpu'] * 1000:,.0f} ms | "
        f"{r['w_steady_calls']} | {r['w_steady_queries']} | "
        f"{r['w_changed'] * 1000:,.0f} ms | {r['w_changed_cpu'] * 1000:,.0f} ms | "
        f"{r['w_changed_calls']} | {r['w_changed_folded']:,.0f} |"
        for r in results
    ]
    small, large = results[0], results[-1]
    growth = large["steady"] / small["steady"]
    w_growth = large["w_steady"] / small["w_steady"]
    full_growth = large["full"] / small["full"]
    return "\n".join(
        [
            "## Reconcile pass (`reconcile_once`)",
            "",
            "Live dev clusters (1 head + 1 single-GPU worker each) in 10 tenants on kubesim with "
            "no start-up delay, their RayClusters applied first through the gateway. *Steady*: "
            f"a pass with nothing to change, median of {STEADY_RUNS} (max in brackets): it "
            "skips every row, unchanged since a fold that changed nothing "
            "(`clusters/engine/foldmemo.py`). *1% changed*: a pass after 1% of the "
            "RayClusters were written to (an annotation: a new resourceVersion, nothing to "
            "do), median of 5. *Full*: a pass that folds every row (nothing to change), as "
            "every `RECONCILE_FULL_PASS_SECONDS`, median of 5. *First pass*: the one that "
            "finds every cluster's pods ready and moves its row to `ready`. "
            "*Its CPU* is the control plane's own CPU time in the pass (all its threads); the "
            "rest of the wall time is waiting for kubesim, which runs in its own process as an "
            "API server would, and for PostgreSQL. Calls are Kubernetes API requests counted "
            "at the gateway (LIST pages included); queries are database queries.",
            "",
            "| clusters | pods | steady pass | its CPU | API calls | queries | rows folded "
            "| 1% changed | rows folded | full pass | its CPU | queries | first pass "
            "| its CPU | rows moved | API calls | queries | apply rate (setup) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
            "|---:|---:|",
            *rows,
            "",
            f"Steady pass {large['size']:,} / {small['size']:,} clusters: **{growth:.1f}x** for "
            f"{large['size'] // small['size']}x the clusters (full pass: {full_growth:.1f}x).",
            "",
            "The same fleets, passes on the informers' caches (`RECONCILE_WATCH`, the "
            "default: one LIST and then a WATCH per kind, kept by the process; "
            "`clusters/kube/informer.py`). *Synced*: from the first pass (which lists and "
            "starts the informers) until every kind is watched. A pass's one API call is "
            "the server's current version, which the caches are waited for. *Its CPU* is "
            "the whole process's, the informers' threads decoding the watch events "
            "included; the 1% changed arrive as watch events. Its wall time includes up to "
            "`RECONCILE_WATCH_WAIT_SECONDS` (0.1 s) of waiting: after the RayClusters' "
            "writes the quiet kinds' caches cannot reach the server's version, and the pass "
            "waits that long for them before it reads them as they are.",
            "",
            "| clusters | synced | steady pass | its CPU | API calls | queries "
            "| 1% changed | its CPU | API calls | rows folded |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *watched,
            "",
            f"Steady pass on the caches {large['size']:,} / {small['size']:,} clusters: "
            f"**{w_growth:.1f}x**. {support.load_line()}",
        ]
    )
