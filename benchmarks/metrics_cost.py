"""What the metrics cost the API: the cluster list's p99 with metrics on and off.

The tenant of benchmarks/api.py, served by gunicorn with 2 workers as there, in turns:
*on* as production runs it (the per-route latency middleware, ``REQUEST_METRICS=1``, and
the multi-process files, ``PROMETHEUS_MULTIPROC_DIR``), *off* with neither. The turns
alternate (on, off, on, off) so that the machine's other load falls on both alike; each
endpoint is loaded as in benchmarks/api.py. The order flips each round (on-off, off-on) so
that neither arm always meets a warmer machine. The goal: p99 grows by at most 5%.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from benchmarks import api, support

TURNS = 4
ENDPOINTS = ("list, page of 50", "detail")


def _turn(db_url: str, port: int, tokens: dict[str, str], *, on: bool) -> dict[str, list[float]]:
    """Latencies per endpoint of one gunicorn started with metrics ``on`` or off."""
    scratch = Path(tempfile.mkdtemp(prefix="gangway-bench-metrics-"))
    env = support.production_env(
        DATABASE_URL=db_url,
        CELERY_BROKER_URL=os.environ["CELERY_BROKER_URL"],
        DATABASE_CONN_MAX_AGE="600",
        REQUEST_METRICS="1" if on else "0",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if on:
        (scratch / "multiproc").mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(scratch / "multiproc")
    return api.served_latencies(env, scratch, port, tokens, ENDPOINTS)


def _spread(values: list[float]) -> str:
    """``low to high`` of ``values`` in milliseconds."""
    return f"{min(values) * 1000:.1f} to {max(values) * 1000:.1f}"


def run() -> str:
    """Fill the tenant once, then alternate metrics on and off; the markdown section."""
    os.environ["CELERY_BROKER_URL"] = support.redis_url(api.BROKER_DB)
    db_url = support.setup_django("bench_api")
    tokens = api._fill()
    port = support.free_port()
    latencies: dict[tuple[str, bool], list[float]] = {}
    turn_p99s: dict[tuple[str, bool], list[float]] = {}
    for round_ in range(TURNS):
        for on in (True, False) if round_ % 2 == 0 else (False, True):
            for label, values in _turn(db_url, port, tokens, on=on).items():
                latencies.setdefault((label, on), []).extend(values)
                turn_p99s.setdefault((label, on), []).append(support.percentile(values, 99))
    rows = []
    for label in ENDPOINTS:
        on, off = latencies[(label, True)], latencies[(label, False)]
        p99_on, p99_off = support.percentile(on, 99), support.percentile(off, 99)
        rows.append(
            f"| {label} | {support.median(off) * 1000:.1f} | {support.median(on) * 1000:.1f} | "
            f"{p99_off * 1000:.1f} | {p99_on * 1000:.1f} | {(p99_on / p99_off - 1) * 100:+.1f}% | "
            f"{_spread(turn_p99s[(label, False)])} | {_spread(turn_p99s[(label, True)])} |"
        )
    return "\n".join(
        [
            "## What the metrics cost the API",
            "",
            f"The API benchmark's tenant and load ({api.CLIENTS} clients, {api.SECONDS:g} s per "
            f"endpoint per turn), gunicorn with 2 workers, {TURNS} turns each of metrics on "
            "(`REQUEST_METRICS=1`, `PROMETHEUS_MULTIPROC_DIR` set, as production) and off, "
            "alternating, the order flipped each round. "
            "Goal: p99 at most 5% higher with metrics on. "
            "The last two columns are the range of each turn's own p99: how far turns of the "
            "same arm differ, the noise the change must be read against.",
            "",
            "| endpoint | p50 off ms | p50 on ms | p99 off ms | p99 on ms | p99 change "
            "| turns' p99 off ms | turns' p99 on ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            support.load_line(),
        ]
    )
