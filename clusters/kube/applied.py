"""Remembering what this process last applied, so that unchanged objects are not re-sent.

Every pass keeps the tenants' bundles (and Kueue's queues) in step with the tables;
re-applying identical objects would be pure load on the API server. So each writer keeps
an :class:`AppliedCache`, a digest of what it last applied under a key, per process
(a restart costs one idempotent re-apply) and forgotten when the objects may be gone;
one lock guards it (Celery's and the web app's threads). A 429's ``Retry-After`` must
hold for every process, though (the worker's prefork children each keep a cache), so
that deadline is kept across processes (:mod:`clusters.kube.notbefore`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Hashable
from typing import Any

from clusters.kube import notbefore
from clusters.kube.gateway import TransientKubeError


def digest(objects: list[dict[str, Any]]) -> str:
    """A stable digest of a list of Kubernetes objects."""
    return hashlib.sha256(json.dumps(objects, sort_keys=True, default=str).encode()).hexdigest()


class AppliedCache:
    """Digests of the objects last applied per key, behind one lock."""

    def __init__(self, name: str) -> None:
        self.name = name  # of the writer, for the deadlines shared between processes
        self._digests: dict[Hashable, str] = {}
        self._lock = threading.Lock()
        _CACHES.append(self)

    def apply(
        self,
        key: Hashable,
        objects: list[dict[str, Any]],
        write: Callable[[list[dict[str, Any]]], None],
        *,
        force: bool = False,
    ) -> bool:
        """Call ``write(objects)`` unless the same objects were last written under ``key``.

        Returns whether it wrote. The digest is recorded only after ``write`` returned, so
        a write that raised is tried again next time, but not before the ``Retry-After``
        of a 429 that refused it: until then it raises :class:`TransientKubeError`.
        """
        new = digest(objects)
        with self._lock:
            if not force and self._digests.get(key) == new:
                return False
        # A 429's Retry-After is honoured across passes and processes: the periodic pass
        # that asks again sooner is told to wait the rest, as the task that retries it is.
        wait = notbefore.wait(self.name, key)
        if wait > 0:
            raise TransientKubeError(
                f"waiting {wait:.1f} s more, as the API server asked", retry_after=wait
            )
        try:
            write(objects)
        except TransientKubeError as exc:
            if exc.retry_after:
                notbefore.hold(self.name, key, exc.retry_after)
            raise
        with self._lock:
            self._digests[key] = new
        return True

    def forget(self, key: Hashable) -> None:
        """Make the next :meth:`apply` under ``key`` write whatever it is given."""
        with self._lock:
            self._digests.pop(key, None)

    def forget_all(self) -> None:
        """Make every next :meth:`apply` write."""
        with self._lock:
            self._digests.clear()


_CACHES: list[AppliedCache] = []


def forget_everything() -> None:
    """Forget what every writer of this process applied (tests: each starts with new
    clusters, whose members may carry the names of the last test's)."""
    for cache in _CACHES:
        cache.forget_all()
