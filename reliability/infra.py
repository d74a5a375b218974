"""Broker and database faults: Redis and PostgreSQL stopped and restarted under the stack.

The suite starts its own throwaway ``redis-server`` and PostgreSQL on free ports, so that
stopping them touches nothing else on the machine; the web app runs under gunicorn as in
production and requests go through the API as a client's would. Around each Redis fault every
committed request must reach ``ready`` without help (the rows are the outbox; the sweeper
re-sends what a dead broker swallowed); while PostgreSQL is down the API and dashboard must
answer a quick 503 with ``Retry-After``, not a 500 or a hang. After every fault the stack
converges and is audited.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.support import Processes, free_port, gunicorn_command, production_env, wait_http
from reliability.rig import Audit, People, Rig, audit, build_rig, converge, seed

FULL = {"redis": 20, "postgres": 20}
QUICK = {"redis": 2, "postgres": 2}
REDIS_KINDS = ("restarted", "unreachable")
UNREACHABLE_SECONDS = 3.0
POSTGRES_DOWN_SECONDS = 2.0
CONVERGE_TIMEOUT = 180.0
PROBE_TIMEOUT = 15.0  # a probe that takes longer than this while the database is down hangs
DATABASE = "gangway_infra"
PG_BIN = Path(os.environ.get("PG_BIN", "/usr/local/bin"))
REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")


class Redis:
    """A throwaway ``redis-server`` on a free port, without persistence."""

    def __init__(self, var: Path) -> None:
        self.port = free_port()
        self.log = var / "redis.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        command = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no"]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        _wait_port(self.port, "redis-server")

    def stop(self) -> None:
        """SIGKILL: as a crashed or partitioned broker, nothing flushed, nothing said."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


class Postgres:
    """A throwaway PostgreSQL cluster (``initdb``, trust authentication) on a free port.

    As root, the server runs as the ``postgres`` system user (it refuses root), as
    ``scripts/test_services.py`` starts it."""

    def __init__(self, var: Path) -> None:
        self.port = free_port()
        self.data = var / "pg"
        self.sockets = var / "pg-sockets"
        self.log = var / "pg.log"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(var, "postgres")
        self.sockets.mkdir()
        if self.as_user:
            shutil.chown(self.sockets, "postgres")

    def url(self, name: str = DATABASE) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True)

    def init(self) -> None:
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust")

    def start(self) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.sockets} -c fsync=off"
        pg_ctl = str(PG_BIN / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.log), "-w", "start", "-o", options)

    def stop(self) -> None:
        """``immediate``: the server drops every connection at once, as a crash would."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "stop", "-m", "immediate")


def _wait_port(port: int, what: str, timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start on port {port}")


@dataclass
class Stack:
    """The servers, the rig and gunicorn, and what a client needs to call the API."""

    redis: Redis
    postgres: Postgres
    rig: Rig
    people: People
    base: str
    token: str
    session_cookie: str

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        import requests

        headers = {"Authorization": f"Token {self.token}"}
        url = f"{self.base}/api/v1/tenants/{self.people.tenant.slug}/{path}"
        return requests.request(method, url, headers=headers, timeout=PROBE_TIMEOUT, **kwargs)


@contextmanager
def _django_database(url: str) -> Iterator[None]:
    """Point this process's default connection at ``url`` (created and migrated), and
    back at what it was after."""
    import dj_database_url
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    parsed = dj_database_url.parse(url)
    target = settings.DATABASES["default"]
    previous = dict(target)
    connections.close_all()
    # The connection reads this dict when it next connects.
    target.update({k: parsed[k] for k in ("NAME", "USER", "HOST", "PORT")}, PASSWORD="")
    try:
        call_command("migrate", verbosity=0)
        yield
    finally:
        connections.close_all()
        target.clear()
        target.update(previous)


@contextmanager
def stack(**worker_env: str) -> Iterator[Stack]:
    """Start Redis, PostgreSQL, kubesim, the worker and beat, and gunicorn; stop all."""
    import psycopg
    from django.conf import settings
    from django.test import Client
    from knox.models import AuthToken

    from controlplane.celery import app
    from kubesim import KubeSim

    var = Path(tempfile.mkdtemp(prefix="gangway-infra-"))
    redis, postgres = Redis(var), Postgres(var)
    redis.start()
    postgres.init()
    postgres.start()
    procs = Processes(var)
    sim = KubeSim(fleet=None, port=0, startup_delay=0.0).start()
    previous_kubeconfig, previous_queue = settings.KUBECONFIG, app.conf.task_default_queue
    rig: Rig | None = None
    try:
        with psycopg.connect(postgres.url("postgres"), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{DATABASE}"')
        sim.write_kubeconfig(str(var / "kubeconfig"))
        settings.KUBECONFIG = str(var / "kubeconfig")
        with _django_database(postgres.url()):
            people = seed()
            _, token = AuthToken.objects.create(user=people.admin)
            browser = Client()
            browser.force_login(people.admin)
            cookie = browser.cookies[settings.SESSION_COOKIE_NAME].value
            broker = {"CELERY_BROKER_URL": redis.url(0), "REDIS_URL": redis.url(0)}
            rig = build_rig(sim=sim, database_url=postgres.url(), var=var, **broker, **worker_env)
            port = free_port()
            shared = ("DATABASE_URL", "KUBECONFIG", "CELERY_QUEUE", "RAY_IMAGE_ALLOWLIST")
            env = production_env(
                **{k: rig.worker.env[k] for k in shared},
                **broker,
                CACHE_URL=redis.url(1),
                GANGWAY_VAR_DIR=str(var),
            )
            procs.start("gunicorn", gunicorn_command(port, workers=2), env)
            base = f"http://127.0.0.1:{port}"
            wait_http(f"{base}/healthz", timeout=120)
            yield Stack(redis, postgres, rig, people, base, token, cookie)
    finally:
        procs.stop()
        if rig is not None:
            rig.stop()
        sim.stop()
        settings.KUBECONFIG = previous_kubeconfig
        app.conf.task_default_queue = previous_queue
        redis.stop()
        postgres.stop()
        shutil.rmtree(var, ignore_errors=True)


@dataclass
class Result:
    """The figures of one run."""

    faults: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    refused: list[str] = field(default_factory=list)  # a create not answered 201
    convergence: dict[str, list[float]] = field(default_factory=dict)  # fault -> seconds
    unconverged: list[str] = field(default_factory=list)
    audit: Audit = field(default_factory=Audit)
    probes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (page, outcome)
    probe_seconds: list[float] = field(default_factory=list)
    recovery: list[float] = field(default_factory=list)  # database back -> API answers 200
    exits: Counter[str] = field(default_factory=Counter)  # worker/beat exited, restarted
    wall: float = 0.0


def _create(s: Stack, name: str, result: Result) -> str | None:
    """POST a dev cluster; its name if the API accepted it (201)."""
    result.requests += 1
    try:
        response = s.api(
            "POST", "clusters/", json={"kind": "dev", "flavor": "h100", "workers": 1, "name": name}
        )
    except OSError as exc:
        result.refused.append(f"{name}: {type(exc).__name__}")
        return None
    if response.status_code != 201:
        result.refused.append(f"{name}: {response.status_code} {response.text[:200]}")
        return None
    return name


def _settle(s: Stack, names: list[str], fault: str, started: float, result: Result) -> None:
    """Wait until every accepted request is ready, delete them through the API, wait until
    they are deleted, and audit everything so far."""
    from django.db import connections

    from clusters.models import ClusterRequest

    connections.close_all()  # this process's connection died with a restarted database
    rows = ClusterRequest.objects.unscoped().filter(tenant=s.people.tenant, name__in=names)

    def all_in(state: str) -> bool:
        return rows.filter(state=state).count() == len(names)

    def ready() -> bool:
        _supervise(s, result)
        return all_in("ready")

    took = converge(ready, timeout=CONVERGE_TIMEOUT)
    if took is None:
        result.unconverged.append(f"{fault}: {dict(Counter(r.state for r in rows))}")
    else:
        result.convergence.setdefault(fault, []).append(time.monotonic() - started)
    for name in names:
        s.api("DELETE", f"clusters/{name}/")

    def deleted() -> bool:
        _supervise(s, result)
        return all_in("deleted")

    if converge(deleted, timeout=CONVERGE_TIMEOUT) is None:
        result.unconverged.append(f"deletion after {fault}")
    result.audit.add(audit(dict.fromkeys(rows.values_list("pk", flat=True), "deleted")))


def _supervise(s: Stack, result: Result) -> None:
    """Start the worker or beat again if it exited, as Kubernetes restarts a container
    whose process ended (Celery's worker exits with "Unrecoverable error" when it loses
    Redis at some moments of its reconnection, a fault of Celery and Kombu, not ours)."""
    for name, process in (("worker", s.rig.worker), ("beat", s.rig.beat)):
        if not process.alive:
            result.exits[name] += 1
            process.start()


def redis_fault(s: Stack, n: int, result: Result) -> None:
    """One Redis fault, with a request committed before, during and after it: the kinds
    alternate, *restarted* (at once: every queued message is gone) and *unreachable*."""
    kind = REDIS_KINDS[n % len(REDIS_KINDS)]
    names = [_create(s, f"redis-{n}-before", result)]
    s.redis.stop()
    names.append(_create(s, f"redis-{n}-during", result))
    if kind == "unreachable":
        time.sleep(UNREACHABLE_SECONDS)
        names.append(_create(s, f"redis-{n}-during-late", result))
    s.redis.start()
    started = time.monotonic()
    names.append(_create(s, f"redis-{n}-after", result))
    result.faults[f"Redis {kind}"] += 1
    _settle(s, [x for x in names if x], "redis", started, result)


def _probe(s: Stack, result: Result) -> None:
    """Ask the API and the dashboard for a page while the database is down."""
    import requests
    from django.conf import settings

    asks = {
        "API": lambda: s.api("GET", "clusters/"),
        "dashboard": lambda: requests.get(
            f"{s.base}/",
            headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={s.session_cookie}"},
            timeout=PROBE_TIMEOUT,
            allow_redirects=False,
        ),
    }
    for page, ask in asks.items():
        started = time.monotonic()
        try:
            response = ask()
        except OSError:
            result.probes[(page, "no answer")] += 1
            continue
        result.probe_seconds.append(time.monotonic() - started)
        result.probes[(page, _judge(page, response))] += 1


def _judge(page: str, response: Any) -> str:
    """``clear 503`` or what was wrong with the answer."""
    if response.status_code != 503:
        return f"{response.status_code}"
    if not response.headers.get("Retry-After"):
        return "503 without Retry-After"
    if page == "API":
        try:
            code = response.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return "503 without a JSON error"
        return "clear 503" if code == "database_unavailable" else f"503 {code}"
    return "clear 503" if "database is unavailable" in response.text else "503, unclear page"


def postgres_fault(s: Stack, n: int, result: Result) -> None:
    """Requests committed, PostgreSQL stopped while they are provisioned, probes, back."""
    names = [_create(s, f"pg-{n}-{i}", result) for i in range(2)]
    s.postgres.stop()
    down = time.monotonic()
    _probe(s, result)
    time.sleep(max(0.0, POSTGRES_DOWN_SECONDS - (time.monotonic() - down)))
    s.postgres.start()
    started = time.monotonic()

    def answers() -> bool:
        try:
            return bool(s.api("GET", "clusters/").status_code == 200)
        except OSError:
            return False

    took = converge(answers, timeout=CONVERGE_TIMEOUT)
    if took is None:
        result.unconverged.append("the API after PostgreSQL came back")
    else:
        result.recovery.append(took)
    result.faults["PostgreSQL restarted"] += 1
    _settle(s, [x for x in names if x], "postgres", started, result)


def exercise(s: Stack, *, quick: bool) -> Result:
    """Run the faults; see the module docstring."""
    plan = QUICK if quick else FULL
    result = Result()
    started = time.monotonic()
    for n in range(plan["redis"]):
        redis_fault(s, n, result)
    for n in range(plan["postgres"]):
        postgres_fault(s, n, result)
    result.wall = time.monotonic() - started
    return result


def section(result: Result, *, quick: bool) -> str:
    """The markdown section of ``docs/reliability.md``."""
    from reliability.rig import loadavg
    from reliability.rig import seconds as fmt

    a = result.audit
    probes = Counter(outcome for (_, outcome) in result.probes.elements())
    asked = sum(result.probes.values())
    slowest = f"{max(result.probe_seconds):.2f} s" if result.probe_seconds else "n/a"
    faults = ", ".join(f"{count} {kind}" for kind, count in sorted(result.faults.items()))
    lines = [
        "## Broker and database faults",
        "",
        "`python -m reliability infra`: the suite's own Redis and PostgreSQL (throwaway "
        "servers on free ports), the web app under gunicorn (2 workers, `DEBUG=0`, "
        "throttles in that Redis), a Celery worker (prefork, 2 children) and beat, kubesim "
        f"over HTTP. **{sum(result.faults.values())} faults** ({faults}). Around each Redis "
        "fault a dev cluster was requested through the API before, while and after Redis was "
        f"down (`unreachable`: down {UNREACHABLE_SECONDS:.0f} s; `restarted`: SIGKILLed and "
        "started at once, every queued message gone). For each PostgreSQL restart two "
        "clusters were requested, PostgreSQL was stopped (`pg_ctl stop -m immediate`) while "
        "they were provisioned, the API and the dashboard were asked for a page while it "
        f"was down (at least {POSTGRES_DOWN_SECONDS:.0f} s), and it was started again. After "
        "each fault every accepted request had to become ready on its own, was deleted "
        f"through the API, and the stack was audited ({result.requests} requests in all).",
        "",
        "| Figure | Result |",
        "|---|---:|",
        f"| creates not answered 201 (while Redis was down, too) | {len(result.refused)} |",
        f"| requests lost (accepted, never ready, or never deleted) | {a.lost} |",
        f"| duplicate RayClusters / RayJobs | {a.duplicates} |",
        f"| orphaned objects | {a.orphans} |",
        f"| quota-ledger drift (GPUs) | {a.drift} |",
        f"| usage spans left open | {a.open_spans} |",
        f"| faults after which the stack did not converge within {CONVERGE_TIMEOUT:.0f} s | "
        f"{len(result.unconverged)} |",
        "| time to converge after Redis came back (all ready) | "
        f"{fmt(result.convergence.get('redis', []))} |",
        "| time to converge after PostgreSQL came back (all ready) | "
        f"{fmt(result.convergence.get('postgres', []))} |",
        f"| pages asked while PostgreSQL was down (API and dashboard) | {asked} |",
        f"| ... answered 503 with a clear body and Retry-After | {probes['clear 503']} |",
        f"| ... answered otherwise (500, hang, unclear) | {asked - probes['clear 503']} |",
        f"| slowest answer while PostgreSQL was down | {slowest} |",
        f"| PostgreSQL back -> the API answers 200 again | {fmt(result.recovery)} |",
        f"| worker exits (restarted, as Kubernetes would) | {result.exits['worker']} |",
        f"| beat exits (restarted) | {result.exits['beat']} |",
        "",
        f"The run took {result.wall / 60:.1f} minutes; load average at the end {loadavg()} "
        "(the machine is shared; times are upper bounds).",
    ]
    found = result.refused[:10] + result.unconverged + a.details[:20]
    wrong = [f"{page}: {outcome} x{count}" for (page, outcome), count in result.probes.items()]
    found += [w for w in wrong if "clear 503" not in w]
    if found:
        lines += ["", "What was found: " + "; ".join(found) + "."]
    return "\n".join(lines)


def run(quick: bool) -> str:
    """``make reliability``'s entry point (its own Redis, PostgreSQL, kubesim, worker,
    beat and gunicorn)."""
    from benchmarks.support import setup_django

    setup_django("rel_infra")  # Django set up; the suite then moves to its own server
    with stack() as s:
        result = exercise(s, quick=quick)
    return section(result, quick=quick)
