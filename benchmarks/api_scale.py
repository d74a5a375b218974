"""The API at 10,000 clusters beside its anchor at 1,000 (issue 51, goal 4).

The tenant of benchmarks/api.py filled with 1,000 clusters (the anchor) and then with
10,000, each served by a fresh gunicorn (2 sync workers) and loaded by 8 keep-alive
clients as there: the list's page of 50, the detail of a cluster with 60 events, and the
create (timed to its headers, then deleted untimed). The sizes alternate for each of
``--runs`` runs (3 by default) so that the machine's other load falls on both; the table
shows each figure's median over the runs, and the per-run p99s. Goals: list and detail
p99 at most 50 ms, create p99 at most 100 ms, at 10,000.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from benchmarks import api, support

SIZES = (api.CLUSTERS, 10_000)
ENDPOINTS = {
    "list, page of 50": 50.0,
    "detail": 50.0,
    "create (then delete, untimed)": 100.0,
}


def _served(db_url: str, port: int, tokens: dict[str, str]) -> dict[str, tuple[float, float]]:
    """(p50, p99) in seconds per endpoint, from one gunicorn over the filled tenant."""
    env = support.production_env(
        DATABASE_URL=db_url,
        CELERY_BROKER_URL=os.environ["CELERY_BROKER_URL"],
        THROTTLE_WRITE="1000000/min",
        DATABASE_CONN_MAX_AGE="600",
    )
    scratch = Path(tempfile.mkdtemp(prefix="gangway-bench-api-scale-"))
    latencies = api.served_latencies(env, scratch, port, tokens, ENDPOINTS)
    return {
        label: (support.median(found), support.percentile(found, 99))
        for label, found in latencies.items()
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def run(argv: list[str] | None = None) -> str:
    """``--runs N``: alternate the two sizes N times; the markdown section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks api_scale")
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args(argv or []).runs
    os.environ["CELERY_BROKER_URL"] = support.redis_url(api.BROKER_DB)
    db_url = support.setup_django("bench_api")
    port = support.free_port()
    seen: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for _ in range(runs):
        for size in SIZES:
            tokens = api._fill(size)
            for label, figures in _served(db_url, port, tokens).items():
                seen.setdefault((size, label), []).append(figures)
    small, large = SIZES
    rows = []
    for label, goal in ENDPOINTS.items():
        anchor, scaled = seen[(small, label)], seen[(large, label)]
        p99_anchor = support.median([p99 for _, p99 in anchor])
        p99_scaled = support.median([p99 for _, p99 in scaled])
        rows.append(
            f"| {label} | {_ms(support.median([p50 for p50, _ in anchor]))} | "
            f"{_ms(p99_anchor)} | {_ms(support.median([p50 for p50, _ in scaled]))} | "
            f"**{_ms(p99_scaled)}** | {p99_scaled / p99_anchor:.2f}x | {goal:.0f} | "
            f"{', '.join(_ms(p99) for _, p99 in scaled)} |"
        )
    return "\n".join(
        [
            f"## API at {large:,} clusters",
            "",
            f"The tenant of *API under gunicorn* with {small:,} clusters (the anchor) and with "
            f"{large:,} (one in {api.QUEUED_EVERY} queued, {api.EVENTS_EACH} events each), "
            f"each size served by a fresh gunicorn with 2 sync workers and loaded by "
            f"{api.CLIENTS} clients for {api.SECONDS:g} s per endpoint; the sizes alternate, "
            f"{runs} runs, medians shown. Goals at {large:,}: list and detail p99 at most "
            "50 ms, create p99 at most 100 ms.",
            "",
            f"| endpoint | p50 ms at {small:,} | p99 ms at {small:,} | p50 ms at {large:,} | "
            f"p99 ms at {large:,} | p99 ratio | goal ms | runs' p99 at {large:,} |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            support.load_line(),
        ]
    )
