"""The reconciler's informers: a watched cache of every kind a pass reads, per member of
the fleet, kept for the life of the worker process (:mod:`clusters.kube.informer`).

A pass waits a moment for the caches to reach the API server's current version
(``RECONCILE_WATCH_WAIT_SECONDS``) and reads them instead of listing; a kind without an
open watch is listed. Every change asks for a pass (coalesced,
``RECONCILE_WATCH_NUDGE_SECONDS`` apart), so passes follow the cluster, not beat's
period. ``RECONCILE_WATCH`` off: every pass lists (the in-process tests, which check a
pass's outcome right after writing).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import close_old_connections, connection

from clusters.engine.member_scope import MemberScope
from clusters.kube.connection import own_gateway_for
from clusters.kube.gateway import Gateway, own_gateway
from clusters.kube.informer import Informer, View
from clusters.rows import enqueue

log = logging.getLogger(__name__)


class _Nudger:
    """Asks for a reconcile pass after changes, at most once every ``interval`` seconds
    (its own thread: a watch must not wait on the database)."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="informer-nudge", daemon=True)
        self.sent = 0

    def start(self) -> _Nudger:
        self._thread.start()
        return self

    def poke(self) -> None:
        """A cache changed (called from the informers' threads)."""
        self._wanted.set()

    def stop(self) -> None:
        self._stop.set()
        self._wanted.set()

    def _run(self) -> None:
        if current_app.conf.task_always_eager:
            return  # a nudge would run the pass right here, in this thread
        try:
            while not self._stop.is_set():
                self._wanted.wait()
                if self._stop.is_set():
                    return
                # The changes of the next moments share this pass.
                self._stop.wait(self._interval)
                self._wanted.clear()
                self._nudge()
        finally:
            connection.close()  # this thread's own

    def _nudge(self) -> None:
        try:
            close_old_connections()
            if enqueue.request_pass(enqueue.RECONCILE):
                self.sent += 1
        except Exception:  # a lost nudge only waits for beat's pass
            log.exception("informer nudge failed")


class Caches:
    """The informers of one process and member, by the name a pass reads them under."""

    def __init__(self, kinds: dict[str, tuple[str, str, dict[str, Any]]], gateway: Gateway) -> None:
        self.gateway = gateway
        nudge_every = float(settings.RECONCILE_WATCH_NUDGE_SECONDS)
        self.nudger = _Nudger(nudge_every).start() if nudge_every > 0 else None
        poke = self.nudger.poke if self.nudger is not None else None
        self.informers = {
            what: Informer(self.gateway, api_version, kind, on_change=poke, **selectors).start()
            for what, (api_version, kind, selectors) in kinds.items()
        }

    def read(self, gw: Gateway) -> dict[str, View]:
        """The caches whose watch is open, each waited for (a moment, in all) to reach
        the API server's version as of now; the others are left out (listed instead)."""
        read_at = time.time()
        version = gw.current_version()
        deadline = time.monotonic() + float(settings.RECONCILE_WATCH_WAIT_SECONDS)
        for informer in self.informers.values():
            if informer.watching:
                informer.wait_for(version, read_at, max(deadline - time.monotonic(), 0.0))
        now = time.time()
        grace = float(settings.RECONCILE_WATCH_GRACE_SECONDS)
        views = {what: inf.view(now=now, grace=grace) for what, inf in self.informers.items()}
        return {what: view for what, view in views.items() if view is not None}

    def stop(self) -> None:
        if self.nudger is not None:
            self.nudger.stop()
        for informer in self.informers.values():
            informer.stop(timeout=0)


# One set of informers per member ("": settings' cluster), each with its own watches.
_CACHES: dict[str, tuple[tuple[Any, ...], Caches]] = {}
_lock = threading.Lock()


def caches(
    kinds: dict[str, tuple[str, str, dict[str, Any]]], scope: MemberScope | None = None
) -> Caches | None:
    """This process's caches of ``kinds`` in ``scope``'s member (started on first use,
    made again in a forked child and when the member's address or credentials change),
    or ``None`` when passes list."""
    scope = scope or MemberScope(None, True)
    member = scope.member
    if member is None or member.from_settings:
        key: tuple[Any, ...] = (str(settings.KUBECONFIG), os.getpid())
    else:
        key = (member.server, member.credentials_changed_at, os.getpid())
    with _lock:
        cached = _CACHES.get(scope.name)
        if cached is not None and (cached[0] != key or not settings.RECONCILE_WATCH):
            if cached[0][-1] == os.getpid():
                cached[1].stop()  # a forked child has no threads of its parent's to stop
            del _CACHES[scope.name]
            cached = None
        if not settings.RECONCILE_WATCH:
            return None
        if cached is None:
            gateway = own_gateway() if member is None else own_gateway_for(member)
            cached = _CACHES[scope.name] = (key, Caches(kinds, gateway))
        return cached[1]


def stop() -> None:
    """Stop this process's informers (tests, and a worker child's exit)."""
    with _lock:
        for key, caches_of in _CACHES.values():
            if key[-1] == os.getpid():
                caches_of.stop()
        _CACHES.clear()
