"""1,000 dev clusters through the whole product, against kubesim with no start-up delay.

Each part runs in its own process as in production: gunicorn (sync workers where the image
runs uvicorn's, which add WebSockets), a Celery worker and beat on Redis, PostgreSQL, and
kubesim as the Kubernetes API server. Eight client threads create 1,000 clusters through the
API until all are ``ready`` and the Celery queue is empty, delete them until all are
``deleted``, then submit 1,000 RayJobs until all have succeeded. kubesim counts Kubernetes
requests; each process's CPU time per stage comes from ``/proc``, since on a shared machine
wall time says less. The anchor applies the same RayClusters straight to kubesim.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import support
from benchmarks.http_session import HttpSession

CLUSTERS = int(os.environ.get("BENCH_E2E_CLUSTERS", "1000"))
# Whole runs (product and anchor each); the tables show the median run by clusters/s.
RUNS = int(os.environ.get("BENCH_E2E_RUNS", "3"))
CLIENTS = 8
TENANTS = 20
ENGINEERS_PER_TENANT = 5
# The worker as deploy/ runs it: Celery's pool and its concurrency.
WORKER = (
    os.environ.get("BENCH_E2E_POOL", "threads"),
    int(os.environ.get("BENCH_E2E_CONCURRENCY", "2")),
)
# The other ways the worker is run, once each (product only, no anchor), to show why
# WORKER is what deploy/ runs: ``pool:concurrency`` entries; empty: none.
SWEEP = [
    (pool, int(concurrency))
    for pool, concurrency in (
        entry.strip().split(":")
        for entry in os.environ.get("BENCH_E2E_SWEEP", "prefork:1,prefork:2,threads:4").split(",")
        if entry.strip()
    )
]
# The processes whose CPU time is counted per cluster, in the tables' order.
PARTS = ["gunicorn", "worker", "beat", "kubesim", "postgres", "redis"]
# As deploy/Dockerfile runs it. A sync worker waits on PostgreSQL for part of each
# create (its commit is flushed to disk), so two left the CPUs partly idle.
GUNICORN_WORKERS = int(os.environ.get("BENCH_E2E_GUNICORN_WORKERS", "3"))
BROKER_DB = 14
QUEUE = "bench-e2e"
DEADLINE_SECONDS = 900.0
# How long kubesim's simulated Ray drivers run (after 0 s pending): short, so that the
# jobs stage measures the control plane rather than the drivers.
JOB_RUN_SECONDS = 1


@dataclass
class Stage:
    """One timed stage: its wall time and what the clients saw."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _fill(h100_nodes: int) -> list[tuple[str, str]]:
    """Tenants, engineers and their API tokens; returns (tenant slug, token) per engineer."""
    support.truncate_product_tables()
    return fill_engineers(CLUSTERS, support.h100_flavor(h100_nodes), "e2e")


def fill_engineers(clusters: int, flavor: Any, prefix: str) -> list[tuple[str, str]]:
    """:data:`TENANTS` tenants named after ``prefix``, each with quota of ``flavor`` and
    per-engineer caps for its share of ``clusters``, and their engineers with API tokens;
    returns (tenant slug, token) per engineer, in tenant order."""
    from decimal import Decimal

    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from tenants.models import Membership, Quota, Role, Tenant

    share = math.ceil(clusters / TENANTS)
    engineers = []
    users = get_user_model()
    for i in range(TENANTS):
        tenant = Tenant.objects.create(
            slug=f"{prefix}{i:02d}",
            name=f"{prefix} {i}",
            namespace=f"gw-{prefix}{i:02d}",
            max_dev_clusters_per_user=share,
            max_dev_gpus_per_user=share,
        )
        Quota.objects.create(tenant=tenant, flavor=flavor, gpus=Decimal(share), borrow_limit=0)
        for j in range(ENGINEERS_PER_TENANT):
            user, _ = users.objects.get_or_create(username=f"{prefix}-{i:02d}-{j}")
            Membership.objects.create(tenant=tenant, user=user, role=Role.ENGINEER)
            _, token = AuthToken.objects.create(user=user)
            engineers.append((tenant.slug, token))
    return engineers


def spread(engineers: list[tuple[str, str]], count: int, prefix: str) -> list[Any]:
    """``count`` (engineer, name) jobs, round robin over the tenants and then over each
    tenant's engineers (``engineers`` is in tenant order): every tenant gets its share."""
    return [
        (
            engineers[(i % TENANTS) * ENGINEERS_PER_TENANT + (i // TENANTS) % ENGINEERS_PER_TENANT],
            f"{prefix}-{i}",
        )
        for i in range(count)
    ]


def creator(base: str) -> Any:
    """The client's work for :func:`in_threads`: create a one-worker dev cluster through
    the API (a problem: the answer's status and body)."""

    def create(session: Any, job: Any) -> str:
        (slug, token), name = job
        response = session.post(
            f"{base}/api/v1/tenants/{slug}/clusters/",
            json={"flavor": "h100", "kind": "dev", "workers": 1, "name": name},
            headers={"Authorization": f"Token {token}"},
        )
        return "" if response.status_code == 201 else f"{response.status_code} {response.text}"

    return create


def in_threads(jobs: list[Any], work: Any) -> Stage:
    """Run ``work(session, job)`` for every job on CLIENTS threads; time the whole.

    Each thread has a light keep-alive session (:class:`~benchmarks.http_session.HttpSession`): the
    clients share the machine with every process they measure."""
    stage = Stage()
    lock = threading.Lock()
    pending = list(reversed(jobs))

    def client() -> None:
        session = HttpSession()
        while True:
            with lock:
                if not pending:
                    return
                job = pending.pop()
            started = time.perf_counter()
            problem = work(session, job)
            elapsed = time.perf_counter() - started
            with lock:
                stage.latencies.append(elapsed)
                if problem:
                    stage.failures.append(problem)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stage.seconds = time.perf_counter() - started
    return stage


def _wait_until(predicate: Any, what: str) -> float:
    """Seconds until ``predicate()`` holds (polled every 0.1 s)."""
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > DEADLINE_SECONDS:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.1)
    return time.perf_counter() - started


def _count(state: str) -> int:
    from clusters.models import ClusterRequest

    return ClusterRequest.objects.filter(state=state).count()


def _queue_empty(broker: Any) -> bool:
    from clusters.models import PendingPass

    return broker.llen(QUEUE) == 0 and not PendingPass.objects.exclude(requested_at=None).exists()


def _jobs_done() -> int:
    """Jobs that succeeded and gave their GPUs back (their pods are gone)."""
    from clusters.models import ClusterRequest

    return (
        ClusterRequest.objects.unscoped()
        .filter(workload="job", state="succeeded", holds_gpus=False, gpus_released_at__isnull=False)
        .count()
    )


def _cpu(sessions: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each part of the product, of PostgreSQL and Redis, and of
    this process (the client threads and the polling, ``clients``: not the product's, but
    on the same two cores)."""
    return {
        **support.session_cpu_seconds(sessions),
        "postgres": support.server_cpu_seconds("postgres"),
        "redis": support.server_cpu_seconds("redis-server"),
        "clients": time.process_time(),
    }


def _cpu_since(sessions: dict[str, int], before: dict[str, float]) -> dict[str, float]:
    now = _cpu(sessions)
    return {name: now[name] - before[name] for name in before}


def kube_requests(sim_url: str, reset: bool = False) -> int:
    """Kubernetes requests the kubesim at ``sim_url`` served since the last reset (with
    ``reset``: reset its count, 0)."""
    import requests

    if reset:
        requests.delete(f"{sim_url}/_kubesim/stats", timeout=10)
        return 0
    stats = requests.get(f"{sim_url}/_kubesim/stats", timeout=10).json()
    return int(stats["requests"].get("total", 0))


def _through_gangway(
    base: str, engineers: list[tuple[str, str]], sim_url: str, sessions: dict[str, int]
) -> dict[str, Any]:
    import redis

    broker = redis.Redis.from_url(support.redis_url(BROKER_DB))
    jobs = spread(engineers, CLUSTERS, "bench")
    create = creator(base)

    def delete(session: Any, job: Any) -> str:
        (slug, token), name = job
        response = session.delete(
            f"{base}/api/v1/tenants/{slug}/clusters/{name}/",
            headers={"Authorization": f"Token {token}"},
        )
        return "" if response.status_code in (200, 202, 204) else f"{response.status_code}"

    def submit(session: Any, job: Any) -> str:
        (slug, token), name = job
        response = session.post(
            f"{base}/api/v1/tenants/{slug}/jobs/",
            json={
                "flavor": "h100",
                "kind": "dev",
                "workers": 1,
                "name": f"job-{name}",
                "entrypoint": "python train.py",
            },
            headers={"Authorization": f"Token {token}"},
        )
        return "" if response.status_code == 201 else f"{response.status_code} {response.text}"

    kube_requests(sim_url, reset=True)
    cpu = _cpu(sessions)
    started = time.perf_counter()
    created = in_threads(jobs, create)
    ready = _wait_until(lambda: _count("ready") >= CLUSTERS, "every cluster ready")
    ready += created.seconds
    drained = _wait_until(lambda: _queue_empty(broker), "an empty Celery queue")
    drained = time.perf_counter() - started
    create_calls = kube_requests(sim_url)
    create_cpu = _cpu_since(sessions, cpu)

    kube_requests(sim_url, reset=True)
    cpu = _cpu(sessions)
    deleted = in_threads(jobs, delete)
    gone = deleted.seconds + _wait_until(
        lambda: _count("deleted") >= CLUSTERS, "every cluster deleted"
    )
    delete_calls = kube_requests(sim_url)
    delete_cpu = _cpu_since(sessions, cpu)

    # The deleted clusters' GPUs are free again: every tenant's quota fits its share of jobs.
    kube_requests(sim_url, reset=True)
    cpu = _cpu(sessions)
    submitted = in_threads(jobs, submit)
    finished = submitted.seconds + _wait_until(
        lambda: _jobs_done() >= CLUSTERS, "every job succeeded with its GPUs back"
    )
    job_calls = kube_requests(sim_url)
    job_cpu = _cpu_since(sessions, cpu)
    return {
        "submitted": submitted,
        "finished": finished,
        "job_calls": job_calls,
        "create_cpu": create_cpu,
        "delete_cpu": delete_cpu,
        "job_cpu": job_cpu,
        "created": created,
        "ready": ready,
        "drained": drained,
        "create_calls": create_calls,
        "deleted": deleted,
        "gone": gone,
        "delete_calls": delete_calls,
    }


def _straight_to_kubesim(sim_url: str, kubeconfig: str) -> dict[str, Any]:
    """The anchor: the same RayClusters applied with no control plane, same threads."""
    import requests

    from clusters.kube.manifests import cluster_manifests
    from clusters.models import ClusterRequest
    from clusters.requests.services import build_request
    from clusters.rows.spec import ClusterSpec
    from tenants.models import GpuFlavor, Tenant

    flavor = GpuFlavor.objects.get(name="h100")
    tenants = list(Tenant.objects.all())
    owner = tenants[0].memberships.first().user
    manifests = []
    for i in range(CLUSTERS):
        row: ClusterRequest = build_request(
            tenant=tenants[i % len(tenants)],
            owner=owner,
            spec=ClusterSpec(flavor=flavor, kind="dev", workers=1, name=f"anchor-{i}"),
        )
        (rc,) = [o for o in cluster_manifests(row) if o["kind"] == "RayCluster"]
        manifests.append(rc)

    session = requests.Session()
    for tenant in tenants:  # the namespaces exist before anything is applied, as in gangway
        session.post(
            f"{sim_url}/api/v1/namespaces",
            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": tenant.namespace}},
            timeout=60,
        )

    def apply(session: Any, rc: Any) -> str:
        meta = rc["metadata"]
        response = session.post(
            f"{sim_url}/apis/ray.io/v1/namespaces/{meta['namespace']}/rayclusters",
            json=rc,
        )
        return "" if response.status_code == 201 else f"{response.status_code} {response.text}"

    def all_ready() -> bool:
        items = requests.get(f"{sim_url}/apis/ray.io/v1/rayclusters", timeout=60).json()["items"]
        ready = [rc for rc in items if (rc.get("status") or {}).get("state") == "ready"]
        return len(ready) >= CLUSTERS

    applied = in_threads(manifests, apply)
    ready = applied.seconds + _wait_until(all_ready, "every anchor RayCluster ready")
    return {"applied": applied, "ready": ready}


def _start_product(
    workdir: Path, kubeconfig: str, port: int, worker: tuple[str, int]
) -> support.Processes:
    env = support.production_env(
        DATABASE_URL=os.environ["DATABASE_URL"],
        CACHE_URL=support.redis_url(BROKER_DB),
        CELERY_BROKER_URL=support.redis_url(BROKER_DB),
        CELERY_QUEUE=QUEUE,
        KUBECONFIG=kubeconfig,
        GANGWAY_VAR_DIR=str(workdir),
        # One client address drives 100 engineers here; the per-address write throttle
        # (600/min by default) is not what this benchmark measures.
        THROTTLE_WRITE="1000000/min",
    )
    procs = support.Processes(workdir)
    procs.start("gunicorn", support.gunicorn_command(port, workers=GUNICORN_WORKERS), env)
    celery = [sys.executable, "-m", "celery", "-A", "controlplane"]
    procs.start(
        "worker",
        [
            *celery,
            "worker",
            f"--pool={worker[0]}",
            f"--concurrency={worker[1]}",
            f"--queues={QUEUE}",
            f"--loglevel={os.environ.get('BENCH_WORKER_LOGLEVEL', 'WARNING')}",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        env,
    )
    procs.start(
        "beat",
        [*celery, "beat", "--loglevel=WARNING", f"--schedule={workdir / 'beat-schedule'}"],
        env,
    )
    return procs


def _sessions(procs: support.Processes, sim: support.KubeSimProcess) -> dict[str, int]:
    """The session of each part of the product (each leads its own: start_new_session)."""
    names = ["gunicorn", "worker", "beat"]
    sessions = {name: proc.pid for name, proc in zip(names, procs.procs, strict=True)}
    sessions["kubesim"] = sim.proc.pid
    return sessions


def measure(worker: tuple[str, int] = WORKER, anchor: bool = True) -> dict[str, Any]:
    """Run the product with the worker as ``worker`` (pool, concurrency), then (if
    ``anchor``) the anchor; returns the raw figures."""
    import redis

    support.setup_django("bench_e2e")
    from tenants.models import GpuFlavor

    redis.Redis.from_url(support.redis_url(BROKER_DB)).flushdb()
    h100_nodes = math.ceil(CLUSTERS / 8) + 2
    fleet = support.gpu_fleet(h100_nodes=h100_nodes, cpu_nodes=math.ceil(CLUSTERS / 50) + 1)
    fleet["rayjobs"] = {"runSeconds": JOB_RUN_SECONDS, "pendingSeconds": 0}
    engineers = _fill(h100_nodes)
    workdir = Path(tempfile.mkdtemp(prefix="gangway-e2e-"))
    port = support.free_port()
    base = f"http://127.0.0.1:{port}"
    with support.kubesim_process(fleet) as sim:
        procs = _start_product(workdir, sim.kubeconfig, port, worker)
        try:
            support.wait_http(f"{base}/healthz")
            # The first reconcile pass records the free capacity admission relies on.
            _wait_until(
                lambda: GpuFlavor.objects.filter(observed_free_gpus__isnull=False).exists(),
                "the first reconcile pass",
            )
            product = _through_gangway(base, engineers, sim.url, _sessions(procs, sim))
        finally:
            procs.stop()
    if not anchor:
        return {"product": product, "anchor": None, "logs": str(workdir)}
    with support.kubesim_process(fleet) as sim:
        straight = _straight_to_kubesim(sim.url, sim.kubeconfig)
    return {"product": product, "anchor": straight, "logs": str(workdir)}


def _rate(figures: dict[str, Any]) -> float:
    return CLUSTERS / float(figures["product"]["ready"])


def _sweep_lines(chosen: dict[str, Any], swept: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    """The worker's pool and concurrency: the median run as :data:`WORKER` beside one run
    each way of :data:`SWEEP` (none: no lines)."""
    if not swept:
        return []
    rows = [
        "| worker pool, concurrency | creates | create to ready | last create -> all ready "
        "| until all deleted | jobs | worker CPU per cluster | CPU per cluster (all) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for worker, figures in sorted({**swept, WORKER: chosen}.items()):
        p = figures["product"]
        created = p["created"].seconds
        mark = " (deploy/, the tables above)" if worker == WORKER else ""
        rows.append(
            f"| {worker[0]}, {worker[1]}{mark} | {CLUSTERS / created:,.0f}/s "
            f"| {CLUSTERS / p['ready']:,.0f} clusters/s | {p['ready'] - created:.1f} s "
            f"| {CLUSTERS / p['gone']:,.0f}/s | {CLUSTERS / p['finished']:,.0f} jobs/s "
            f"| {p['create_cpu']['worker'] / CLUSTERS * 1000:.1f} ms "
            f"| {sum(p['create_cpu'][part] for part in PARTS) / CLUSTERS * 1000:.0f} ms |"
        )
    return [
        "",
        "The worker's pool and concurrency (prefork: that many processes, each with its "
        "own informers, fold memo and connections; threads: that many threads in one "
        "process, which share them): the run above beside one run of the product each "
        "other way (`BENCH_E2E_SWEEP`), each from empty tables. "
        "CPU per cluster is the create-to-ready stage's.",
        "",
        *rows,
    ]


def run() -> str:
    """The end-to-end figures as a markdown section: :data:`RUNS` whole runs, the tables
    from the median one (by clusters per second until all are ready)."""
    runs = sorted((measure() for _ in range(RUNS)), key=_rate)
    figures = runs[len(runs) // 2]
    swept = {w: measure(w, anchor=False) for w in SWEEP if w != WORKER}
    p, a = figures["product"], figures["anchor"]
    created, deleted = p["created"], p["deleted"]
    lat = created.latencies
    rows = [
        "| stage | through gangway | straight to kubesim |",
        "|---|---:|---:|",
        f"| {CLUSTERS:,} creates, {CLIENTS} clients | {created.seconds:.1f} s "
        f"({CLUSTERS / created.seconds:,.0f}/s; p50 {statistics.median(lat) * 1000:,.0f} ms, "
        f"p99 {support.percentile(lat, 99) * 1000:,.0f} ms) | {a['applied'].seconds:.1f} s "
        f"({CLUSTERS / a['applied'].seconds:,.0f}/s) |",
        f"| until all are ready | {p['ready']:.1f} s (**{CLUSTERS / p['ready']:,.0f} clusters/s**)"
        f" | {a['ready']:.1f} s ({CLUSTERS / a['ready']:,.0f}/s) |",
        f"| until the Celery queue is empty | {p['drained']:.1f} s | - |",
        f"| Kubernetes requests per cluster (create to ready) | "
        f"{p['create_calls'] / CLUSTERS:.1f} | 1 (+ polling) |",
        f"| {CLUSTERS:,} deletes, {CLIENTS} clients | {deleted.seconds:.1f} s "
        f"({CLUSTERS / deleted.seconds:,.0f}/s; p50 "
        f"{statistics.median(deleted.latencies) * 1000:,.0f} ms, p99 "
        f"{support.percentile(deleted.latencies, 99) * 1000:,.0f} ms) | - |",
        f"| until all are deleted | {p['gone']:.1f} s ({CLUSTERS / p['gone']:,.0f}/s) | - |",
        f"| Kubernetes requests per cluster (delete) | {p['delete_calls'] / CLUSTERS:.1f} | - |",
    ]
    submitted = p["submitted"]
    job_rows = [
        "| stage | through gangway |",
        "|---|---:|",
        f"| {CLUSTERS:,} job submissions, {CLIENTS} clients | {submitted.seconds:.1f} s "
        f"({CLUSTERS / submitted.seconds:,.0f}/s; p50 "
        f"{statistics.median(submitted.latencies) * 1000:,.0f} ms, p99 "
        f"{support.percentile(submitted.latencies, 99) * 1000:,.0f} ms) |",
        f"| until all have succeeded and given their GPUs back | {p['finished']:.1f} s "
        f"(**{CLUSTERS / p['finished']:,.0f} jobs/s**) |",
        f"| Kubernetes requests per job | {p['job_calls'] / CLUSTERS:.1f} |",
    ]
    stages = [("create to ready", "create_cpu"), ("delete", "delete_cpu"), ("jobs", "job_cpu")]
    cpu_rows = [
        "| stage | " + " | ".join(PARTS) + " | per cluster (all of these) | clients |",
        "|---|" + "---:|" * (len(PARTS) + 2),
        *(
            f"| {label} | "
            + " | ".join(f"{p[key][part]:.1f} s" for part in PARTS)
            + f" | {sum(p[key][part] for part in PARTS) / CLUSTERS * 1000:,.0f} ms"
            + f" | {p[key]['clients']:.1f} s |"
            for label, key in stages
        ),
    ]
    failures = created.failures + deleted.failures + submitted.failures + a["applied"].failures
    for r in swept.values():
        q = r["product"]
        failures += q["created"].failures + q["deleted"].failures + q["submitted"].failures
    return "\n".join(
        [
            f"## End to end: {CLUSTERS:,} dev clusters through the API",
            "",
            f"gunicorn ({GUNICORN_WORKERS} sync WSGI workers; the production image runs "
            "uvicorn's ASGI workers), a Celery "
            f"worker ({WORKER[0]} pool, concurrency "
            f"{WORKER[1]}) and Celery beat on Redis, PostgreSQL, and kubesim (its own "
            "process, no start-up delay) as the Kubernetes API server, all on this machine. "
            f"{CLIENTS} client threads create {CLUSTERS:,} dev clusters (one single-GPU worker "
            f"each) for 100 engineers in {TENANTS} tenants, every tenant with quota for its "
            "share. *Ready*: every row `ready` (head and worker pods running and ready, "
            "folded in by the reconciler). The anchor applies the same RayClusters straight "
            "to kubesim with the same threads and polls until KubeRay's emulation reports them "
            "all ready.",
            "",
            *rows,
            "",
            f"Then {CLUSTERS:,} jobs through the jobs API (`POST .../jobs/`, one single-GPU "
            f"worker each, the same engineers), each a RayJob whose simulated driver runs "
            f"{JOB_RUN_SECONDS} s; *done*: every job `succeeded` with its GPUs given back "
            "(its pods gone, `gpus_released_at` set).",
            "",
            *job_rows,
            "",
            "CPU time per stage (user + system, each process with its children, from "
            "`/proc`; *postgres* and *redis* are every PostgreSQL and Redis process of "
            "the machine; *clients* is the benchmark's own process, its 8 client threads "
            "and its polling, on the same cores but not counted per cluster), the figure to "
            "read on a shared machine:",
            "",
            *cpu_rows,
            "",
            "Runs, clusters/s until all are ready (create to ready): "
            + ", ".join(f"{_rate(r):,.0f}" for r in runs)
            + " (the tables show the median run; creates: "
            + ", ".join(f"{CLUSTERS / r['product']['created'].seconds:,.0f}/s" for r in runs)
            + "; then until all were ready: "
            + ", ".join(
                f"{r['product']['ready'] - r['product']['created'].seconds:.1f} s" for r in runs
            )
            + "; anchor: "
            + ", ".join(f"{CLUSTERS / r['anchor']['ready']:,.0f}/s" for r in runs)
            + "). Each run starts from empty tables and a fresh broker, product then anchor.",
            *_sweep_lines(figures, swept),
            "",
            f"Failed requests: {len(failures)}"
            + (f" (first: {failures[0][:200]})" if failures else "")
            + f". {support.load_line()}",
        ]
    )
