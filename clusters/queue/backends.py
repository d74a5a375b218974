"""The queue backend this deployment runs, chosen from ``QUEUE_MODE`` in one place."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from clusters.queue.builtin import BuiltinQueue
from clusters.queue.interface import QueueBackend
from clusters.queue.kueue import KueueQueue

_BACKENDS: dict[str, QueueBackend] = {"builtin": BuiltinQueue(), "kueue": KueueQueue()}


def queue_backend() -> QueueBackend:
    """The backend ``QUEUE_MODE`` names (read at each call, so tests may switch modes)."""
    return _BACKENDS[settings.QUEUE_MODE]


def manifest_options() -> dict[str, Any]:
    """How manifests are rendered in this deployment (queueing mode, KAI)."""
    return queue_backend().manifest_options(kai_enabled=settings.KAI_ENABLED)
