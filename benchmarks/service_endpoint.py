"""A service's endpoint (``/serve/{tenant}/{service}/...``) against the Serve proxy straight.

One ready service on kubesim (its own process; simulated Serve), brought up by a real
Celery worker; gunicorn serves the product. The same request is sent by keep-alive
clients through the product's relay (invoke token, gunicorn, the gateway, kubesim's
service proxy) and straight to kubesim's service proxy of ``<name>-serve-svc``, the hop
the relay forwards to: throughput with several clients, and latency with one (no
queueing), the difference being what the product adds. docs/benchmarks.md says how.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks import clients, support
from benchmarks.http_session import HttpResponse, HttpSession

CLIENTS = 8
SECONDS = float(os.environ.get("BENCH_SERVICE_SECONDS", "6"))  # per path, after a warm-up
WARMUP_SECONDS = 1.0
SEQUENTIAL_REQUESTS = int(os.environ.get("BENCH_SERVICE_SEQUENTIAL", "300"))
GUNICORN_WORKERS = 3  # as deploy/Dockerfile runs it
# Its own Redis database (broker, cache, counts), emptied first.
BROKER_DB = int(os.environ.get("BENCH_SERVICE_REDIS_DB", "13"))
QUEUE = "bench-service"
TENANT = "bench"
SERVICE = "echo"
ROUTE = "imagine?prompt=a+cat"
SERVE_CONFIG = """\
applications:
  - name: echo
    import_path: echo:app
    route_prefix: /
    deployments:
      - name: APIIngress
        num_replicas: 1
      - name: Model
        ray_actor_options:
          num_gpus: 1
"""
READY_SECONDS = 120.0

Session = HttpSession


def _fill() -> str:
    """The tenant, its engineer and an API token; returns the token."""
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from tenants.models import Membership, Quota, Role, Tenant

    support.truncate_product_tables()
    flavor = support.h100_flavor(2)
    tenant = Tenant.objects.create(slug=TENANT, name="Bench", namespace=f"gw-{TENANT}")
    Quota.objects.create(tenant=tenant, flavor=flavor, gpus=8, borrow_limit=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-serve")
    Membership.objects.create(tenant=tenant, user=user, role=Role.ENGINEER)
    return str(AuthToken.objects.create(user)[1])


def _ready_service(base: str, token: str) -> str:
    """Request the service through the API, wait until it serves; returns an invoke token."""
    from clusters.models import ClusterRequest

    api = Session({"Authorization": f"Token {token}"})
    services = f"{base}/api/v1/tenants/{TENANT}/services/"
    body = {"name": SERVICE, "flavor": "h100", "workers": 1, "serve_config": SERVE_CONFIG}
    created = api.post(services, body)
    if created.status_code != 201:
        raise RuntimeError(f"service create: {created.status_code} {created.text}")
    deadline = time.monotonic() + READY_SECONDS
    rows = ClusterRequest.objects.unscoped().select_related("service")
    while True:
        row = rows.get(name=SERVICE)
        if row.state == "ready" and row.service.serve_endpoints >= 1:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"the service never served: {row.state} {row.last_error}")
        time.sleep(0.2)
    made = api.post(f"{services}{SERVICE}/tokens/", {"name": "bench"})
    api.close()
    if made.status_code != 201:
        raise RuntimeError(f"invoke token: {made.status_code} {made.text}")
    return str(made.json()["token"])


def _kube_token(kubeconfig: str) -> str:
    """The bearer token of the kubeconfig's current context (what the gateway sends)."""
    config = yaml.safe_load(Path(kubeconfig).read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    return str(user["user"]["token"])


Call = Callable[[Session], HttpResponse]


def _checked(call: Call, session: Session) -> float:
    """Seconds of one call, which Serve must answer 200."""
    start = time.perf_counter()
    response = call(session)
    took = time.perf_counter() - start
    if response.status_code != 200:
        raise RuntimeError(f"{response.method} {response.url}: {response.status_code}")
    return took


def _load(call: Call, headers: dict[str, str]) -> tuple[list[float], float]:
    """``CLIENTS`` threads calling for ``SECONDS`` after a warm-up; (latencies, wall)."""
    run = clients.timed_load(
        CLIENTS,
        SECONDS,
        WARMUP_SECONDS,
        lambda: Session(headers),
        lambda session: _checked(call, session),
    )
    return run.latencies, run.wall


def _sequential(call: Call, headers: dict[str, str]) -> list[float]:
    session = Session(headers)
    try:
        for _ in range(20):
            _checked(call, session)
        return [_checked(call, session) for _ in range(SEQUENTIAL_REQUESTS)]
    finally:
        session.close()


def _paths(
    base: str, sim: support.KubeSimProcess, invoke: str
) -> list[tuple[str, Call, dict[str, str]]]:
    """(label, call, headers) of each measured path: the product's endpoint, the Serve
    proxy through kubesim's service proxy, and gunicorn's floor."""
    straight = (
        f"{sim.url}/api/v1/namespaces/gw-{TENANT}/services/{SERVICE}-serve-svc:serve/proxy/{ROUTE}"
    )
    relayed = f"{base}/serve/{TENANT}/{SERVICE}/{ROUTE}"
    return [
        (
            "through the endpoint",
            lambda s: s.get(relayed),
            {"Authorization": f"Bearer {invoke}"},
        ),
        (
            "straight to the serve service",
            lambda s: s.get(straight),
            {"Authorization": f"Bearer {_kube_token(sim.kubeconfig)}"},
        ),
        ("gunicorn's `GET /healthz` (floor)", lambda s: s.get(f"{base}/healthz"), {}),
    ]


@dataclass
class PathFigures:
    """What one path measured: one client's latencies, then the load's."""

    label: str
    sequential: list[float]
    latencies: list[float]
    wall: float
    cpu: dict[str, float]  # seconds per request, by process

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall

    def row(self) -> str:
        ms = 1000
        lat, seq = self.latencies, self.sequential
        return (
            f"| {self.label} | {self.rate:,.0f} | {support.median(lat) * ms:.1f} "
            f"| {support.percentile(lat, 99) * ms:.1f} | {support.median(seq) * ms:.2f} "
            f"| {support.percentile(seq, 99) * ms:.2f} | {self.cpu['gunicorn'] * ms:.2f} "
            f"| {self.cpu['kubesim'] * ms:.2f} |"
        )


def _measure(
    base: str, sim: support.KubeSimProcess, invoke: str, sessions: dict[str, int]
) -> list[PathFigures]:
    results = []
    for label, call, headers in _paths(base, sim, invoke):
        sequential = _sequential(call, headers)
        before = support.session_cpu_seconds(sessions)
        latencies, wall = _load(call, headers)
        spent = support.session_cpu_seconds(sessions)
        cpu = {name: (spent[name] - before[name]) / len(latencies) for name in sessions}
        results.append(PathFigures(label, sequential, latencies, wall, cpu))
    return results


def _added(relayed: list[float], straight: list[float]) -> tuple[float, float]:
    """p50 and p99 of ``relayed`` less those of ``straight``, in ms."""
    p50 = support.median(relayed) - support.median(straight)
    p99 = support.percentile(relayed, 99) - support.percentile(straight, 99)
    return p50 * 1000, p99 * 1000


def _start(workdir: Path, sim: support.KubeSimProcess, port: int) -> support.Processes:
    """gunicorn as in production, and the engine's worker (with beat, quick periods)."""
    env = support.production_env(
        DATABASE_URL=os.environ["DATABASE_URL"],
        CACHE_URL=support.redis_url(BROKER_DB),
        CELERY_BROKER_URL=support.redis_url(BROKER_DB),
        CELERY_QUEUE=QUEUE,
        KUBECONFIG=sim.kubeconfig,
        GANGWAY_VAR_DIR=str(workdir),
        DATABASE_CONN_MAX_AGE="600",
    )
    procs = support.Processes(workdir)
    procs.start("gunicorn", support.gunicorn_command(port, workers=GUNICORN_WORKERS), env)
    engine = support.engine_env(
        database_url=os.environ["DATABASE_URL"],
        kubeconfig=sim.kubeconfig,
        queue=QUEUE,
        var_dir=str(workdir),
        CACHE_URL=support.redis_url(BROKER_DB),
        CELERY_BROKER_URL=support.redis_url(BROKER_DB),
    )
    worker = support.CeleryProcess(engine, workdir / "worker.log")
    worker.start()
    assert worker.proc is not None
    procs.procs.append(worker.proc)
    return procs


def run() -> str:
    """Bring the service up, load each path; returns the markdown section."""
    import redis

    support.setup_django("bench_service")
    redis.Redis.from_url(support.redis_url(BROKER_DB)).flushdb()
    token = _fill()
    workdir = Path(tempfile.mkdtemp(prefix="gangway-bench-service-"))
    port = support.free_port()
    base = f"http://127.0.0.1:{port}"
    fleet = support.gpu_fleet(h100_nodes=2, cpu_nodes=1)
    with support.kubesim_process(fleet) as sim:
        procs = _start(workdir, sim, port)
        try:
            support.wait_http(f"{base}/healthz")
            invoke = _ready_service(base, token)
            sessions = {"gunicorn": procs.procs[0].pid, "kubesim": sim.proc.pid}
            results = _measure(base, sim, invoke, sessions)
        finally:
            procs.stop()
    relayed, straight, floor = results
    added_p50, added_p99 = _added(relayed.sequential, straight.sequential)
    under_load_p50, under_load_p99 = _added(relayed.latencies, straight.latencies)
    return "\n".join(
        [
            "## Service endpoint",
            "",
            "One ready service (a dev service, one single-GPU worker) on kubesim in its own "
            "process with simulated Serve (kubesim/operators/rayserve.py: its answer is a "
            "small JSON document), brought up by a real Celery worker; gunicorn with "
            f"{GUNICORN_WORKERS} sync workers and `DEBUG=0` serves the product. The same "
            f"`GET /{ROUTE}` is sent *through the endpoint* "
            f"(`/serve/{TENANT}/{SERVICE}/...` with an invoke token: gunicorn, the relay, "
            "the gateway's keep-alive pool, kubesim's service proxy) and *straight to the "
            f"serve service* (kubesim's service proxy of `{SERVICE}-serve-svc:serve`, the "
            "hop the relay forwards to, with the kubeconfig's token). *Load*: "
            f"{CLIENTS} client threads with keep-alive `http.client` connections, "
            f"{SECONDS:g} s per path after a {WARMUP_SECONDS:.0f} s warm-up. *One client*: "
            f"{SEQUENTIAL_REQUESTS} requests in a row (after 20 untimed), latency without "
            "queueing. Every answer was a 200 from Serve. *CPU per request* is each "
            "process's CPU time (all its workers and threads, user and system) over the "
            "load run, per request. Real Ray's Serve proxy is not measured here: a real "
            "head takes over a minute to start on this machine (*Real Ray in kubesim*).",
            "",
            "| path | req/s (load) | p50 ms (load) | p99 ms (load) | p50 ms (one client) "
            "| p99 ms (one client) | gunicorn CPU ms | kubesim CPU ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *[path.row() for path in results],
            "",
            f"Added by the endpoint, one client: p50 **{added_p50:+.1f} ms**, p99 "
            f"**{added_p99:+.1f} ms** (differences of the percentiles); under load: p50 "
            f"{under_load_p50:+.1f} ms, p99 {under_load_p99:+.1f} ms: with {CLIENTS} clients on "
            f"{GUNICORN_WORKERS} sync workers a request mostly waits for a worker (latency is "
            "about clients / throughput, Little's law). Throughput through the endpoint is "
            f"{relayed.rate / straight.rate:.1%} of the straight path's and "
            f"{relayed.rate / floor.rate:.0%} of gunicorn's floor: each relayed request "
            "authenticates its token and reads its service from PostgreSQL, counts itself "
            "in Redis and makes a request of its own to the API server, where the straight "
            "path is kubesim's proxy alone. The machine has 2 cores, shared with other "
            "sessions' work while this ran (the product, kubesim and the clients compete "
            f"for them too). {support.load_line()}",
        ]
    )
