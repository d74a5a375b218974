"""Soak: the embedded stack of ``make run`` under steady cluster traffic.

scripts/run.py runs as a newcomer runs it (SQLite, the embedded broker, kubesim, a worker
and beat as separate processes, the web server) in a temporary var/. Three engineers of
the demo tenants, up to two clusters each at a time, create dev clusters through the API, wait
for them to be ready, delete them and wait for them to be gone, over and over, while
beat's reconcile, sweep and admission passes keep the worker busy. At the end every
accepted request has reached its state, no child process has died or logged a
traceback, and no request was refused with a 5xx.

``make test`` runs 75 seconds of traffic; ``SOAK_SECONDS=300`` runs the long version.
The figures are printed (``-s`` shows them); timings are not asserted.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.make_run import MakeRun, http

pytestmark = pytest.mark.slow

SOAK_SECONDS = float(os.environ.get("SOAK_SECONDS", "75"))
ENGINEERS = {"eli": "vision", "ada": "vision", "eve": "speech"}
# The demo tenants allow two dev clusters (and two dev GPUs) per user, and the seed takes
# some: ada's demo service is dev-shaped, and the spill-over scene gives eve one cluster
# (eve-l4-notebook) and emma two GPUs.
SLOTS = {"eli": 2, "ada": 1, "eve": 1}
# Far longer than a cycle takes even on a busy machine: beyond it, a request is lost.
STATE_TIMEOUT = 180.0


@dataclass
class Ledger:
    """What the traffic did, shared by the traffic threads."""

    created: int = 0
    ready: int = 0
    deleted: int = 0
    refused: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    to_ready: list[float] = field(default_factory=list)
    to_gone: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _wait(stack: MakeRun, tenant: str, name: str, token: str, want: str) -> float | None:
    """Seconds until the cluster is ``want`` ("ready", or "gone" once deleted), or None."""
    started = time.monotonic()
    while time.monotonic() - started < STATE_TIMEOUT:
        status, body = http("GET", f"{stack.api}/tenants/{tenant}/clusters/{name}/", token=token)
        if (want == "gone" and status == 404) or (status == 200 and body["state"] == want):
            return time.monotonic() - started
        if status == 200 and body["state"] == "failed":
            return None
        time.sleep(0.5)
    return None


def _traffic(
    stack: MakeRun, user: str, slot: int, token: str, until: float, ledger: Ledger
) -> None:
    tenant = ENGINEERS[user]
    cycle = 0
    while time.monotonic() < until:
        cycle += 1
        name = f"soak-{user}-{slot}-{cycle}"
        status, body = http(
            "POST",
            f"{stack.api}/tenants/{tenant}/clusters/",
            {"name": name, "kind": "dev", "flavor": "h100", "workers": 1},
            token,
        )
        if status != 201:
            with ledger.lock:
                ledger.refused.append(f"create {name}: {status} {body}")
            time.sleep(1)
            continue
        with ledger.lock:
            ledger.created += 1
        took = _wait(stack, tenant, name, token, "ready")
        with ledger.lock:
            if took is None:
                ledger.lost.append(f"{name} never became ready")
            else:
                ledger.ready += 1
                ledger.to_ready.append(took)
        status, body = http("DELETE", f"{stack.api}/tenants/{tenant}/clusters/{name}/", token=token)
        if status != 202:
            with ledger.lock:
                ledger.refused.append(f"delete {name}: {status} {body}")
            continue
        took = _wait(stack, tenant, name, token, "gone")
        with ledger.lock:
            if took is None:
                ledger.lost.append(f"{name} was never deleted")
            else:
                ledger.deleted += 1
                ledger.to_gone.append(took)


def _p(values: list[float], q: float) -> float:
    return sorted(values)[max(0, int(len(values) * q) - 1)] if values else float("nan")


def test_embedded_stack_keeps_every_request_under_steady_traffic(tmp_path: Path) -> None:
    stack = MakeRun(tmp_path)
    try:
        stack.wait_serving()
        children = stack.children()
        tokens = {user: stack.login(user) for user in ENGINEERS}
        ledger = Ledger()
        began = time.monotonic()
        until = began + SOAK_SECONDS
        threads = [
            threading.Thread(target=_traffic, args=(stack, user, slot, tokens[user], until, ledger))
            for user in ENGINEERS
            for slot in range(SLOTS[user])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=SOAK_SECONDS + 4 * STATE_TIMEOUT)
        elapsed = time.monotonic() - began
        live = {
            tenant: http("GET", f"{stack.api}/tenants/{tenant}/clusters/", token=tokens[user])[1]
            for user, tenant in ENGINEERS.items()
        }
        children_after = stack.children()
    finally:
        stack.stop()
    logs = stack.logs()
    crashed = [name for name, text in logs.items() if "Traceback" in text]
    restarts = stack.output.count(" exited with ")
    print(
        f"\nsoak: {elapsed:.0f} s, {ledger.created} clusters requested, {ledger.ready} ready, "
        f"{ledger.deleted} deleted, {len(ledger.lost)} lost, {len(ledger.refused)} refused, "
        f"{restarts} child restarts, logs with a traceback: {crashed or 'none'}; "
        f"request to ready median {statistics.median(ledger.to_ready or [0]):.1f} s "
        f"(p95 {_p(ledger.to_ready, 0.95):.1f} s), delete to gone median "
        f"{statistics.median(ledger.to_gone or [0]):.1f} s; worker ran "
        f"{logs.get('worker', '').count(' succeeded in ')} tasks"
    )
    assert not any(t.is_alive() for t in threads), "traffic still waiting on a request"
    assert ledger.created >= len(threads), "too little traffic to mean anything"
    assert ledger.lost == []
    assert ledger.refused == []
    assert ledger.ready == ledger.created and ledger.deleted == ledger.created
    # Every soak cluster is gone; the seed's own stay.
    left = [c["name"] for body in live.values() for c in body["results"]]
    assert not [name for name in left if name.startswith("soak-")], left
    assert restarts == 0, stack.output
    assert children_after == children, "a child process was replaced"
    assert crashed == [], {name: logs[name][-3000:] for name in crashed}
