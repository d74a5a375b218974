"""A reconcile pass over every member of the fleet, each member's in a thread of its own.

One slow or failing member must never delay the others, so the members' passes run side
by side (threads: a pass mostly waits on its API server) and the fleet pass waits for
them at most ``RECONCILE_MEMBER_WAIT_SECONDS``. A pass still running then goes on alone
(its member is skipped by the next fleet passes until it ends; ``after`` runs when it
does) while the others' next passes start. With one member, or on SQLite, the passes
run in the caller's thread, one after the other.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from django.conf import settings
from django.db import close_old_connections, connection

from clusters.engine import member_health
from clusters.engine.pass_state import Report
from clusters.engine.reconciler import reconcile_exclusive
from clusters.kube.gateway import KubeError
from clusters.models import KubeCluster

log = logging.getLogger(__name__)

After = Callable[[str, Report], None]  # the member's name, its pass's report


@dataclass
class FleetPass:
    """What one fleet pass saw: each member's report (finished in time), the members
    whose pass was already running or still runs (``busy``), and those that failed."""

    reports: dict[str, Report] = field(default_factory=dict)
    busy: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


_lock = threading.Lock()
_running: dict[str, Future[Report | None]] = {}
# Members asked for while their pass was still running: it asks again when it ends.
_again: set[str] = set()
_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """The threads members' passes run in, for the life of the process (made again in
    a forked child, which has none of its parent's)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _running.clear()
        _POOL = (os.getpid(), ThreadPoolExecutor(thread_name_prefix="member-pass"))
    return _POOL[1]


def member_pass(member: KubeCluster) -> Report | None:
    """One pass over ``member`` (``None``: another was running), its outcome recorded
    on the member (:mod:`.member_health`). A pass that could not run raises its
    :class:`KubeError`."""
    try:
        report = reconcile_exclusive(member=member)
    except KubeError as exc:
        marked = member_health.pass_failed(member, exc.message)
        if marked:
            log.warning("member %s marked unreachable: %s", member.name, exc)
        raise
    if report is not None:
        member_health.pass_succeeded(member)
    return report


def reconcile_fleet(after: After, ask_again: Callable[[], object]) -> FleetPass:
    """A pass over every member (see the module docstring). ``after`` is called with each
    member's name and report, in the thread that made it; ``ask_again`` when a member that was
    busy ends its pass, so that the nudge that found it busy is not lost."""
    members = list(KubeCluster.objects.all())
    outcome = FleetPass()
    if len(members) <= 1 or connection.vendor != "postgresql":
        for member in members:
            _inline(member, after, outcome)
        return outcome
    futures: dict[str, Future[Report | None]] = {}
    pool = _pool()
    with _lock:
        for member in members:
            running = _running.get(member.name)
            if running is not None and not running.done():
                outcome.busy.append(member.name)
                _again.add(member.name)
                continue
            futures[member.name] = _running[member.name] = pool.submit(
                _threaded, member.pk, after, ask_again
            )
    wait(futures.values(), timeout=float(settings.RECONCILE_MEMBER_WAIT_SECONDS))
    for name, future in futures.items():
        if not future.done():
            outcome.busy.append(name)
            continue
        error = future.exception()
        if error is not None:
            outcome.failed[name] = getattr(error, "message", str(error))
            continue
        report = future.result()
        if report is None:
            outcome.busy.append(name)
        else:
            outcome.reports[name] = report
    return outcome


def wait_for_passes(timeout: float) -> bool:
    """Wait for the members' passes still running in this process; returns whether
    they all ended (tests, and a worker's shutdown)."""
    with _lock:
        running = [f for f in _running.values() if not f.done()]
    _, pending = wait(running, timeout=timeout)
    return not pending


def _inline(member: KubeCluster, after: After, outcome: FleetPass) -> None:
    try:
        report = member_pass(member)
    except KubeError as exc:
        outcome.failed[member.name] = exc.message
        return
    if report is None:
        outcome.busy.append(member.name)
        return
    outcome.reports[member.name] = report
    after(member.name, report)


def _threaded(member_id: int, after: After, ask_again: Callable[[], object]) -> Report | None:
    """A member's pass in a pool thread, with the thread's own database connection."""
    close_old_connections()
    member = KubeCluster.objects.filter(pk=member_id).first()
    try:
        if member is None:
            return None  # removed from the fleet meanwhile
        report = member_pass(member)
        if report is not None:
            after(member.name, report)
        return report
    except KubeError as exc:  # recorded on the member (member_health)
        log.warning("reconcile pass over member %s failed: %s", member_id, exc.message)
        raise
    except Exception:
        log.exception("reconcile pass over member %s failed", member_id)
        raise
    finally:
        with _lock:
            again = member is not None and member.name in _again
            if again:
                _again.discard(member.name)  # type: ignore[union-attr]
        if again:
            try:
                ask_again()
            except Exception:  # beat's pass comes anyway
                log.exception("asking for another pass over %s failed", member_id)
        connection.close()
