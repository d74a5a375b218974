"""The object store: every object by (resource, namespace, name), plus the indexes the
controllers need (dependents by owner uid) and the selector logic of list calls.

It knows nothing of HTTP or admission: it keeps objects, hands out resourceVersions from
one counter and answers selections quickly, under the simulator's lock. As the API
server's watch cache, it keeps the recent changes watches are served from (``watch.py``)
in a bounded deque: recording is O(1) and encodes nothing; a watch encodes what it sends.
"""

from __future__ import annotations

import base64
import bisect
import json
import re
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

Obj = dict[str, Any]

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
# Changes kept for watches. The API server's watch cache keeps a window per resource
# (100 events by default, grown under load) and etcd keeps revisions until compaction
# (every 5 minutes); one global window of 10,000 changes is in that spirit and lets a
# client that resumes after a short disconnect carry on without a re-list.
DEFAULT_WATCH_HISTORY = 10_000


class Change(NamedTuple):
    """One change as watches see it: the resourceVersion it took, ADDED / MODIFIED /
    DELETED, the resource key, the object (a reference, never a copy) and the object it
    replaced (None on create; the same dict when a controller changed the object in
    place, in which case its earlier state is gone).

    A DELETED change's resourceVersion is the one its removal took; ``obj`` keeps its
    last written resourceVersion and watches send it with the removal's instead, as the
    API server does."""

    rv: int
    type: str
    key: str
    obj: Obj
    prev: Obj | None


class SelectorError(ValueError):
    """A label or field selector that does not parse."""


@dataclass
class Requirement:
    """One clause of a label selector: ``key op values``."""

    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        """Does a label map satisfy this clause?"""
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the key, as Kubernetes does.
        return not present or labels[self.key] not in self.values


_SET_RE = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse ``a=b,c!=d,e in (f,g),!h,i`` into requirements."""
    if not text:
        return []
    reqs: list[Requirement] = []
    for part in _split_top(text):
        part = part.strip()
        if not part:
            continue
        for op in ("==", "!=", "="):
            if op in part and "(" not in part:
                key, value = part.split(op, 1)
                key, value = key.strip(), value.strip()
                if not key:
                    raise SelectorError(f"invalid label selector {text!r}")
                reqs.append(Requirement(key, "=" if op != "!=" else "!=", (value,)))
                break
        else:
            m = _SET_RE.match(part)
            if not m:
                raise SelectorError(f"unable to parse requirement: {part!r}")
            neg, key, op, values = m.groups()
            if op:
                vals = tuple(v.strip() for v in values.split(",") if v.strip())
                reqs.append(Requirement(key, op, vals))
            else:
                reqs.append(Requirement(key, "!exists" if neg else "exists"))
    return reqs


def parse_field_selector(text: str | None) -> list[tuple[str, str, str]]:
    """Parse ``a.b=c,d!=e`` into (path, op, value) triples."""
    if not text:
        return []
    out: list[tuple[str, str, str]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        for op in ("==", "!=", "="):
            if op in part:
                path, value = part.split(op, 1)
                out.append((path.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise SelectorError(f"invalid field selector: {part!r}")
    return out


def field_value(obj: Obj, path: str) -> str:
    """Value of a dotted field path, as a string ('' when absent). ``a|b`` reads ``b`` when
    ``a`` is empty (an Event's ``source`` falls back to its ``reportingComponent``)."""
    if "|" in path:
        for alternative in path.split("|"):
            value = field_value(obj, alternative)
            if value:
                return value
        return ""
    cur: Any = obj
    for piece in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(piece)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def matches(obj: Obj, labels: list[Requirement], fields: list[tuple[str, str, str]]) -> bool:
    """Does an object satisfy a parsed label and field selector?"""
    if labels:
        lmap = obj.get("metadata", {}).get("labels") or {}
        if not all(r.matches(lmap) for r in labels):
            return False
    for path, op, value in fields:
        actual = field_value(obj, path)
        if (actual == value) != (op == "="):
            return False
    return True


def encode_continue(namespace: str, name: str, rv: int) -> str:
    """Opaque continue token: where the previous page stopped."""
    raw = json.dumps({"ns": namespace, "name": name, "rv": rv}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_continue(token: str) -> tuple[str, str, int]:
    """Inverse of :func:`encode_continue`; raises ValueError on a bad token."""
    data = json.loads(base64.urlsafe_b64decode(token.encode()))
    return str(data["ns"]), str(data["name"]), int(data["rv"])


class Store:
    """Objects by resource key, namespace and name; dependents by owner uid; the recent
    changes for watches.

    ``lock`` is the lock callers hold around the store (the cluster's RLock); watches wait
    on :attr:`changed`, a condition on that same lock, so a writer that already holds it
    can wake them without taking another lock. ``history_size`` is how many changes are
    kept for watches (:data:`DEFAULT_WATCH_HISTORY`)."""

    def __init__(
        self,
        lock: threading.RLock | None = None,
        history_size: int = DEFAULT_WATCH_HISTORY,
    ) -> None:
        if history_size < 1:
            raise ValueError("history_size must be at least 1")
        self.history_size = history_size
        self.changed = threading.Condition(lock or threading.RLock())
        # Watches waiting on ``changed`` (maintained by them, under the lock): a write
        # notifies only when someone waits.
        self.waiting = 0
        # Bumped by every reset (wipe, snapshot restore): a watch positioned in the old
        # history ends, as watches end when an API server restarts.
        self.epoch = 0
        self.reset()

    def reset(self, rv: int = 0) -> None:
        """Forget every object and the history; the counter restarts at ``rv``. Watches
        that are open end (see :attr:`epoch`)."""
        self.rv = rv
        self.data: dict[str, dict[str, dict[str, Obj]]] = {}
        self.by_owner: dict[str, set[tuple[str, str, str]]] = {}
        self.by_uid: dict[str, tuple[str, str, str]] = {}
        # Serialised JSON of stored objects, so that a list of 20,000 pods joins bytes
        # instead of encoding every object again: (key, namespace, name) -> (the object's
        # id, its resourceVersion, bytes). Dropped on put and remove; the id and
        # resourceVersion are checked again on use, so a replaced object is never served
        # from a stale entry.
        self._encoded: dict[tuple[str, str, str], tuple[int, str, bytes]] = {}
        self.history: deque[Change] = deque()
        # Changes ever appended since the reset: the history's last change is number
        # ``appended - 1``, so a watch remembers where it is by this count, not by index.
        self.appended = 0
        # Every change with a resourceVersion above this one is still in the history: a
        # watch from an older resourceVersion is answered 410 Expired.
        self.floor = rv
        self.epoch += 1
        self.wake_watchers()

    def wake_watchers(self) -> None:
        """Wake every waiting watch (a reset, kubesim stopping)."""
        with self.changed:
            self.changed.notify_all()

    def _record(self, change: Change) -> None:
        """Append a change to the history, dropping the oldest past ``history_size``, and
        wake waiting watches. Called under the lock, on every write: O(1), no encoding."""
        if len(self.history) >= self.history_size:
            self.floor = self.history.popleft().rv
        self.history.append(change)
        self.appended += 1
        if self.waiting:
            self.changed.notify_all()

    def changes_after(self, rv: int) -> int:
        """The number of the first retained change above ``rv`` (not below :attr:`floor`)."""
        index = bisect.bisect_right(self.history, rv, key=lambda c: c.rv)
        return self.appended - len(self.history) + index

    def changes_since(self, number: int) -> list[Change]:
        """The changes from number ``number`` on (oldest first). Walks from the newest
        end, so a watch that is nearly caught up pays for what is new only."""
        count = self.appended - number
        if count <= 0:
            return []
        if count >= len(self.history):
            return list(self.history)
        out = []
        for change in reversed(self.history):
            out.append(change)
            if len(out) == count:
                break
        out.reverse()
        return out

    def next_rv(self) -> str:
        """Take the next resourceVersion."""
        self.rv += 1
        return str(self.rv)

    def get(self, key: str, namespace: str, name: str) -> Obj | None:
        """One object, or None."""
        return self.data.get(key, {}).get(namespace, {}).get(name)

    def put(self, key: str, obj: Obj) -> Obj:
        """Insert or replace an object (the caller has set its metadata)."""
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        old = self.get(key, ns, name)
        if old is not None:
            self._unindex(key, old)
            self._encoded.pop((key, ns, name), None)
        self.data.setdefault(key, {}).setdefault(ns, {})[name] = obj
        self._index(key, obj)
        kind = MODIFIED if old is not None else ADDED
        self._record(Change(int(meta["resourceVersion"]), kind, key, obj, old))
        return obj

    def remove(self, key: str, namespace: str, name: str) -> Obj | None:
        """Delete an object from the store; returns it.

        The removal takes a resourceVersion of its own, as a delete takes an etcd
        revision: the DELETED event carries it, newer than every earlier event of the
        object, so a client resuming from it misses nothing."""
        bucket = self.data.get(key, {}).get(namespace)
        if not bucket or name not in bucket:
            return None
        obj = bucket.pop(name)
        self._encoded.pop((key, namespace, name), None)
        if not bucket:
            del self.data[key][namespace]
        self._unindex(key, obj)
        self.rv += 1
        self._record(Change(self.rv, DELETED, key, obj, obj))
        return obj

    def encoded(self, key: str, obj: Obj) -> bytes:
        """The compact JSON of a stored object (the store's own, never a copy), from the
        cache when it is current.

        Writers replace objects through :meth:`put` with a new resourceVersion; an object
        changed in place without one would be served as it was when first encoded, so the
        write pipeline must keep bumping resourceVersions (it always has: clients rely on
        them too)."""
        meta = obj["metadata"]
        ref = (key, meta.get("namespace", ""), meta["name"])
        rv = meta.get("resourceVersion", "")
        hit = self._encoded.get(ref)
        if hit is not None and hit[0] == id(obj) and hit[1] == rv:
            return hit[2]
        data = json.dumps(obj, separators=(",", ":")).encode()
        self._encoded[ref] = (id(obj), rv, data)
        return data

    def _index(self, key: str, obj: Obj) -> None:
        meta = obj["metadata"]
        ref = (key, meta.get("namespace", ""), meta["name"])
        self.by_uid[meta["uid"]] = ref
        for owner in meta.get("ownerReferences") or []:
            self.by_owner.setdefault(owner.get("uid", ""), set()).add(ref)

    def _unindex(self, key: str, obj: Obj) -> None:
        meta = obj["metadata"]
        ref = (key, meta.get("namespace", ""), meta["name"])
        self.by_uid.pop(meta["uid"], None)
        for owner in meta.get("ownerReferences") or []:
            deps = self.by_owner.get(owner.get("uid", ""))
            if deps is not None:
                deps.discard(ref)
                if not deps:
                    del self.by_owner[owner.get("uid", "")]

    def dependents(self, uid: str) -> list[tuple[str, str, str]]:
        """(key, namespace, name) of objects naming ``uid`` as an owner."""
        return sorted(self.by_owner.get(uid, ()))

    def iter(self, key: str, namespace: str | None = None) -> Iterator[Obj]:
        """Objects of one resource, in one namespace or all (unsorted)."""
        buckets = self.data.get(key, {})
        if namespace is not None:
            yield from buckets.get(namespace, {}).values()
            return
        for bucket in buckets.values():
            yield from bucket.values()

    def count(self, key: str, namespace: str | None = None) -> int:
        """Number of objects of one resource."""
        buckets = self.data.get(key, {})
        if namespace is not None:
            return len(buckets.get(namespace, {}))
        return sum(len(b) for b in buckets.values())

    def namespaces_with(self, key: str) -> Iterable[str]:
        """Namespaces holding at least one object of a resource."""
        return list(self.data.get(key, {}).keys())

    def select(
        self,
        key: str,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | list[tuple[str, str, str]] | None = None,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> tuple[list[Obj], str]:
        """A list call: objects ordered by (namespace, name), filtered, paginated.

        ``field_selector`` is the selector's text or clauses already parsed (and converted
        to paths, see ``fieldlabels.py``). Returns the page and the continue token ('' on
        the last page).
        """
        labels = parse_label_selector(label_selector)
        fields = (
            field_selector
            if isinstance(field_selector, list)
            else parse_field_selector(field_selector)
        )
        # metadata.name / metadata.namespace selectors are answered from the index directly,
        # which keeps kubectl's "wait for deletion" and describe lookups cheap.
        names = [v for p, op, v in fields if p == "metadata.name" and op == "="]
        nss = [v for p, op, v in fields if p == "metadata.namespace" and op == "="]
        if nss:
            if namespace is not None and nss[0] != namespace:
                return [], ""
            namespace = nss[0]
        start: tuple[str, str] | None = None
        if continue_token:
            ns0, name0, _ = decode_continue(continue_token)
            start = (ns0, name0)
        buckets = self.data.get(key, {})
        ns_list = [namespace] if namespace is not None else sorted(buckets)
        out: list[Obj] = []
        for ns in ns_list:
            if start is not None and ns < start[0]:
                continue
            bucket = buckets.get(ns, {})
            keys = [n for n in names if n in bucket] if names else sorted(bucket)
            for name in keys:
                if start is not None and (ns, name) <= start:
                    continue
                obj = bucket[name]
                if not matches(obj, labels, fields):
                    continue
                if limit and len(out) >= limit:
                    last = out[-1]["metadata"]
                    return out, encode_continue(last.get("namespace", ""), last["name"], self.rv)
                out.append(obj)
        return out, ""

    # -- snapshot -------------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """Everything as JSON-able data."""
        # CRDs are data shipped with kubesim; they are re-installed on load.
        objects = [
            {"key": k, "object": o}
            for k in self.data
            for o in self.iter(k)
            if k != "customresourcedefinitions.apiextensions.k8s.io"
        ]
        return {"resourceVersion": self.rv, "objects": objects}

    def load(self, data: dict[str, Any]) -> None:
        """Replace the contents with a :meth:`dump`. The history starts empty at the
        snapshot's resourceVersion (a watch from before it is 410 Expired)."""
        rv = int(data.get("resourceVersion", 0))
        self.reset(rv)
        for entry in data.get("objects", []):
            self.put(entry["key"], entry["object"])
        self.history.clear()
        self.appended = 0
        self.floor = self.rv = rv
