"""The lines a Ray driver prints, as its job log and as ``ray job logs --follow`` shows
them: what the dashboard's job logs and a submitter pod's log (``podlogs.py``) share."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubesim.operators.rayruntime import DriverRun

# A log line: the time it was written, its text.
Line = tuple[float, str]


def ray_stamp(t: float) -> str:
    """Ray's Python logging prefix: ``2026-01-02 03:04:05,678``."""
    when = datetime.datetime.fromtimestamp(t, datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{int(t * 1000) % 1000:03d}"


def driver_output(run: DriverRun, address: str, clamp: float, until: float) -> list[Line]:
    """What the driver itself prints by ``until`` (its job log, ``GET /api/jobs/<id>/logs``):
    the connection to the cluster, then a line a second while it runs. ``clamp``: no line
    before it (a reader that attached later sees the earlier lines then)."""
    out: list[Line] = []
    start = run.start
    end = run.end_time(until)
    stop = min(until, end if end is not None else until)
    if until >= start and (run.stopped is None or run.stopped > start):
        t = max(start, clamp)
        p = ray_stamp(start)
        host = address.split("://")[-1].rsplit(":", 1)[0]
        out += [
            (
                t,
                f"{p}\tINFO worker.py:1642 -- Using address {host}:6379 set in the "
                "environment variable RAY_ADDRESS",
            ),
            (
                t,
                f"{p}\tINFO worker.py:1783 -- Connecting to existing Ray cluster at "
                f"address: {host}:6379...",
            ),
            (
                t,
                f"{p}\tINFO worker.py:1959 -- Connected to Ray cluster. View the "
                f"dashboard at {address}",
            ),
        ]
        step = 1
        while start + step <= stop and (end is None or start + step < end):
            at = start + step
            out.append(
                (
                    max(at, clamp),
                    f"[{run.entrypoint or 'driver'}] step {step}: running ({step}s elapsed)",
                )
            )
            step += 1
    return out


def driver_lines(run: DriverRun, address: str, clamp: float, until: float) -> list[Line]:
    """What ``ray job logs --follow`` prints: the driver's output, then the end."""
    out = driver_output(run, address, clamp, until)
    end = run.end_time(until)
    if end is not None and end <= until:
        t = max(end, clamp)
        status = run.status(until)
        rule = "-" * 55
        if status == "SUCCEEDED":
            out += [(t, rule), (t, f"Job '{run.job_id}' succeeded"), (t, rule)]
        elif status == "STOPPED":
            out += [(t, rule), (t, f"Job '{run.job_id}' was stopped"), (t, rule)]
        else:
            out += [(t, rule), (t, f"Job '{run.job_id}' failed"), (t, rule)]
            out += [
                (t, f"Status message: {line}") if i == 0 else (t, line)
                for i, line in enumerate(run.message.splitlines())
            ]
    return out
