"""Deadlines a 429 set: the API server's ``Retry-After``, kept for every process.

A write the API server refused with 429 must not be sent again before its
``Retry-After``, by any process of the engine: a Celery task's retry, the next periodic
pass, a sibling prefork child or a batch handing the row to its own task. The deadline is
kept in this process and in Django's cache (Redis in a deployment, where every pod shares
it); the cache is best effort, so an unreachable Redis leaves each process its own.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Hashable

from django.core.cache import cache

log = logging.getLogger(__name__)

_lock = threading.Lock()
_local: dict[str, float] = {}  # cache key -> wall-clock deadline


def _key(scope: str, key: Hashable) -> str:
    return f"kube-not-before:{scope}:{key}"


def wait(scope: str, key: Hashable) -> float:
    """Seconds left before a write under ``key`` may be sent (0 when it may now)."""
    name = _key(scope, key)
    with _lock:
        deadline = _local.get(name, 0.0)
    try:
        shared = cache.get(name)
    except Exception as exc:  # noqa: BLE001 - best effort: this process's own deadline holds
        log.warning("could not read the shared Retry-After of %s: %s", name, exc)
        shared = None
    if shared:
        deadline = max(deadline, float(shared))
    return max(deadline - time.time(), 0.0)


def hold(scope: str, key: Hashable, seconds: float) -> None:
    """Note that no write under ``key`` may be sent for ``seconds``."""
    name = _key(scope, key)
    deadline = time.time() + seconds
    with _lock:
        _local[name] = max(_local.get(name, 0.0), deadline)
    try:
        cache.set(name, deadline, math.ceil(seconds) + 1)
    except Exception as exc:  # noqa: BLE001 - best effort, as above
        log.warning("could not share the Retry-After of %s: %s", name, exc)


def forget_local() -> None:
    """Forget this process's deadlines (tests: the shared ones go with the cache)."""
    with _lock:
        _local.clear()
