"""The API under gunicorn: latency and throughput of the cluster endpoints, 8 clients.

A tenant of 1,000 clusters is served by gunicorn with production-like settings; each
endpoint is loaded by 8 keep-alive clients for a fixed time and given as a multiple of
``/healthz`` (no database, no authentication), the floor of framework, server and clients.
With 8 clients waiting on 2 sync workers a request's latency is about 8 / throughput
(Little's law), so read the table for ratios and trend, and the one-client line for the
latency of a single request. docs/benchmarks.md says how each figure is taken.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from benchmarks import clients, support
from benchmarks.http_session import HttpResponse, HttpSession

CLUSTERS = 1_000
QUEUED_EVERY = 5  # one cluster in five waits in the queue
EVENTS_EACH = 6
LONG_HISTORY = 60  # events of the cluster whose detail is read
# With 8 clients on 2 sync workers, the list's p99 goal of 50 ms needs well over 160 lists a
# second, i.e. a few ms of CPU each, while rendering 50 clusters through DRF costs tens of ms
# on a small machine.
CLIENTS = 8
# Per endpoint, after a short warm-up; BENCH_API_SECONDS shortens a trial run.
SECONDS = float(os.environ.get("BENCH_API_SECONDS", "8"))
WARMUP_SECONDS = 1.0
SEQUENTIAL_REQUESTS = 200  # the list with one client: the latency of a single request
TENANT = "bench"
WATCHED = "c0000"  # the cluster whose detail is read
BROKER_DB = 12  # nothing consumes the nudges the creates send; the broker only holds them


def _fill(clusters: int = CLUSTERS) -> dict[str, str]:
    """The tenant, its users and ``clusters`` clusters (a fifth of them queued); returns the
    knox tokens by user."""
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from clusters.models import ClusterEvent, ClusterRequest
    from tenants.models import Membership, Quota, Role, Tenant

    support.truncate_product_tables()
    users = get_user_model().objects
    users.filter(username__in=["bench-admin", "bench-root", "bench-owner"]).delete()
    admin = users.create_user("bench-admin", password="x")
    root = users.create_user("bench-root", password="x", is_staff=True)
    owner = users.create_user("bench-owner", password="x")
    flavor = support.h100_flavor(512)
    tenant = Tenant.objects.create(
        slug=TENANT,
        name="Bench",
        namespace=f"gw-{TENANT}",
        cpu_quota=1_000_000,
        memory_quota_gib=10_000_000,
    )
    Quota.objects.create(tenant=tenant, flavor=flavor, gpus=4096)
    Membership.objects.create(tenant=tenant, user=admin, role=Role.ADMIN)
    Membership.objects.create(tenant=tenant, user=owner, role=Role.ENGINEER)
    every = QUEUED_EVERY
    rows = ClusterRequest.objects.bulk_create(
        ClusterRequest(
            tenant=tenant,
            owner=owner,
            name=f"c{i:04d}",
            kind="dev",
            flavor=flavor,
            workers=1,
            gpus=Decimal(1),
            cpu=Decimal(8),
            memory_gib=Decimal(64),
            state="queued" if i % every == 1 else "ready",
            queue_position=i // every + 1 if i % every == 1 else None,
            queue_flavor_position=i // every + 1 if i % every == 1 else None,
            queue_reason="tenant_quota",
            queue_message="waiting for the tenant's quota",
        )
        for i in range(clusters)
    )
    ClusterEvent.objects.bulk_create(
        ClusterEvent(
            cluster=row,
            actor_name="system",
            from_state="provisioning",
            to_state=row.state,
            reason=f"step{n}",
            message="a step of the cluster's life",
        )
        for row in rows
        for n in range(LONG_HISTORY if row.name == WATCHED else EVENTS_EACH)
    )
    # Fresh statistics, as autovacuum would have them: right after a bulk insert the
    # planner believes the tenant has one cluster and joins them all before sorting.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {
        name: AuthToken.objects.create(user)[1] for name, user in (("admin", admin), ("root", root))
    }


Call = Callable[[Any, str], Any]  # (session, base url) -> response


def _endpoints() -> list[tuple[str, str, Call]]:
    """(label, whose token, call) for each measured endpoint, the floor first."""
    base = f"/api/v1/tenants/{TENANT}"
    create_body = {"kind": "prod", "flavor": "h100", "workers": 1}

    def create_then_delete(session: Any, url: str) -> Any:
        response = session.post(f"{url}{base}/clusters/", json=create_body)
        # The delete keeps the tenant's live clusters bounded; it is not timed.
        name = response.json().get("name") if response.status_code == 201 else None
        if name:
            session.delete(f"{url}{base}/clusters/{name}/")
        return response

    return [
        ("`GET /healthz` (floor)", "admin", lambda s, u: s.get(f"{u}/healthz")),
        ("list, page of 50", "admin", lambda s, u: s.get(f"{u}{base}/clusters/?page_size=50")),
        ("detail", "admin", lambda s, u: s.get(f"{u}{base}/clusters/{WATCHED}/")),
        ("create (then delete, untimed)", "admin", create_then_delete),
        ("dry-run", "admin", lambda s, u: s.post(f"{u}{base}/clusters/dry-run/", json=create_body)),
        ("tenant queue", "admin", lambda s, u: s.get(f"{u}{base}/queue/")),
        ("all-tenants queue", "root", lambda s, u: s.get(f"{u}/api/v1/queue/")),
    ]


def _session(token: str) -> HttpSession:
    return HttpSession({"Authorization": f"Token {token}"})


def _timed(call: Call, session: HttpSession, url: str) -> float:
    """Seconds for one call. The create's call also deletes what it made, so a create is
    timed to its own response's headers instead (``elapsed`` before the delete)."""
    start = time.perf_counter()
    created: list[float] = []
    response = call(_Timing(session, created), url)
    took = time.perf_counter() - start
    if response.status_code >= 300:
        raise RuntimeError(f"{response.method} {response.url}: {response.status_code}")
    return created[0] if created else took


class _Timing:
    """The session, noting how long each non-dry-run POST took to its headers."""

    def __init__(self, session: HttpSession, created: list[float]) -> None:
        self.session = session
        self.created = created

    def get(self, url: str) -> HttpResponse:
        return self.session.get(url)

    def post(self, url: str, json: Any) -> HttpResponse:
        response = self.session.post(url, json=json)
        if "dry-run" not in url:
            self.created.append(self.session.elapsed)
        return response

    def delete(self, url: str) -> HttpResponse:
        return self.session.delete(url)


def _load(call: Call, token: str, url: str) -> tuple[list[float], float, int]:
    """``CLIENTS`` threads calling for ``SECONDS`` after a warm-up; (latencies, wall,
    calls made in all, the warm-up's included)."""
    run = clients.timed_load(
        CLIENTS,
        SECONDS,
        WARMUP_SECONDS,
        lambda: _session(token),
        lambda session: _timed(call, session, url),
    )
    return run.latencies, run.wall, run.calls


def served_latencies(
    env: dict[str, str], scratch: Path, port: int, tokens: dict[str, str], labels: Iterable[str]
) -> dict[str, list[float]]:
    """Latencies of each endpoint named in ``labels``, loaded as :func:`run` loads it, from
    one gunicorn (2 sync workers) started with ``env`` and stopped after."""
    procs = support.Processes(scratch)
    wanted = set(labels)
    found: dict[str, list[float]] = {}
    try:
        procs.start("gunicorn", support.gunicorn_command(port, workers=2), env)
        url = f"http://127.0.0.1:{port}"
        support.wait_http(f"{url}/healthz")
        for label, who, call in _endpoints():
            if label in wanted:
                found[label] = _load(call, tokens[who], url)[0]
    finally:
        procs.stop()
    return found


def _queries(tokens: dict[str, str]) -> dict[str, int]:
    """Queries of one request to each endpoint, by label: counted here through Django's test
    client with the same token, since the server's processes cannot be looked into."""
    from django.db import connection
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    counts = {}
    with override_settings(ALLOWED_HOSTS=["*"], SECURE_SSL_REDIRECT=False):
        for label, who, call in _endpoints():
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {tokens[who]}")
            adapter = _ClientAdapter(client)
            with CaptureQueriesContext(connection) as captured:
                response = call(adapter, "")
            assert response.status_code < 300, (label, response.status_code)
            counts[label] = len(captured) - adapter.untimed_queries
    return counts


class _ClientAdapter:
    """Django's test client with the few ``requests.Session`` methods the calls use; the
    create's untimed delete is not counted either."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.untimed_queries = 0

    def get(self, path: str) -> Any:
        return self.client.get(path)

    def post(self, path: str, json: Any) -> Any:
        return self.client.post(path, json, format="json")

    def delete(self, path: str) -> Any:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as captured:
            response = self.client.delete(path)
        self.untimed_queries += len(captured)
        return response


def _sequential_list(token: str, url: str) -> list[float]:
    session = _session(token)
    call = _endpoints()[1][2]
    try:
        for _ in range(20):
            _timed(call, session, url)
        return [_timed(call, session, url) for _ in range(SEQUENTIAL_REQUESTS)]
    finally:
        session.close()


def run() -> str:
    """Fill the database, start gunicorn, load each endpoint; returns the markdown section."""
    # The in-process requests (query counts) nudge Celery on commit too: one broker for both.
    os.environ["CELERY_BROKER_URL"] = support.redis_url(BROKER_DB)
    db_url = support.setup_django("bench_api")
    tokens = _fill()
    queries = _queries(tokens)
    port = support.free_port()
    url = f"http://127.0.0.1:{port}"
    env = support.production_env(
        DATABASE_URL=db_url,
        CELERY_BROKER_URL=os.environ["CELERY_BROKER_URL"],
        THROTTLE_WRITE="1000000/min",  # the benchmark is one client, as fast as it can
        DATABASE_CONN_MAX_AGE="600",
    )
    procs = support.Processes(Path(tempfile.mkdtemp(prefix="gangway-bench-api-")))
    results = []
    try:
        server = procs.start("gunicorn", support.gunicorn_command(port, workers=2), env)
        sessions = {"gunicorn": server.pid}  # it leads a session of its own
        support.wait_http(f"{url}/healthz")
        sequential = _sequential_list(tokens["admin"], url)
        for label, who, call in _endpoints():
            before = support.session_cpu_seconds(sessions)["gunicorn"]
            latencies, wall, calls = _load(call, tokens[who], url)
            cpu = support.session_cpu_seconds(sessions)["gunicorn"] - before
            results.append((label, latencies, wall, cpu / calls))
    finally:
        procs.stop()
    floor = support.median(results[0][1])
    rows = []
    for label, latencies, wall, cpu in results:
        p50 = support.median(latencies)
        p99 = support.percentile(latencies, 99)
        rows.append(
            f"| {label} | {len(latencies):,} | {p50 * 1000:.1f} | {p99 * 1000:.1f} | "
            f"{len(latencies) / wall:,.0f} | {p50 / floor:.1f}x | {cpu * 1000:.1f} | "
            f"{queries[label]} |"
        )
    list_p99 = support.percentile(results[1][1], 99) * 1000
    return "\n".join(
        [
            "## API under gunicorn (8 clients)",
            "",
            f"One tenant with {CLUSTERS:,} clusters ({CLUSTERS // QUEUED_EVERY} queued), "
            f"{EVENTS_EACH} events each ({LONG_HISTORY} for the one whose detail is read); "
            f"gunicorn with 2 sync workers and `DEBUG=0`; {CLIENTS} client threads with "
            f"keep-alive `http.client` connections and knox tokens, {SECONDS:g} s per "
            f"endpoint after a {WARMUP_SECONDS:.0f} s warm-up. "
            "Latency is per request at the client; *x floor* is the p50 over the p50 of "
            "`/healthz`, which touches neither the database nor authentication. The create "
            "is timed to its response headers; each is then deleted (not timed) so the "
            "tenant's size stays put. *Server CPU* is gunicorn's CPU time (every worker, "
            "user and system) over every call of the endpoint's run, warm-up included, per "
            "call; the create's includes its delete. Queries are one request's, counted "
            "in-process.",
            "",
            "| endpoint | requests | p50 ms | p99 ms | req/s | x floor | server CPU ms | queries |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"List with one client ({SEQUENTIAL_REQUESTS} requests): p50 "
            f"{support.median(sequential) * 1000:.1f} ms, p99 "
            f"{support.percentile(sequential, 99) * 1000:.1f} ms. List p99 with {CLIENTS} "
            f"clients: {list_p99:.1f} ms (goal: under 50 ms). {support.load_line()}",
        ]
    )
