"""A fleet of kubesim members: thousands of dev clusters spread across 3 and 10 of them.

Each run starts one kubesim process per member (the first the settings' member, the others
registered by address), each with the same share of 8 x H100 nodes, and gangway as
end_to_end runs it (gunicorn, a Celery worker and beat). Client threads create the clusters
through the API; admission places them in the admin's order, filling each member and
spilling to the next, and the engine's passes (one per member, side by side) make them
ready. Then, with the product stopped, each member's reconcile pass is timed in this
process. ``python -m benchmarks.fleet --members 3,10 --clusters 1000,5000`` runs any sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks import support
from benchmarks.end_to_end import creator, fill_engineers, in_threads, kube_requests, spread
from benchmarks.fleet_passes import time_passes

MEMBERS = (3, 10)
CLUSTERS = (1_000, 5_000)
GUNICORN_WORKERS = 3
WORKER = ("threads", 2)  # the worker as deploy/ runs it


def _register(sims: list[support.KubeSimProcess], h100: Any, nodes: int) -> None:
    """The members, in placement order (the first bootstraps from settings), each listing
    ``nodes`` H100 nodes (the flavor's count is the fleet's)."""
    from clusters.models import FlavorStock, KubeCluster

    KubeCluster.objects.all().delete()
    for order, sim in enumerate(sims):
        home = order == 0
        member = KubeCluster.objects.create(
            name=f"member-{order}",
            from_settings=home,
            server="" if home else sim.url,
            placement_order=order,
        )
        FlavorStock.objects.create(kube_cluster=member, flavor=h100, node_count=nodes)


def _kube_requests(sims: list[support.KubeSimProcess], reset: bool = False) -> int:
    """Kubernetes API requests every member's kubesim served (since the last reset)."""
    return sum(kube_requests(sim.url, reset) for sim in sims)


def _wait_until(predicate: Any, what: str, deadline: float) -> float:
    """Seconds until ``predicate()`` holds (polled every 0.2 s), at most ``deadline``."""
    started = time.perf_counter()
    while not predicate():
        if time.perf_counter() - started > deadline:
            raise RuntimeError(f"gave up waiting for {what} after {deadline:.0f} s")
        time.sleep(0.2)
    return time.perf_counter() - started


def _start_product(workdir: Path, kubeconfig: str, port: int, queue: str) -> support.Processes:
    env = support.production_env(
        DATABASE_URL=os.environ["DATABASE_URL"],
        CACHE_URL=os.environ["BENCH_FLEET_REDIS"],
        CELERY_BROKER_URL=os.environ["BENCH_FLEET_REDIS"],
        CELERY_QUEUE=queue,
        KUBECONFIG=kubeconfig,
        GANGWAY_VAR_DIR=str(workdir),
        THROTTLE_WRITE="1000000/min",  # one client address drives every engineer here
    )
    procs = support.Processes(workdir)
    procs.start("gunicorn", support.gunicorn_command(port, workers=GUNICORN_WORKERS), env)
    celery = [sys.executable, "-m", "celery", "-A", "controlplane"]
    worker = [*celery, "worker", f"--pool={WORKER[0]}", f"--concurrency={WORKER[1]}"]
    worker += [f"--queues={queue}", "--loglevel=WARNING", "--without-heartbeat"]
    procs.start("worker", [*worker, "--without-gossip", "--without-mingle"], env)
    beat = [*celery, "beat", "--loglevel=WARNING", f"--schedule={workdir / 'beat-schedule'}"]
    procs.start("beat", beat, env)
    return procs


def _say(what: str) -> None:
    """Progress, on stderr: a large run takes minutes."""
    print(f"fleet {time.strftime('%H:%M:%S')}: {what}", file=sys.stderr, flush=True)


def _placed() -> dict[str, int]:
    """Rows per member."""
    from django.db.models import Count

    from clusters.models import ClusterRequest

    rows = (
        ClusterRequest.objects.unscoped()
        .values("kube_cluster__name")
        .annotate(n=Count("id"))
        .values_list("kube_cluster__name", "n")
    )
    return {str(name): n for name, n in rows}


def _ready() -> int:
    from clusters.models import ClusterRequest

    return ClusterRequest.objects.unscoped().filter(state="ready").count()


def measure(members: int, clusters: int, deadline: float) -> dict[str, Any]:
    """One run: ``clusters`` dev clusters over ``members`` kubesims; the raw figures."""
    from clusters.models import FlavorStock

    support.truncate_product_tables()
    nodes = math.ceil(clusters / members / 8)  # the members' shares; the last may be short
    fleet = {"h100_nodes": nodes, "cpu_nodes": math.ceil(clusters / members / 50) + 1}
    h100 = support.h100_flavor(nodes * members)
    jobs = spread(fill_engineers(clusters, h100, "fleet"), clusters, "fleet")
    workdir = Path(tempfile.mkdtemp(prefix="gangway-fleet-"))
    port = support.free_port()
    base = f"http://127.0.0.1:{port}"

    with ExitStack() as stack:
        sims = [
            stack.enter_context(support.kubesim_process(support.gpu_fleet(**fleet, name=f"m{i}")))
            for i in range(members)
        ]
        _register(sims, h100, nodes)
        queue = f"bench-fleet-{uuid.uuid4().hex[:8]}"
        procs = _start_product(workdir, sims[0].kubeconfig, port, queue)
        try:
            # Three workers import Django at once; a busy shared machine takes its time.
            support.wait_http(f"{base}/healthz", timeout=300)
            # Placement reads what each member's first pass saw free.
            _wait_until(
                lambda: FlavorStock.objects.filter(observed_at__isnull=False).count() == members,
                "a first pass over every member",
                deadline,
            )
            _say(f"{members} members up; creating {clusters} clusters")
            _kube_requests(sims, reset=True)
            started = time.perf_counter()
            created = in_threads(jobs, creator(base))
            made = clusters - len(created.failures)  # each failure is in the report
            _wait_until(lambda: _ready() >= made, f"{made} clusters ready", deadline)
            ready = time.perf_counter() - started
            calls = _kube_requests(sims)
            _say(f"{clusters} ready in {ready:.1f} s; timing the passes")
        finally:
            procs.stop()
        from django.conf import settings

        settings.KUBECONFIG = sims[0].kubeconfig
        passes = time_passes()
    return {
        "members": members,
        "clusters": clusters,
        "nodes_per_member": nodes,
        "created_seconds": created.seconds,
        "failures": created.failures,
        "ready_seconds": ready,
        "ready": _ready(),
        "kube_requests": calls,
        "placed": _placed(),
        "passes": passes,
        "logs": str(workdir),
        "load": os.getloadavg()[:2],  # this machine's, as the run ended: it is shared
    }


def _runs(members: list[int], clusters: list[int], per_member: int) -> list[tuple[int, int]]:
    """Every size asked for, smallest first, and the fewest and most members at
    ``per_member`` clusters each (the check that a member's pass does not grow with the
    fleet)."""
    runs = [(m, c) for m in members for c in clusters]
    if len(set(members)) > 1 and per_member:
        for m in (min(members), max(members)):
            if not any(c // m == per_member for n, c in runs if n == m):
                runs.append((m, m * per_member))
    return sorted(set(runs), key=lambda run: (run[1], run[0]))  # the smallest first


def run(argv: list[str] | None = None) -> str:
    """The fleet figures as a markdown section (``argv``: the flags of :func:`options`)."""
    from benchmarks.fleet_report import section

    args = options(argv or [])
    if args.from_json:
        return section(json.loads(Path(args.from_json).read_text()), args.per_member)
    # A SIGTERM (a run stopped by hand) unwinds, so that every kubesim and worker stops too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    support.setup_django(args.suffix)
    import redis

    os.environ["BENCH_FLEET_REDIS"] = support.redis_url(args.redis_db)
    redis.Redis.from_url(os.environ["BENCH_FLEET_REDIS"]).ping()
    runs = _runs(args.members, args.clusters, args.per_member)
    if not runs:
        raise SystemExit("nothing to run: give --clusters, or --per-member with two --members")
    results = []
    for members, clusters in runs:
        try:
            results.append(measure(members, clusters, args.deadline))
        except RuntimeError as exc:  # a size this machine does not finish: said, not hidden
            _say(f"{members} members, {clusters} clusters: {exc}")
            results.append(
                {"members": members, "clusters": clusters, "error": str(exc), "ready": _ready()}
            )
        if args.json:  # after every run: a long run stopped part way keeps what it measured
            Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return section(results, args.per_member)


def options(argv: list[str]) -> argparse.Namespace:
    """The flags: sizes, the database and Redis to use, where to write the raw figures."""

    def sizes(text: str) -> list[int]:
        return [int(part) for part in text.split(",") if part.strip()]

    parser = argparse.ArgumentParser(prog="python -m benchmarks fleet")
    parser.add_argument("--members", type=sizes, default=list(MEMBERS))
    parser.add_argument("--clusters", type=sizes, default=list(CLUSTERS), help="in all")
    parser.add_argument(
        "--per-member",
        type=int,
        default=None,
        help="clusters per member in the pass check (default: the first size over the "
        "fewest members; 0: no check)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke test: 2 and 3 members, 8 clusters each"
    )
    parser.add_argument("--deadline", type=float, default=900.0, help="seconds per wait")
    parser.add_argument("--suffix", default="bench_fleet", help="of the benchmark's database")
    parser.add_argument(
        "--redis-db", type=int, default=int(os.environ.get("REDIS_URL", "/0").rsplit("/", 1)[1])
    )
    parser.add_argument("--json", help="also write the raw figures there, after each run")
    parser.add_argument("--from-json", help="only write the section of figures saved by --json")
    args = parser.parse_args(argv)
    if args.quick:
        args.members, args.clusters = [2, 3], []
        args.per_member = 8 if args.per_member is None else args.per_member
    if args.per_member is None:
        args.per_member = args.clusters[0] // min(args.members) if args.clusters else 0
    return args


if __name__ == "__main__":
    print(run(sys.argv[1:]))
