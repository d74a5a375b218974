"""The WATCH verb: a stream of ADDED / MODIFIED / DELETED / BOOKMARK / ERROR events, as
the API server's watch cache serves it. :func:`parse_options` checks the query first; a
:class:`WatchStream` is positioned in the store's history (``store.py``) and encodes its
kind's matching changes, with the lock held. Modelled: initial ADDED events, 410 and
too-new resourceVersions, selectors on old and new state, bookmarks, WatchList and Table
output. The controllers change some objects in place before writing them again, so such
a change is merged into the later one (ADDED then MODIFIED arrives as one ADDED);
versions only grow and nothing after a client's position is skipped, so resuming from
any event misses nothing.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim import errors, fieldlabels, tables, verbs
from kubesim.resources import ResourceType
from kubesim.store import (
    ADDED,
    DELETED,
    MODIFIED,
    Change,
    Obj,
    Requirement,
    SelectorError,
    matches,
    parse_field_selector,
    parse_label_selector,
)

if TYPE_CHECKING:
    from kubesim.cluster import Cluster

# kube-apiserver's --min-request-timeout: a watch without timeoutSeconds is closed after a
# random time between one and two times this (30 to 60 minutes), so that clients spread
# their re-watches.
MIN_REQUEST_TIMEOUT = 1800.0
# The watch cache's bookmarkFrequency: a watch that allows bookmarks gets one a minute.
DEFAULT_BOOKMARK_INTERVAL = 60.0
# The cacher schedules a last bookmark this long before a watch's deadline.
BOOKMARK_BEFORE_TIMEOUT = 2.0
# How long a watch from a resourceVersion the store has not reached waits for it (the
# watch cache's blockTimeout) before it is answered "Too large resource version".
TOO_LARGE_WAIT = 3.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# strconv.ParseBool's spellings of true, which the API server's query decoding uses.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

Ref = tuple[str, str]  # (namespace, name) of an object of the watched kind


def is_watch(params: dict[str, str]) -> bool:
    """Does the query ask for a watch (``watch=true``, ``watch=1``, ...)?"""
    return params.get("watch", "") in _TRUE


@dataclass
class WatchOptions:
    """A watch request's query, checked."""

    resource_version: int | None  # None: unset or "0" (start from now)
    label_selector: str
    labels: list[Requirement]
    fields: list[tuple[str, str, str]]  # converted to paths (fieldlabels)
    timeout: float  # seconds until the server closes the stream
    bookmarks: bool  # allowWatchBookmarks
    initial_events: bool  # send the current objects as ADDED first
    initial_events_end: bool  # then a BOOKMARK marking their end (WatchList)

    @property
    def selective(self) -> bool:
        """Does a selector restrict the watch (so that events need old and new state)?"""
        return bool(self.labels or self.fields)


def _flag(params: dict[str, str], name: str) -> bool | None:
    """A boolean query parameter as the API server decodes it; None when absent."""
    if name not in params:
        return None
    value = params[name]
    if value in _TRUE:
        return True
    if value in _FALSE or value == "":
        return False
    raise errors.bad_request(f'{name}: Invalid value: "{value}": invalid syntax')


def _validate_watch_list(send_initial: bool | None, match: str, cont: str) -> list[errors.Cause]:
    """``validateWatchOptions`` of the API server (WatchList feature gate on)."""
    causes = []
    if send_initial is not None and match != "NotOlderThan":
        causes.append(
            errors.Cause(
                "resourceVersionMatch",
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                "NotOlderThan",
            )
        )
    if match:
        if send_initial is None:
            causes.append(
                errors.Cause(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless "
                    "sendInitialEvents is provided",
                )
            )
        if match != "NotOlderThan":
            causes.append(
                errors.Cause(
                    "resourceVersionMatch",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{match}": supported values: "NotOlderThan"',
                )
            )
        if cont:
            causes.append(
                errors.Cause(
                    "resourceVersionMatch",
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden when continue is provided",
                )
            )
    return causes


def _timeout(params: dict[str, str], rng: random.Random) -> float:
    """``timeoutSeconds``, or the API server's random 30 to 60 minutes when unset or 0."""
    text = params.get("timeoutSeconds") or "0"
    try:
        seconds = int(text)
    except ValueError:
        raise errors.bad_request(
            f'timeoutSeconds: Invalid value: "{text}": invalid syntax'
        ) from None
    if seconds > 0:
        return float(seconds)
    return MIN_REQUEST_TIMEOUT * (1.0 + rng.random())


def parse_options(
    rt: ResourceType, params: dict[str, str], rng: random.Random | None = None
) -> WatchOptions:
    """Check a watch request's query in the API server's order, before anything is sent:
    the WatchList rules (422 Invalid on ``ListOptions.meta.k8s.io``), the selectors (400,
    the field labels the kind supports, as for list), the resourceVersion (400 unless an
    integer)."""
    send_initial = _flag(params, "sendInitialEvents")
    match = params.get("resourceVersionMatch", "")
    rv_text = params.get("resourceVersion", "")
    # SetListOptionsDefaults: with WatchList on, a watch from "now" is a WatchList.
    if send_initial is None and not match and rv_text in ("", "0"):
        send_initial, match = True, "NotOlderThan"
    causes = _validate_watch_list(send_initial, match, params.get("continue", ""))
    if causes:
        raise errors.invalid("ListOptions", "meta.k8s.io", "", causes)
    try:
        labels = parse_label_selector(params.get("labelSelector"))
        fields = fieldlabels.convert(rt, parse_field_selector(params.get("fieldSelector")))
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from exc
    if rv_text in ("", "0"):
        resource_version = None
    else:
        try:
            resource_version = int(rv_text)
            if resource_version < 0:
                raise ValueError
        except ValueError:
            raise errors.bad_request(
                f'resourceVersion: Invalid value: "{rv_text}": strconv.ParseUint: '
                f'parsing "{rv_text}": invalid syntax'
            ) from None
    bookmarks = bool(_flag(params, "allowWatchBookmarks"))
    return WatchOptions(
        resource_version=resource_version,
        label_selector=params.get("labelSelector") or "",
        labels=labels,
        fields=fields,
        timeout=_timeout(params, rng or random.Random()),
        bookmarks=bookmarks,
        initial_events=bool(send_initial),
        # The cacher marks the end of the initial events only for a client that allows
        # bookmarks (isListWatchRequest).
        initial_events_end=bool(send_initial) and bookmarks,
    )


def next_bookmark(now: float, deadline: float, interval: float) -> float:
    """When the next BOOKMARK is due (2 s before ``deadline`` at the latest; ``inf``: past)."""
    due = min(now + interval, deadline - BOOKMARK_BEFORE_TIMEOUT)
    return due if due >= now else math.inf


def _with_rv(obj: Obj, rv: int) -> Obj:
    """A shallow copy of ``obj`` carrying resourceVersion ``rv`` (a DELETED event's)."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


class WatchStream:
    """One watch: its position in the store's history and what its client holds.

    ``table`` asks for Table objects (``includeObject`` as ``include``). All methods but
    the constructor are called with the cluster's lock held."""

    def __init__(
        self,
        cluster: Cluster,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        opts: WatchOptions,
        table: bool = False,
        include: str = "Metadata",
    ) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.rt = rt
        self.version = version
        self.namespace = namespace if rt.namespaced else None
        self.opts = opts
        self.table = table
        self.include = include
        self.epoch = self.store.epoch
        self.number = self.store.appended  # the next change to read
        self.ended = False
        self._headers_sent = False
        # Changes not sent yet because a controller changed the object in place after
        # them: the first one's type, and whether the client held the object before it.
        self._pending: dict[Ref, tuple[str, bool]] = {}
        # With selectors: whether the client holds each object (it matched when last
        # sent). Without, an event's type says it.
        self._held: dict[Ref, bool] | None = {} if opts.selective else None

    # -- opening ---------------------------------------------------------------------

    def open(self) -> list[bytes]:
        """The first events: the initial ADDED events (and their end bookmark), the
        changes since the requested resourceVersion, or the ERROR that ends the watch."""
        store, wanted = self.store, self.opts.resource_version
        if wanted is not None and wanted > store.rv:
            self.wait_for(lambda: store.rv >= wanted, TOO_LARGE_WAIT)
            if store.rv < wanted:
                return self._fail(self._too_large(wanted))
        if self.opts.initial_events:
            frames = self._initial()
            if self.opts.initial_events_end:
                frames.append(self.bookmark(initial_events_end=True))
            return frames
        if wanted is None:
            return []  # sendInitialEvents=false from "now": only what happens next
        if wanted < store.floor:
            return self._fail(
                errors.ApiError(
                    410, "Expired", f"too old resource version: {wanted} ({store.floor})"
                )
            )
        self.number = store.changes_after(wanted)
        if self._held is not None:
            self._seed_held(wanted)
        return self.drain()

    def _initial(self) -> list[bytes]:
        """The current matching objects as ADDED events, by namespace and name."""
        items, _ = self.store.select(
            self.rt.key, self.namespace, self.opts.label_selector, self.opts.fields
        )
        self.number = self.store.appended
        frames = []
        for obj in items:
            meta = obj["metadata"]
            if self._held is not None:
                self._held[(meta.get("namespace", ""), meta["name"])] = True
            frames.append(self._frame(ADDED, obj))
        return frames

    def expire(self) -> list[bytes]:
        """End the watch as one from a version the API server no longer keeps: an ERROR
        event with ``410 Expired`` (an injected fault: the client must list again)."""
        wanted = self.opts.resource_version or self.store.rv
        return self._fail(
            errors.ApiError(410, "Expired", f"too old resource version: {wanted} ({self.store.rv})")
        )

    def _seed_held(self, since: int) -> None:
        """What a client that listed at ``since`` holds, where it is still known: the
        matching objects not written since (their state is the one it listed)."""
        assert self._held is not None
        for obj in self.store.iter(self.rt.key, self.namespace):
            meta = obj["metadata"]
            if int(meta["resourceVersion"]) <= since:
                self._held[(meta.get("namespace", ""), meta["name"])] = self._matches(obj)

    def _too_large(self, wanted: int) -> errors.ApiError:
        """The Status of a watch from a resourceVersion the store never reached."""
        return errors.ApiError(
            504,
            "Timeout",
            f"Timeout: Too large resource version: {wanted}, current: {self.store.rv}",
            {
                "causes": [
                    {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
                ],
                "retryAfterSeconds": 1,
            },
        )

    def _fail(self, err: errors.ApiError) -> list[bytes]:
        """End the watch with one ERROR event carrying ``err``'s Status (on a 200
        stream, as the API server reports errors found once a watch has begun)."""
        self.ended = True
        return [_line("ERROR", json.dumps(err.status()).encode())]

    # -- following -------------------------------------------------------------------

    def wait_for(self, ready: Any, timeout: float) -> None:
        """Wait (the lock released meanwhile) until ``ready()`` or ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.wait(left)

    def wait(self, timeout: float) -> None:
        """Sleep until the store records a change (or ``timeout`` seconds pass)."""
        self.store.waiting += 1
        try:
            self.store.changed.wait(timeout)
        finally:
            self.store.waiting -= 1

    def drain(self) -> list[bytes]:
        """The events for the changes recorded since the last call."""
        store = self.store
        if store.epoch != self.epoch or self.number < store.appended - len(store.history):
            # The store was reset, or this watch fell so far behind that the history
            # dropped changes it had not read: end it, as the API server closes a watch
            # it cannot keep up (the client re-watches, or re-lists on 410).
            self.ended = True
            return []
        changes = store.changes_since(self.number)
        self.number = store.appended
        frames: list[bytes] = []
        key, namespace = self.rt.key, self.namespace
        for change in changes:
            if change.key != key:
                continue
            meta = change.obj["metadata"]
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            frames.extend(self._on_change((meta.get("namespace", ""), meta["name"]), change))
        return frames

    def _on_change(self, ref: Ref, change: Change) -> list[bytes]:
        """The events one change makes for this watch (none, one, or two)."""
        deferred = self._pending.pop(ref, None)
        obj = change.obj
        if change.type != DELETED and obj["metadata"].get("resourceVersion") != str(change.rv):
            # Changed in place since: its state at change.rv is gone. Wait for the later
            # change that wrote the state it has now (see the module docstring).
            self._pending[ref] = deferred or (change.type, self._was_held(ref, change))
            return []
        was_held = deferred[1] if deferred else self._was_held(ref, change)
        if change.type != DELETED:
            return self._transition(ref, was_held, obj, change.prev, change.rv)[0]
        frames: list[bytes] = []
        if deferred is not None:
            # Its last written state was never sent: send it before its deletion.
            frames, was_held = self._transition(ref, was_held, obj, None, change.rv)
        if was_held:
            frames.append(self._frame(DELETED, _with_rv(obj, change.rv)))
        if self._held is not None:
            self._held.pop(ref, None)
        return frames

    def _was_held(self, ref: Ref, change: Change) -> bool:
        """Did the client hold the object (matching) before ``change``?"""
        if self._held is None:
            return change.type != ADDED
        if ref in self._held:
            return self._held[ref]
        if change.type == DELETED:
            return self._matches(change.obj)
        if change.prev is None:
            return False
        if change.prev is not change.obj:
            return self._matches(change.prev)
        # Changed in place before this watch began: its earlier state is unknown. Assume
        # the client may hold it: a DELETED for an object it never had is ignored by
        # clients, a missing one would leave it holding a stale object.
        return True

    def _transition(
        self, ref: Ref, was_held: bool, obj: Obj, prev: Obj | None, rv: int
    ) -> tuple[list[bytes], bool]:
        """The event for an object written with state ``obj``, as the watch cache picks
        it from whether the old and new states match the selectors; and whether the
        client holds the object afterwards."""
        now = self._matches(obj)
        if self._held is not None:
            self._held[ref] = now
        if now:
            return [self._frame(MODIFIED if was_held else ADDED, obj)], True
        if was_held:
            # Leaving the selection: the previous state, with this event's version.
            before = prev if prev is not None and prev is not obj else obj
            return [self._frame(DELETED, _with_rv(before, rv))], False
        return [], False

    def _matches(self, obj: Obj) -> bool:
        return not self.opts.selective or matches(obj, self.opts.labels, self.opts.fields)

    # -- encoding --------------------------------------------------------------------

    def bookmark(self, initial_events_end: bool = False) -> bytes:
        """A BOOKMARK at the store's resourceVersion: every change up to it has been
        sent (this is called after :meth:`drain`)."""
        meta: dict[str, Any] = {"resourceVersion": str(self.store.rv)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {
            "kind": self.rt.kind,
            "apiVersion": self.rt.api_version(self.version),
            "metadata": meta,
        }
        return _line("BOOKMARK", json.dumps(obj, separators=(",", ":")).encode())

    def _frame(self, kind: str, obj: Obj) -> bytes:
        """One event line for ``obj`` as GET or list would serve it (or as a Table)."""
        served = verbs.out(self.rt, self.version, obj)
        if not self.table:
            return _line(kind, verbs.encode_object(self.cluster, self.rt, self.version, served))
        meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
        doc = tables.table(self.cluster, self.rt, self.version, [served], meta, self.include)
        if self._headers_sent:
            doc["columnDefinitions"] = None  # the API server prints headers once
        self._headers_sent = True
        return _line(kind, json.dumps(doc, separators=(",", ":")).encode())


def _line(kind: str, body: bytes) -> bytes:
    """A JSON watch event, one line: ``{"type":...,"object":...}``."""
    return b'{"type":"' + kind.encode() + b'","object":' + body + b"}\n"
