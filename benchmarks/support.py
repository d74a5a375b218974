"""What several benchmarks share: a dedicated database, an in-process kubesim, counters.

Benchmarks never run against the test database: :func:`setup_django` creates (once) and
migrates ``<name>_<suffix>`` beside the configured one and points Django at it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import psycopg

ROOT = Path(__file__).resolve().parent.parent


_BASE_DATABASE_URL: str | None = None


def admin_connection(database_url: str) -> psycopg.Connection[Any]:
    """An autocommit connection to the ``postgres`` database of ``database_url``'s server,
    for creating and dropping databases."""
    import dj_database_url
    import psycopg

    parsed = dj_database_url.parse(database_url)
    return psycopg.connect(
        host=parsed["HOST"],
        port=parsed["PORT"] or 5432,
        user=parsed["USER"],
        dbname="postgres",
        autocommit=True,
    )


def setup_django(suffix: str = "bench") -> str:
    """Point Django at the database ``<name>_<suffix>`` (created and migrated if needed).

    ``make bench`` runs every benchmark in one process: the first call sets Django up,
    later ones switch the default connection to their own database (always named after
    the ``DATABASE_URL`` the process started with). Child processes (gunicorn, Celery)
    find it in ``DATABASE_URL``.
    """
    import dj_database_url

    global _BASE_DATABASE_URL
    if _BASE_DATABASE_URL is None:
        _BASE_DATABASE_URL = os.environ.get(
            "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gangway"
        )
    url = _BASE_DATABASE_URL
    parsed = dj_database_url.parse(url)
    name = f"{parsed['NAME']}_{suffix}"
    admin = admin_connection(url)
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    base = url.rsplit("/", 1)[0]
    os.environ["DATABASE_URL"] = f"{base}/{name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"
    import django
    from django.apps import apps

    if apps.ready:
        from django.conf import settings
        from django.db import connections

        # The connection reads this dict when it next connects.
        connections.close_all()
        settings.DATABASES["default"]["NAME"] = name
    else:
        django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return os.environ["DATABASE_URL"]


def truncate_product_tables() -> None:
    """Empty every table the benchmarks fill (identities restart), and clear the claims
    of coalesced passes.

    A run stops its worker with the last nudges' messages still in the broker, and the
    next run empties the broker: a pass claimed then stays claimed, so every nudge of the
    next run is swallowed until the sweeper or beat's own admission pass (every 15 s)
    sends one. That cost the end-to-end benchmark its first 10 s of admissions.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE clusters_usagespan, clusters_clusterevent, clusters_clusterrequest, "
            "tenants_quota, tenants_membership, tenants_auditevent, tenants_tenant, "
            "tenants_gpuflavor RESTART IDENTITY CASCADE"
        )
        cursor.execute("UPDATE clusters_pendingpass SET requested_at = NULL")


def h100_flavor(node_count: int) -> Any:
    """The catalogue row of the 8 x H100 nodes :func:`gpu_fleet` builds."""
    from tenants.models import GpuFlavor

    return GpuFlavor.objects.create(
        name="h100",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpus_per_node=8,
        cpu_per_node=192,
        memory_per_node_gib=1800,
        node_count=node_count,
    )


def gpu_fleet(*, h100_nodes: int, cpu_nodes: int, name: str = "bench") -> dict[str, Any]:
    """A kubesim fleet of 8 x H100 nodes and CPU-only nodes (for Ray heads) of the given
    sizes, shaped like ``kubesim/fleets/large.yaml``."""
    return {
        "name": name,
        "pools": [
            {
                "name": "h100",
                "count": h100_nodes,
                "instanceType": "p5.48xlarge",
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/gpu.count": "8",
                    "nvidia.com/gpu.memory": "81559",
                },
                "allocatable": {
                    "cpu": "192",
                    "memory": "1800Gi",
                    "nvidia.com/gpu": "8",
                    "pods": "110",
                },
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            },
            {
                "name": "cpu",
                "count": cpu_nodes,
                "instanceType": "m6i.32xlarge",
                "labels": {},
                "allocatable": {"cpu": "128", "memory": "512Gi", "pods": "110"},
                "taints": [],
            },
        ],
    }


@dataclass
class KubeSimProcess:
    """A kubesim running in its own process (so that its CPU is not the benchmark's)."""

    proc: subprocess.Popen[bytes]
    url: str
    kubeconfig: str


@contextmanager
def kubesim_process(fleet: dict[str, Any], *, kueue: bool = False) -> Iterator[KubeSimProcess]:
    """Start ``python -m kubesim`` with ``fleet`` and no start-up delay; stop it after.

    The simulator gets a process of its own, as the API server of a real cluster would:
    in-process, its serialisation would share the benchmark's interpreter lock and be
    counted as the control plane's time.
    """
    workdir = Path(tempfile.mkdtemp(prefix="gangway-bench-"))
    fleet_file = workdir / "fleet.yaml"
    fleet_file.write_text(yaml.safe_dump(fleet))
    kubeconfig = workdir / "kubeconfig"
    command = [sys.executable, "-m", "kubesim", "--port", "0", "--config", str(fleet_file)]
    command += ["--kubeconfig-out", str(kubeconfig), "--startup-delay", "0"]
    if kueue:
        command.append("--kueue")
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"kubesim did not start: {line}")
    url = line.split("listening on ", 1)[1].split()[0]
    try:
        yield KubeSimProcess(proc=proc, url=url, kubeconfig=str(kubeconfig))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextmanager
def kubesim_for_django(fleet: dict[str, Any]) -> Iterator[KubeSimProcess]:
    """:func:`kubesim_process` with Django's ``KUBECONFIG`` pointed at it."""
    from django.conf import settings

    previous = settings.KUBECONFIG
    with kubesim_process(fleet) as sim:
        settings.KUBECONFIG = sim.kubeconfig
        try:
            yield sim
        finally:
            settings.KUBECONFIG = previous


@dataclass
class KubeCalls:
    """Kubernetes API calls made through the product's gateway, by HTTP method."""

    by_method: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_method.values())


@contextmanager
def count_kube_calls() -> Iterator[KubeCalls]:
    """Count the gateway's HTTP calls (wraps ``Gateway._call``; the calls still happen)."""
    from clusters.kube.gateway import Gateway

    calls = KubeCalls(by_method={})
    original = Gateway._call

    def counting(self: Any, method: str, path: str, **kwargs: Any) -> Any:
        calls.by_method[method] = calls.by_method.get(method, 0) + 1
        return original(self, method, path, **kwargs)

    Gateway._call = counting  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        Gateway._call = original  # type: ignore[method-assign]


def median(values: list[float]) -> float:
    return statistics.median(values)


def load_line() -> str:
    """The load average sentence every section ends with."""
    one, five, _ = os.getloadavg()
    return f"Load average: {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs."


def free_port() -> int:
    """A TCP port free on loopback right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_url(db: int) -> str:
    """``REDIS_URL`` (from ``make bench``'s services) with database number ``db``."""
    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
    return f"{base}/{db}"


def production_env(**overrides: str) -> dict[str, str]:
    """The environment of a production-like process (``DEBUG=0``) on loopback: the
    benchmark database, plain static storage (nothing collected), no TLS redirect."""
    env = dict(os.environ)
    env.update(
        DEBUG="0",
        SECRET_KEY="benchmark-secret-key-that-is-long-and-random-0123456789abcdefgh",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        STATICFILES_STORAGE="django.contrib.staticfiles.storage.StaticFilesStorage",
        SECURE_SSL_REDIRECT="0",
        LOG_LEVEL="WARNING",
    )
    env.update(overrides)
    return env


class Processes:
    """Child processes (gunicorn, Celery) started for one benchmark, stopped together."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.logdir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        import signal

        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def gunicorn_command(port: int, workers: int = 2) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "controlplane.wsgi:application",
        f"--bind=127.0.0.1:{port}",
        f"--workers={workers}",
        "--access-logfile=-" if os.environ.get("BENCH_ACCESS_LOG") else "--error-logfile=-",
    ]


def wait_http(url: str, timeout: float = 60.0) -> None:
    """Wait until ``url`` answers 200."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(0.2)


def percentile(values: list[float], pct: float) -> float:
    """The ``pct`` percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


class CeleryProcess:
    """A real Celery worker (or beat) in its own process group, which can be killed the
    ways a node kills one: SIGKILL of the main process, SIGKILL of one pool child, and
    SIGTERM (Celery's warm shutdown). The engine tests and ``make reliability`` use it.

    ``pool="solo"`` with ``beat=True`` is one process doing everything (the tests' worker);
    ``pool="prefork"`` has children that run the tasks, so a child can die on its own.
    """

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        *,
        pool: str = "solo",
        concurrency: int = 1,
        beat: bool = True,
        role: str = "worker",
    ) -> None:
        self.env = env
        self.log = log
        self.pool = pool
        self.concurrency = concurrency
        self.beat = beat
        self.role = role
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        import uuid

        # A fresh schedule file each start: beat's shelve is not written to survive SIGKILL.
        schedule = Path(self.env["GANGWAY_VAR_DIR"]) / f"beat-{uuid.uuid4().hex}"
        base = [sys.executable, "-m", "celery", "-A", "controlplane"]
        if self.role == "beat":
            return [*base, "beat", "--schedule", str(schedule), "--loglevel", "INFO"]
        command = [*base, "worker", "--pool", self.pool, "--loglevel", "INFO"]
        if self.pool != "solo":
            command += ["--concurrency", str(self.concurrency)]
        if self.beat:
            command += ["-B", "--schedule", str(schedule)]
        command += ["-Q", self.env["CELERY_QUEUE"], "--without-heartbeat"]
        return [*command, "--without-gossip", "--without-mingle"]

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker: no warm shutdown, no chance to ack or requeue anything."""
        import signal

        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def kill_main(self) -> None:
        """SIGKILL only the main process: its pool children lose their parent and, with
        the broker connection gone, stop; they are reaped with the group."""
        import signal

        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            # Children that have not noticed yet would keep running a task twice over.
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def kill_child(self) -> bool:
        """SIGKILL one pool child (the main process starts a new one); ``False`` if none."""
        import signal

        if not self.proc or self.proc.poll() is not None:
            return False
        children = child_pids(self.proc.pid)
        if not children:
            return False
        try:
            os.kill(children[0], signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def terminate(self, timeout: float = 30.0) -> None:
        """SIGTERM (warm shutdown: the running task may finish), then SIGKILL if it hangs."""
        import signal

        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        self.kill()

    def stop(self) -> None:
        import signal

        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def _process_stats() -> Iterator[tuple[str, list[str]]]:
    """``(command name, fields after it)`` of every process's ``/proc/<pid>/stat``:
    ``fields[0]`` is the state (field 3 of proc(5)), so the session (field 6) is
    ``fields[3]`` and utime..cstime (14-17) are ``fields[11:15]``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        yield raw[raw.find("(") + 1 : raw.rfind(")")], raw.rsplit(")", 1)[1].split()


def _cpu_of(fields: list[str]) -> float:
    """User and system CPU seconds of a process and of its children already reaped."""
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def session_cpu_seconds(sessions: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each named process session.

    Every process the benchmark starts leads a session of its own, so a session is one
    part of the product with all its children (gunicorn's and Celery's workers); the time
    of children already reaped is in their parent's ``cutime``/``cstime``.
    """
    used = dict.fromkeys(sessions, 0.0)
    by_session = {sid: name for name, sid in sessions.items()}
    for _, fields in _process_stats():
        name = by_session.get(int(fields[3]))
        if name is not None:
            used[name] += _cpu_of(fields)
    return used


def postgres_cpu_seconds() -> float:
    """CPU seconds (user + system, with reaped children) used so far by every PostgreSQL
    process on this machine: the server is shared, so run nothing else against it while
    measuring."""
    return server_cpu_seconds("postgres")


def server_cpu_seconds(prefix: str) -> float:
    """CPU seconds so far of every process whose command name starts with ``prefix``
    (``postgres``, ``redis-server``): shared servers of this machine."""
    return sum(_cpu_of(fields) for name, fields in _process_stats() if name.startswith(prefix))


def child_pids(pid: int) -> list[int]:
    """The live children of process ``pid`` (read from ``/proc``; Linux only)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may hold spaces; the parent id follows.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return sorted(found)


def engine_env(
    *, database_url: str, kubeconfig: str, queue: str, var_dir: str, **overrides: str
) -> dict[str, str]:
    """The environment of a worker or beat process of the engine: quick periods (a
    reconcile pass every 0.5 s, stale nudges re-sent after 2 s), short Kubernetes
    timeouts, the given database, kubesim and queue."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DATABASE_CONN_MAX_AGE="0",
        KUBECONFIG=kubeconfig,
        CELERY_QUEUE=queue,
        GANGWAY_VAR_DIR=var_dir,
        RECONCILE_INTERVAL_SECONDS="0.5",
        SWEEP_INTERVAL_SECONDS="1",
        SWEEP_STALE_SECONDS="2",
        KUBE_REQUEST_TIMEOUT_SECONDS="5",
        DEBUG="1",
    )
    # As in a deployment, the engine's processes share a cache (a 429's Retry-After,
    # clusters/kube/applied.py): the broker's Redis unless one is given.
    broker = env.get("CELERY_BROKER_URL", "")
    if not env.get("CACHE_URL") and broker.startswith("redis://"):
        env["CACHE_URL"] = broker
    env.update(overrides)
    return env
