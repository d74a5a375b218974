"""Load: mixed reads and writes at a fixed rate against the whole product, then the same
while the Celery worker is SIGKILLed every 30 s.

The product runs as in production, each part in its own process (gunicorn, a Celery worker
and beat on Redis, PostgreSQL, kubesim). The generator is open-loop: latency is measured from
when a request was due, so a slow server cannot slow the generator down and hide its own
queueing (coordinated omission). After each phase every cluster still wanted must reach
``ready`` and every deleted one ``deleted``: what a killed worker lost shows as a row that
never converges.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks import support

RATE = float(os.environ.get("RELIABILITY_LOAD_RATE", "100"))
SECONDS = float(os.environ.get("RELIABILITY_LOAD_SECONDS", "300"))
KILL_EVERY = 30.0
TENANTS = 4
ENGINEERS_PER_TENANT = 3
CLIENT_THREADS = 48
# A queue of this run's own: a run never takes another's messages (nor needs to empty
# the broker first, which would take theirs).
QUEUE = f"reliability-load-{os.getpid()}"
# The database beside DATABASE_URL's: tests/reliability/test_load.py uses another, so a
# test run beside a full one truncates neither's rows.
DATABASE_SUFFIX = os.environ.get("RELIABILITY_LOAD_DATABASE", "reliability_load")
CONVERGE_SECONDS = 300.0
BACKLOG_SECONDS = 30.0
# Targets of the issue, on a 2-core machine.
READ_P99_MS = 250.0
WRITE_P99_MS = 500.0
# Writes in every ten requests. A control plane's traffic is mostly reads (dashboards and
# scripts poll lists and details; people ask for a cluster now and then): one write in ten
# is 10 writes a second at 100 requests/s, 36,000 an hour, far above what the teams of a
# real platform send. RELIABILITY_LOAD_WRITES_IN_TEN (up to 5) sends a heavier mix.
WRITES_IN_TEN = int(os.environ.get("RELIABILITY_LOAD_WRITES_IN_TEN", "1"))
if not 1 <= WRITES_IN_TEN <= 5:
    raise SystemExit("RELIABILITY_LOAD_WRITES_IN_TEN must be from 1 to 5")
# What each read slot asks for, in the order of the slots (``detail`` of the engineer's
# newest cluster, or the queue when they have none).
READ_SLOTS = ("list", "list", "list", "detail", "queue", "usage", "usage", "list", "detail")


@dataclass
class Phase:
    """What the clients saw in one phase: latencies by endpoint, statuses, failures."""

    name: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    failures: list[str] = field(default_factory=list)
    kills: int = 0
    seconds: float = 0.0
    late_starts: int = 0
    converge_seconds: float = 0.0
    unconverged: list[str] = field(default_factory=list)
    load: str = ""

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 500)

    @property
    def requests(self) -> int:
        return sum(self.statuses.values()) + len(
            [f for f in self.failures if f.startswith("no answer")]
        )

    def p99(self, kind: str) -> float:
        values = [v for label, vs in self.latencies.items() if label.startswith(kind) for v in vs]
        return support.percentile(values, 99) * 1000 if values else 0.0


def _fill(h100_nodes: int) -> list[tuple[str, str, str]]:
    """Tenants with room for every cluster the run can hold; (tenant, user, token) each."""
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from tenants.models import Membership, Quota, Role, Tenant

    support.truncate_product_tables()
    h100 = support.h100_flavor(h100_nodes)
    gpus = h100_nodes * 8 // TENANTS
    engineers = []
    for i in range(TENANTS):
        tenant = Tenant.objects.create(
            slug=f"load{i}",
            name=f"Load {i}",
            namespace=f"gw-load{i}",
            max_dev_clusters_per_user=1000,
            max_dev_gpus_per_user=1000,
        )
        Quota.objects.create(tenant=tenant, flavor=h100, gpus=Decimal(gpus), borrow_limit=0)
        for j in range(ENGINEERS_PER_TENANT):
            user, _ = get_user_model().objects.get_or_create(username=f"load-{i}-{j}")
            Membership.objects.create(tenant=tenant, user=user, role=Role.ENGINEER)
            _, token = AuthToken.objects.create(user=user)
            engineers.append((tenant.slug, user.username, token))
    return engineers


def _env(workdir: Path, kubeconfig: str) -> dict[str, str]:
    return support.production_env(
        DATABASE_URL=os.environ["DATABASE_URL"],
        CACHE_URL=support.redis_url(_broker_db()),
        CELERY_BROKER_URL=support.redis_url(_broker_db()),
        CELERY_QUEUE=QUEUE,
        KUBECONFIG=kubeconfig,
        GANGWAY_VAR_DIR=str(workdir),
        # One client address drives every engineer here; the per-address write limit is
        # not what this suite measures.
        THROTTLE_WRITE="1000000/min",
    )


def _broker_db() -> int:
    """The Redis database number of ``REDIS_URL`` (each engineer's checkout has its own)."""
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    tail = url.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _gunicorn(port: int) -> list[str]:
    """The production image's gunicorn command (``deploy/Dockerfile``) on loopback, with
    sync WSGI workers (the load has no WebSockets)."""
    command = support.gunicorn_command(port, workers=3)
    return [*command, "--worker-tmp-dir=/tmp"]


def _worker_command() -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "controlplane",
        "worker",
        "--pool=prefork",
        "--concurrency=2",
        f"--queues={QUEUE}",
        "--loglevel=WARNING",
        "--without-heartbeat",
        "--without-gossip",
        "--without-mingle",
    ]


class Stack:
    """gunicorn, a Celery worker and beat in their own processes; the worker replaceable."""

    def __init__(self, workdir: Path, kubeconfig: str, port: int) -> None:
        self.env = _env(workdir, kubeconfig)
        self.procs = support.Processes(workdir)
        self.procs.start("gunicorn", _gunicorn(port), self.env)
        self.worker = self.procs.start("worker", _worker_command(), self.env)
        celery = [sys.executable, "-m", "celery", "-A", "controlplane"]
        self.procs.start(
            "beat",
            [*celery, "beat", "--loglevel=WARNING", f"--schedule={workdir / 'beat-schedule'}"],
            self.env,
        )

    def kill_worker(self) -> None:
        """SIGKILL the worker and its pool children mid-work, and start a new one at once
        (as the Deployment's restart would)."""
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait()
        self.worker = self.procs.start("worker", _worker_command(), self.env)

    def stop(self) -> None:
        self.procs.stop()


class Traffic:
    """The mixed requests, with the clusters each engineer has asked for and not deleted."""

    def __init__(self, base: str, engineers: list[tuple[str, str, str]]) -> None:
        import requests

        self.base = base
        self.engineers = engineers
        self.local = threading.local()
        self.lock = threading.Lock()
        self.live: dict[int, list[str]] = defaultdict(list)
        self.deleted: set[tuple[str, str]] = set()
        self.made: set[tuple[str, str]] = set()
        self.counter = 0
        self._requests = requests

    def session(self) -> Any:
        if not hasattr(self.local, "session"):
            self.local.session = self._requests.Session()
        return self.local.session

    def pick(self, n: int) -> tuple[str, Callable[[Any], Any]]:
        """The ``n``-th request: its endpoint label and a call that makes it with the
        client thread's own session (a session is not shared between threads)."""
        # Each engineer takes ten requests in a row, so every one of them sees every kind
        # (with ``n % engineers`` and ``n % 10`` both even or both odd, half of them
        # would only ever create and the other half only delete).
        who = (n // 10) % len(self.engineers)
        slug, _, token = self.engineers[who]
        auth = {"Authorization": f"Token {token}"}
        clusters = f"{self.base}/api/v1/tenants/{slug}/clusters/"
        slot = n % 10
        with self.lock:
            mine = list(self.live[who])
        if slot < 10 - WRITES_IN_TEN:
            return self._read(READ_SLOTS[slot], slug, auth, mine)
        # About as many deletes as creates (the first write slot deletes when the engineer
        # has a cluster, the last one when they have more than two), so the number of live
        # clusters stays bounded however long the run.
        first, last = slot == 10 - WRITES_IN_TEN, slot == 9
        if (first and len(mine) > (1 if WRITES_IN_TEN == 1 else 0)) or (
            last and not first and len(mine) > 2
        ):
            with self.lock:
                name = self.live[who].pop(0) if self.live[who] else None
            if name is None:
                # Deleted by an earlier slot since ``mine`` was read: the next request instead
                # (outside the lock, which ``pick`` takes again).
                return self.pick(n + 1)
            one = f"{clusters}{name}/"

            def delete(session: Any) -> Any:
                # Expected gone only once the request is sent: one the generator drops
                # (too late to send) leaves the cluster wanted, as it is.
                with self.lock:
                    self.deleted.add((slug, name))
                return session.delete(one, headers=auth, timeout=30)

            return "write DELETE clusters/{name}/", delete
        with self.lock:
            self.counter += 1
            name = f"load-{self.counter}"
        body = {"kind": "dev", "flavor": "h100", "workers": 1, "name": name}

        def create(session: Any) -> Any:
            response = session.post(clusters, json=body, headers=auth, timeout=30)
            if response.status_code == 201:
                with self.lock:
                    self.live[who].append(name)
                    self.made.add((slug, name))
            return response

        return "write POST clusters/", create

    def _read(
        self, kind: str, slug: str, auth: dict[str, str], mine: list[str]
    ) -> tuple[str, Callable[[Any], Any]]:
        """A read of ``kind`` (one of :data:`READ_SLOTS`) as the engineer of ``auth``."""
        tenant = f"{self.base}/api/v1/tenants/{slug}"
        if kind == "detail" and mine:
            one = f"{tenant}/clusters/{mine[-1]}/"
            return "read GET clusters/{name}/", lambda session: session.get(
                one, headers=auth, timeout=30
            )
        if kind in ("detail", "queue"):
            url = f"{tenant}/queue/"
            return "read GET queue/", lambda session: session.get(url, headers=auth, timeout=30)
        if kind == "usage":
            url = f"{tenant}/usage/"
            return "read GET usage/", lambda session: session.get(url, headers=auth, timeout=30)
        url = f"{tenant}/clusters/"
        return "read GET clusters/", lambda session: session.get(url, headers=auth, timeout=30)


def _drive(
    traffic: Traffic, phase: Phase, seconds: float, on_tick: Callable[[float], None]
) -> None:
    """Open loop: request ``n`` is due at ``start + n / RATE`` whatever came before it,
    handed to a pool of client threads. Nine in ten are reads (the tenant's cluster list,
    one cluster, the queue, the usage report), one a write (:data:`WRITES_IN_TEN`)."""
    lock = threading.Lock()

    def one(label: str, call: Callable[[Any], Any], due: float) -> None:
        if time.perf_counter() - due > BACKLOG_SECONDS:
            # The server (or this machine) cannot keep up and the backlog would take
            # longer to drain than the run lasts: counted as a failure, not sent.
            with lock:
                phase.failures.append(f"no answer: {label}: not sent, {BACKLOG_SECONDS:.0f} s late")
            return
        try:
            response = call(traffic.session())
        except Exception as exc:  # noqa: BLE001 - a refused connection is a figure, not a crash
            with lock:
                phase.failures.append(f"no answer: {label}: {type(exc).__name__}: {exc}")
            return
        elapsed = time.perf_counter() - due
        with lock:
            phase.latencies[label].append(elapsed)
            phase.statuses[response.status_code] += 1
            if response.status_code >= 400:
                phase.failures.append(f"{response.status_code} {label}: {response.text[:200]}")

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENT_THREADS) as pool:
        n = 0
        while True:
            due = start + n / RATE
            if due - start >= seconds:
                break
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            elif now - due > 0.1:
                # The generator itself fell behind (a busy machine): counted, and each
                # such request's latency still runs from when it was due.
                phase.late_starts += 1
            label, call = traffic.pick(n)
            pool.submit(one, label, call, due)
            on_tick(time.perf_counter() - start)
            n += 1
        # The sending time: waiting for the last answers below is not part of the rate.
        phase.seconds = time.perf_counter() - start


def _converge(traffic: Traffic, phase: Phase, deadline: float) -> None:
    """Wait until every kept cluster is ready and every deleted one deleted."""
    from django.db import connections

    from clusters.models import ClusterRequest

    started = time.perf_counter()
    while True:
        connections.close_all()
        rows = dict(
            ((slug, name), state)
            for slug, name, state in ClusterRequest.objects.values_list(
                "tenant__slug", "name", "state"
            )
        )
        wrong = []
        for key in traffic.made:
            want = "deleted" if key in traffic.deleted else "ready"
            if rows.get(key) != want:
                wrong.append(f"{key[0]}/{key[1]} is {rows.get(key)}, wants {want}")
        if not wrong or time.perf_counter() - started > deadline:
            phase.unconverged = wrong
            phase.converge_seconds = time.perf_counter() - started
            return
        time.sleep(0.5)


def measure(seconds: float, with_kills: bool) -> list[Phase]:
    """Run the steady phase (and the one with worker kills); returns both phases."""
    support.setup_django(DATABASE_SUFFIX)
    from tenants.models import GpuFlavor

    # Room for every cluster the run can hold at once: about as many deletes as creates
    # keep a few per engineer live; a dev cluster takes one GPU and a CPU head.
    wanted = int(RATE * 10) + 200
    h100_nodes = wanted // 8 + 2
    fleet = support.gpu_fleet(h100_nodes=h100_nodes, cpu_nodes=wanted // 50 + 2)
    engineers = _fill(h100_nodes)
    workdir = Path(tempfile.mkdtemp(prefix="gangway-load-"))
    port = support.free_port()
    base = f"http://127.0.0.1:{port}"
    phases = []
    with support.kubesim_process(fleet) as sim:
        stack = Stack(workdir, sim.kubeconfig, port)
        try:
            support.wait_http(f"{base}/healthz")
            deadline = time.monotonic() + 120
            while not GpuFlavor.objects.filter(observed_free_gpus__isnull=False).exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("no reconcile pass within 120 s")
                time.sleep(0.5)
            traffic = Traffic(base, engineers)
            # Warm up (gunicorn workers import lazily, connections open): not counted.
            _drive(traffic, Phase(name="warm-up"), min(seconds, 10.0), lambda _: None)
            steady = Phase(name="steady")
            _drive(traffic, steady, seconds, lambda _: None)
            steady.load = support.load_line()
            _converge(traffic, steady, CONVERGE_SECONDS)
            phases.append(steady)
            if with_kills:
                killed = Phase(name=f"worker SIGKILLed every {KILL_EVERY:.0f} s")
                next_kill = [KILL_EVERY]

                def tick(elapsed: float) -> None:
                    if elapsed >= next_kill[0]:
                        next_kill[0] += KILL_EVERY
                        stack.kill_worker()
                        killed.kills += 1

                # Only clusters asked for in this phase count for its convergence.
                traffic.made, traffic.deleted = set(), set()
                _drive(traffic, killed, seconds, tick)
                killed.load = support.load_line()
                _converge(traffic, killed, CONVERGE_SECONDS)
                phases.append(killed)
        finally:
            stack.stop()
    for phase in phases:
        phase.load += f" Logs: {workdir}."
    return phases


def _table(phase: Phase) -> list[str]:
    rows = [
        "| endpoint | requests | p50 | p99 |",
        "|---|---:|---:|---:|",
    ]
    for label in sorted(phase.latencies):
        values = phase.latencies[label]
        rows.append(
            f"| {label} | {len(values):,} | {support.median(values) * 1000:,.0f} ms | "
            f"{support.percentile(values, 99) * 1000:,.0f} ms |"
        )
    return rows


def _verdict(value: float, target: float) -> str:
    return "met" if value <= target else "**missed**"


def run(quick: bool) -> str:
    """The load figures as a markdown section (``quick``: 10 s at 20/s, kills every 3 s)."""
    global RATE, KILL_EVERY
    seconds = SECONDS
    if quick:
        RATE, KILL_EVERY, seconds = 20.0, 3.0, 10.0
    phases = measure(seconds, with_kills=True)
    lines = [
        "## Load: mixed reads and writes at a fixed rate",
        "",
        f"`python -m reliability load`: an open-loop generator (Python threads, "
        f"`reliability/load.py`) sends {RATE:.0f} requests/s for {seconds:.0f} s: "
        f"{10 - WRITES_IN_TEN} in 10 reads (cluster list, one cluster, queue, usage), "
        f"{WRITES_IN_TEN} in 10 writes (ask for a dev cluster, delete the oldest), as 12 "
        "engineers of 4 tenants, against gunicorn (3 sync WSGI workers, otherwise the "
        "production image's command), PostgreSQL, a Celery worker (prefork, "
        "concurrency 2) and beat on Redis, and kubesim. Latency runs from when a request "
        "was due. Then the same again while the worker (main process and pool) is "
        f"SIGKILLed every {KILL_EVERY:.0f} s and started again. Targets: 0 server errors, "
        f"read p99 at most {READ_P99_MS:.0f} ms, write p99 at most {WRITE_P99_MS:.0f} ms.",
    ]
    for phase in phases:
        read, write = phase.p99("read"), phase.p99("write")
        lines += [
            "",
            f"### {phase.name}",
            "",
            *_table(phase),
            "",
            f"- {phase.requests:,} requests in {phase.seconds:.0f} s "
            f"({phase.requests / max(phase.seconds, 1e-9):.0f}/s); statuses "
            f"{dict(sorted(phase.statuses.items()))}; **{phase.server_errors} server errors**, "
            f"{len(phase.failures)} failed requests in all"
            + (f" (first: `{phase.failures[0][:160]}`)" if phase.failures else "")
            + ".",
            f"- Read p99 {read:,.0f} ms (target {READ_P99_MS:.0f}: {_verdict(read, READ_P99_MS)});"
            f" write p99 {write:,.0f} ms (target {WRITE_P99_MS:.0f}: "
            f"{_verdict(write, WRITE_P99_MS)}). Requests the generator sent more than 100 ms "
            f"late: {phase.late_starts}.",
            f"- Worker kills: {phase.kills}. Converged (every kept cluster ready, every "
            f"deleted one deleted) {phase.converge_seconds:.0f} s after the traffic stopped; "
            f"**{len(phase.unconverged)} not converged**"
            + (f" (first: {phase.unconverged[0]})" if phase.unconverged else "")
            + ".",
            f"- {phase.load}",
        ]
    return "\n".join(lines)


def summary(phases: list[Phase]) -> list[dict[str, Any]]:
    """The figures a test asserts on, per phase (no latencies: tests make no timed
    assertions)."""
    return [
        {
            "name": phase.name,
            "requests": phase.requests,
            "server_errors": phase.server_errors,
            "failures": phase.failures[:20],
            "kills": phase.kills,
            "unconverged": phase.unconverged[:20],
            "writes": sum(len(v) for k, v in phase.latencies.items() if k.startswith("write")),
        }
        for phase in phases
    ]


if __name__ == "__main__":
    if "--summary" in sys.argv:
        # ``python -m reliability.load --summary RATE SECONDS KILL_EVERY``: a small run
        # whose figures tests/reliability/test_load.py reads as JSON from the last line.
        import json

        rate, seconds, every = (float(a) for a in sys.argv[2:5])
        RATE, KILL_EVERY = rate, every
        print(json.dumps(summary(measure(seconds, with_kills=True))))
    else:
        print(run(quick="--quick" in sys.argv))
