"""The embedded broker of ``make run`` (controlplane/embedded_broker.py) on a real SQLite
file, driven by real producer and consumer processes (tests/controlplane/broker_peer.py):
a process killed mid-publish or mid-consume never leaves a partial message behind, and
processes starting together on a fresh file do not trip over each other."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER = [sys.executable, "-m", "tests.controlplane.broker_peer"]
pytestmark = pytest.mark.slow


def _peer(
    role: str, url: str, out: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with out.open("ab") as sink, (out.parent / f"{out.name}.err").open("ab") as err:
        return subprocess.Popen(
            [*PEER, role, url, *extra],
            cwd=ROOT,
            stdout=sink,
            stderr=err,
            env={**os.environ, **(env or {})},
        )


def _lines(path: Path, pattern: str) -> list[str]:
    if not path.exists():
        return []
    return [m.group(1) for m in re.finditer(pattern, path.read_text(), flags=re.MULTILINE)]


def _until_publishing(produced: Path, before: int) -> None:
    """Wait until a new producer has published once, so that killing it hits publishing
    (and not its import of Kombu)."""
    deadline = time.monotonic() + 60
    while len(_lines(produced, r"^([0-9a-f]{32})$")) == before:
        assert time.monotonic() < deadline, "the producer never published"
        time.sleep(0.05)


def test_killed_producers_and_consumers_never_leave_a_partial_message(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'broker.sqlite3'}"
    produced, consumed = tmp_path / "produced", tmp_path / "consumed"
    rng = random.Random(7)
    producer_kills = consumer_kills = 0
    consumer = _peer("consume", url, consumed)
    for round_ in range(8):
        before = len(_lines(produced, r"^([0-9a-f]{32})$"))
        producer = _peer("produce", url, produced)
        _until_publishing(produced, before)
        time.sleep(rng.uniform(0.0, 0.5))
        producer.kill()  # SIGKILL, very likely in the middle of a publish
        producer.wait()
        producer_kills += 1
        if round_ % 2 == 1 and consumer.poll() is None:
            consumer.kill()  # SIGKILL, possibly between taking a message and printing it
            consumer.wait()
            consumer_kills += 1
        if consumer.poll() is not None:
            consumer = _peer("consume", url, consumed)
    consumer.wait(timeout=120)  # drains the queue, then exits once it stays empty
    drain = _peer("consume", url, consumed)
    assert drain.wait(timeout=60) == 0

    errors = "".join(p.read_text() for p in tmp_path.glob("*.err"))
    assert "Traceback" not in errors, errors
    confirmed = set(_lines(produced, r"^([0-9a-f]{32})$"))
    taken = _lines(consumed, r"^ok ([0-9a-f]{32})$")
    assert _lines(consumed, r"^bad (\w+)$") == []
    assert len(taken) == len(set(taken)), "a message was delivered twice"
    assert len(confirmed) >= 20, f"too little traffic to mean anything: {len(confirmed)}"
    # A killed consumer loses at most the one message it had taken (the sweeper re-sends
    # the nudge in the product); a killed producer may have committed one message it
    # never got to print. Anything beyond that would be a lost or invented message.
    assert len(confirmed - set(taken)) <= consumer_kills
    assert len(set(taken) - confirmed) <= producer_kills


def test_processes_starting_together_on_a_fresh_file_all_publish(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'broker.sqlite3'}"
    outs = [tmp_path / f"produced-{i}" for i in range(6)]
    start_at = str(time.time() + 15)  # after every producer has imported Kombu
    producers = [_peer("produce", url, out, "20", env={"PEER_START_AT": start_at}) for out in outs]
    codes = [p.wait(timeout=120) for p in producers]
    errors = "".join(p.read_text() for p in tmp_path.glob("*.err"))
    assert codes == [0] * 6, errors
    consumer = _peer("consume", url, tmp_path / "consumed")
    assert consumer.wait(timeout=120) == 0
    confirmed = {line for out in outs for line in _lines(out, r"^([0-9a-f]{32})$")}
    taken = _lines(tmp_path / "consumed", r"^ok ([0-9a-f]{32})$")
    assert len(confirmed) == 120
    assert sorted(taken) == sorted(confirmed)
