"""The embedded broker against Kombu's filesystem transport it replaced, through Celery.

For each broker a real ``celery worker --pool solo`` (flags as ``make run`` gives them) runs
a task that records how long after its sending it started. Latency: tasks sent one at a
time, 0.2-0.5 s apart, to an idle worker (how long a nudge such as "a cluster was
requested" waits). Throughput: 1,000 tasks published as fast as one process can, until the
worker has started them all. Needs no server. This module is also its worker's Celery app
(``celery -A benchmarks.embedded_broker``), configured from ``BENCH_BROKER`` and ``BENCH_DIR``.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from celery import Celery

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "bench"
LATENCY_SAMPLES = 40
THROUGHPUT_TASKS = 1000

# name -> (broker URL, transport options); {dir} is the run's scratch folder.
BROKERS: dict[str, tuple[str, dict[str, object]]] = {
    "filesystem, 1 s poll (before)": (
        "filesystem://",
        {"data_folder_in": "{dir}", "data_folder_out": "{dir}", "control_folder": "{dir}"},
    ),
    "filesystem, 0.1 s poll": (
        "filesystem://",
        {
            "data_folder_in": "{dir}",
            "data_folder_out": "{dir}",
            "control_folder": "{dir}",
            "polling_interval": 0.1,
        },
    ),
    "embedded SQLite, 0.1 s poll (now)": (
        "sqlite:///{dir}/broker.sqlite3",
        {"polling_interval": 0.1},
    ),
}


def _configure(app: Celery, name: str, scratch: str) -> None:
    """The settings make run gives Celery, on broker ``name`` in folder ``scratch``."""
    url, options = BROKERS[name]
    app.conf.update(
        broker_url=url.format(dir=scratch),
        broker_transport_options={
            key: value.format(dir=scratch) if isinstance(value, str) else value
            for key, value in options.items()
        },
        broker_transport=(
            "controlplane.embedded_broker:Transport" if url.startswith("sqlite:") else None
        ),
        task_default_queue=QUEUE,
        task_ignore_result=True,
        task_acks_late=True,
        worker_prefetch_multiplier=1,
        worker_enable_remote_control=False,
    )


app = Celery("bench")
if os.environ.get("BENCH_BROKER"):
    _configure(app, os.environ["BENCH_BROKER"], os.environ["BENCH_DIR"])


@app.task(name="bench.stamp")
def stamp(sent: float) -> None:
    """Record how long after ``sent`` this task started (one line, one write)."""
    line = f"{time.time() - sent:.6f}\n".encode()
    fd = os.open(Path(os.environ["BENCH_DIR"]) / "started", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _started(scratch: Path) -> list[float]:
    path = scratch / "started"
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def _wait_for(scratch: Path, count: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while len(_started(scratch)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(_started(scratch))} of {count} tasks started")
        time.sleep(0.02)
    return time.monotonic()


CELERY = [sys.executable, "-m", "celery", "-A", "benchmarks.embedded_broker"]
WORKER_FLAGS = ["--pool", "solo", "--loglevel", "WARNING", "--without-mingle"]
WORKER_FLAGS += ["--without-gossip", "--without-heartbeat"]


def _measure(name: str) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        # Celery prefers CELERY_BROKER_URL from the environment over its configuration,
        # and make bench exports one (Redis, for the other benchmarks); the worker
        # inherits this environment.
        os.environ.pop("CELERY_BROKER_URL", None)
        os.environ.update(BENCH_BROKER=name, BENCH_DIR=tmp)
        _configure(app, name, tmp)
        with (scratch / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [*CELERY, "worker", "-Q", QUEUE, *WORKER_FLAGS],
                cwd=tmp,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        latencies = [float("nan")]
        began = published = done = time.monotonic()
        outcome = "ok"
        try:
            stamp.delay(time.time())  # warm up: the worker is up once this one starts
            _wait_for(scratch, 1, timeout=120)
            (scratch / "started").unlink()
            for _ in range(LATENCY_SAMPLES):
                time.sleep(random.uniform(0.2, 0.5))
                stamp.delay(time.time())
            _wait_for(scratch, LATENCY_SAMPLES, timeout=60)
            latencies = sorted(_started(scratch))
            (scratch / "started").unlink()

            began = time.monotonic()
            for _ in range(THROUGHPUT_TASKS):
                stamp.delay(time.time())
            published = time.monotonic()
            done = _wait_for(scratch, THROUGHPUT_TASKS, timeout=600)
        except RuntimeError as exc:
            outcome = f"failed: {exc}"
        finally:
            worker.terminate()
            worker.wait(timeout=30)
        errors = re.findall(
            r"^(\w[\w.]*(?:Error|Exception)): ", (scratch / "worker.log").read_text(), re.M
        )
        if errors:
            outcome += f" (worker error: {errors[-1]})"
        elapsed = done - began if outcome == "ok" else math.nan
        return {
            "median": statistics.median(latencies) * 1000,
            "p95": latencies[int(len(latencies) * 0.95) - 1] * 1000,
            "max": latencies[-1] * 1000,
            "publish": THROUGHPUT_TASKS / (published - began) if published > began else math.nan,
            "through": THROUGHPUT_TASKS / elapsed if elapsed > 0 else math.nan,
            "outcome": outcome,
        }


def _rate(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:,.0f}/s"


def run() -> str:
    rows = []
    for name in BROKERS:
        # One process per broker: a Celery app keeps its first broker's connection pool.
        measured = subprocess.run(
            [sys.executable, "-m", "benchmarks.embedded_broker", name],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        m = json.loads(measured.stdout.strip().splitlines()[-1])
        rows.append(
            f"| {name} | {m['median']:.0f} ms | {m['p95']:.0f} ms | {m['max']:.0f} ms | "
            f"{_rate(m['publish'])} | {_rate(m['through'])} | {m['outcome']} |"
        )
    load = os.getloadavg()[0]
    return "\n".join(
        [
            "## Embedded broker (`make run`) against the filesystem transport it replaced",
            "",
            "A real Celery worker (`--pool solo`, as `make run` starts it) runs a task that "
            "records how long after its sending it started. Latency: "
            f"{LATENCY_SAMPLES} tasks sent one at a time to an idle worker. Throughput: "
            f"{THROUGHPUT_TASKS:,} tasks published back to back by one process, and the rate "
            "until the worker has started them all.",
            "",
            "| broker | latency median | p95 | max | publish | publish to started | outcome |",
            "|---|---:|---:|---:|---:|---:|---|",
            *rows,
            "",
            f"Load average at the end: {load:.1f} on {os.cpu_count()} CPUs.",
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(json.dumps(_measure(sys.argv[1])))
    else:
        print(run())
