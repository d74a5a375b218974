"""Simulated drivers that checkpoint periodically (``kubesim.io/job-checkpoint:
every-<n>s``, ``kubesim/operators/raycheckpoint.py``): each ``n`` seconds of work they
report ``sim://<job>/step-<done>`` to ``GANGWAY_PREEMPTION_URL`` over real HTTP, and
started with ``GANGWAY_RESUME_FROM`` they run only the work left. Time is a ManualClock."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubesim_helpers import rayjob

from kubesim import KubeSim
from kubesim.clock import ManualClock
from tests.kubesim import manual_clock

clock = manual_clock.clock
sim = manual_clock.sim
advance = manual_clock.advance

NS = "default"


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A notice endpoint that records each checkpoint POSTed to it: (its URL, the
    (path, uri) pairs received)."""
    received: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append((self.path, body["uri"]))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/api/v1/preemption/tok/", received
    finally:
        server.shutdown()
        server.server_close()


def _eventually(predicate: Callable[[], bool], what: str) -> None:
    """Wait for the reports' threads (they post off the simulator's lock)."""
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _job(name: str, url: str, resume: str = "") -> dict[str, Any]:
    """A 10-second RayJob whose driver checkpoints every 3 s, told where to report (and
    what to resume from) in its runtime env, as gangway writes them."""
    env = {"GANGWAY_PREEMPTION_URL": url}
    if resume:
        env["GANGWAY_RESUME_FROM"] = resume
    return rayjob(
        name,
        annotations={
            "kubesim.io/job-run-seconds": "10",
            "kubesim.io/job-pending-seconds": "0",
            "kubesim.io/job-checkpoint": "every-3s",
        },
        runtimeEnvYAML=json.dumps({"env_vars": env}),
    )


def _create(s: KubeSim, body: dict[str, Any]) -> None:
    with s.cluster.lock:
        s.cluster.create_object(s.cluster.rt("rayjobs.ray.io"), body)
        s.cluster.settle()


def _status(s: KubeSim, name: str) -> str:
    return str((s.get("rayjobs.ray.io", NS, name) or {}).get("status", {}).get("jobStatus"))


def test_a_periodic_driver_reports_each_step_and_resumes_from_one(
    sim: KubeSim, clock: ManualClock, endpoint: tuple[str, list[tuple[str, str]]]
) -> None:
    url, received = endpoint
    _create(sim, _job("first", url))
    (run,) = sim.cluster.rayruntime.checkpointing_runs
    assert (run.every, run.resumed_step, run.remaining()) == (3.0, 0.0, 10.0)
    for _ in range(4):
        advance(sim, clock, 1)
    # 4 s of work: one step (3) reached.
    assert run.reported == ["sim://first/step-3"]
    for _ in range(7):
        advance(sim, clock, 1)
    assert _status(sim, "first") == "SUCCEEDED"
    # Steps 3, 6 and 9; none at the end (the work is done: nothing to resume).
    assert run.reported == ["sim://first/step-3", "sim://first/step-6", "sim://first/step-9"]
    _eventually(lambda: len(received) == 3, "three reports over HTTP")
    assert received == [("/api/v1/preemption/tok/checkpoint/", u) for u in run.reported]

    # A clock that jumps past several steps reports only the newest.
    _create(sim, _job("resumed", url, resume="sim://first/step-6"))
    second = sim.cluster.rayruntime.checkpointing_runs[1]
    assert (second.resumed_step, second.remaining()) == (6.0, 4.0)
    advance(sim, clock, 0.5)
    advance(sim, clock, 3)
    # From step 6, 3.5 s of work: step 9 reached, then the run ends at 4 s (10 in all).
    assert second.reported == ["sim://resumed/step-9"]
    advance(sim, clock, 1)
    assert _status(sim, "resumed") == "SUCCEEDED"
    assert second.reported == ["sim://resumed/step-9"]


def test_the_knob_refuses_what_it_does_not_know(sim: KubeSim) -> None:
    for bad in ("every-0s", "every-3", "every-1.5s", "hourly"):
        with pytest.raises(ValueError, match="every-<n>s"):
            sim.set_rayjob_defaults(checkpoint=bad)
    sim.set_rayjob_defaults(checkpoint="every-30s")
    assert sim.cluster.rayjob_defaults.checkpoint == "every-30s"
