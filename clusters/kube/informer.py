"""Informers: a cache of one kind of object, filled by a LIST and kept by a WATCH.

Listing every kind on every pass would encode and decode the same unchanged objects
again and again. An informer lists once, then watches from the list's
``resourceVersion`` (client-go's reflector loop; list again on 410 Gone).
:meth:`Informer.fresh_at` is a time before which every write of the kind is in the
cache; callers acting on an absence compare with it
(:func:`clusters.engine.reconciler._listed_after`). A cache not watching is not used.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clusters.kube.gateway import Gateway, KubeError, WatchExpired

log = logging.getLogger(__name__)

# How long one watch lasts before the server ends it and the informer watches again
# from where it was (the API server picks 30-60 minutes when asked for nothing; shorter
# keeps a half-open connection from hiding for long).
WATCH_SECONDS = 300
# After a failed list or watch, the informer waits this long before trying again,
# doubling up to the cap (client-go's reflector backs off the same way).
BACKOFF_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 10.0
MAX_PROBES = 32

Obj = dict[str, Any]


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass(frozen=True)
class View:
    """What a pass reads of one cache: its objects (the cache's own dicts: read only) and
    the time before which every write of the kind is in them (epoch seconds)."""

    items: list[Obj]
    fresh_at: float


class Informer:
    """One kind (with selectors) listed and watched by a daemon thread; see the module
    docstring. ``on_change`` is called from that thread after each added, modified or
    deleted object (and after a list), so that the caller can start work on it."""

    def __init__(
        self,
        gateway: Gateway,
        api_version: str,
        kind: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.api_version = api_version
        self.kind = kind
        self._gateway = gateway
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._on_change = on_change
        self._cond = threading.Condition()
        self._objects: dict[tuple[str, str], Obj] = {}
        # The version the cache is at ("" until the first list, and after a 410).
        self._version = ""
        self._fresh_at = 0.0
        # When the open watch's server registered it (None: no watch open).
        self._open_since: float | None = None
        # Probes not yet confirmed: (version, when it was read).
        self._probes: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{kind.lower()}", daemon=True
        )
        # For tests and logs: lists made (the first and every 410), watches opened.
        self.lists = 0
        self.watches = 0

    # -- the caller's side --------------------------------------------------------------

    def start(self) -> Informer:
        """Start listing and watching (returns at once)."""
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread (it notices at its next event or the end of its watch; it is
        a daemon, so a process exit never waits for it)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout)

    def wait_for(self, version: str, read_at: float, timeout: float) -> bool:
        """Register the probe (``version`` read at ``read_at``) and wait at most
        ``timeout`` seconds for the cache to reach it; returns whether it did. A probe
        not reached in time may still be confirmed later, by the next event."""
        if not version.isdigit():
            return False
        wanted = int(version)
        deadline = time.monotonic() + timeout
        with self._cond:
            if not self._reached(wanted):
                # A quiet kind confirms its probes only at its next event or bookmark:
                # keep the latest few (a later one confirms what an earlier one would).
                self._probes = [*self._probes[-(MAX_PROBES - 1) :], (wanted, read_at)]
            while not self._reached(wanted):
                left = deadline - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._cond.wait(left)
            self._fresh_at = max(self._fresh_at, read_at)
            return True

    def view(self, *, now: float, grace: float) -> View | None:
        """The cache and how fresh it is, or ``None`` while no watch is open (the
        caller lists instead)."""
        with self._cond:
            if self._open_since is None or not self._version:
                return None
            fresh_at = self._fresh_at
            if self._open_since <= now - grace:
                fresh_at = max(fresh_at, now - grace)
            return View(list(self._objects.values()), fresh_at)

    @property
    def watching(self) -> bool:
        """Whether a watch is open now."""
        with self._cond:
            return self._open_since is not None

    def wait_until_watching(self, timeout: float) -> bool:
        """Wait at most ``timeout`` seconds for the first list and an open watch."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._open_since is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_SECONDS
        while not self._stop.is_set():
            try:
                if not self._version:
                    self._list()
                self._watch()
                backoff = BACKOFF_SECONDS
            except WatchExpired as exc:
                # The server no longer keeps our version: only a new list can tell
                # what happened since.
                log.info("%s: %s; listing again", self._thread.name, exc.message)
                self._closed(reset=True)
            except KubeError as exc:
                log.warning("%s: %s; again in %.1f s", self._thread.name, exc.message, backoff)
                self._closed(reset=False)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_CAP_SECONDS)
            except Exception:  # the thread must outlive any one failure
                log.exception("%s failed; listing again in %.1f s", self._thread.name, backoff)
                self._closed(reset=True)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_CAP_SECONDS)
        self._closed(reset=False)

    def _list(self) -> None:
        began = time.time()
        items, version = self._gateway.list_versioned(
            self.api_version,
            self.kind,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
        )
        with self._cond:
            self._objects = {_key(obj): obj for obj in items}
            self._version = version
            # A list holds every write made before it began.
            self._fresh_at = max(self._fresh_at, began)
            self.lists += 1
            self._confirm()
        self._changed()

    def _watch(self) -> None:
        self.watches += 1
        events = self._gateway.watch(
            self.api_version,
            self.kind,
            resource_version=self._version,
            timeout_seconds=WATCH_SECONDS,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            opened=self._opened,
        )
        try:
            for event in events:
                if self._stop.is_set():
                    return
                self._apply(event)
        finally:
            events.close()
            self._closed(reset=False)

    def _opened(self) -> None:
        with self._cond:
            self._open_since = time.time()
            self._cond.notify_all()

    def _closed(self, *, reset: bool) -> None:
        with self._cond:
            self._open_since = None
            if reset:
                self._version = ""
            self._cond.notify_all()

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion") or ""
        with self._cond:
            if kind in ("ADDED", "MODIFIED"):
                self._objects[_key(obj)] = obj
            elif kind == "DELETED":
                self._objects.pop(_key(obj), None)
            if version:
                self._version = str(version)
            self._confirm()
        if kind != "BOOKMARK":
            self._changed()

    def _reached(self, wanted: int) -> bool:
        return self._version.isdigit() and int(self._version) >= wanted

    def _confirm(self) -> None:
        """Confirm the probes the cache has reached (holding the condition)."""
        if self._probes and self._version.isdigit():
            at = int(self._version)
            reached = [read_at for version, read_at in self._probes if version <= at]
            if reached:
                self._fresh_at = max(self._fresh_at, *reached)
                self._probes = [(v, t) for v, t in self._probes if v > at]
        self._cond.notify_all()

    def _changed(self) -> None:
        if self._on_change is not None:
            try:
                self._on_change()
            except Exception:  # a failed nudge must not stop the watch
                log.exception("%s: on_change failed", self._thread.name)
