"""N client threads loading one call for a fixed time after a warm-up, each with its own
keep-alive session: what the API and service endpoint benchmarks share."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.http_session import HttpSession


@dataclass
class LoadRun:
    """What :func:`timed_load` measured: the latencies taken after the warm-up, the
    wall time they were taken in, and every call made (the warm-up's included)."""

    latencies: list[float]
    wall: float
    calls: int


def timed_load(
    clients: int,
    seconds: float,
    warmup: float,
    session: Callable[[], HttpSession],
    timed: Callable[[HttpSession], float],
) -> LoadRun:
    """``clients`` threads, each with its own ``session()``, calling ``timed(session)``
    (which returns one call's seconds, or raises) without pause for ``warmup`` and then
    ``seconds``; the first error of any thread is raised."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    calls = [0] * clients
    errors: list[Exception] = []
    barrier = threading.Barrier(clients + 1)
    phase = {"measure": False, "stop": False}

    def client(index: int) -> None:
        own = session()
        try:
            barrier.wait()
            while not phase["stop"]:
                took = timed(own)
                calls[index] += 1
                if phase["measure"]:
                    latencies[index].append(took)
        except Exception as exc:  # noqa: BLE001 - re-raised by the main thread
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    time.sleep(warmup)
    phase["measure"] = True
    start = time.perf_counter()
    time.sleep(seconds)
    phase["stop"] = True
    wall = time.perf_counter() - start
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return LoadRun([v for values in latencies for v in values], wall, sum(calls))
