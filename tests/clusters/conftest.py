"""Fixtures for the cluster tests: unsaved cluster requests of every shape."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings

from clusters.models import ClusterRequest


@pytest.fixture
def make_cluster(acme: Any, bob: Any, h100: Any) -> Any:
    """``make_cluster(**fields)``: an unsaved request in acme by bob (dev, one h100 worker)."""

    def build(**fields: Any) -> ClusterRequest:
        values: dict[str, Any] = {
            "tenant": acme,
            "owner": bob,
            "flavor": h100,
            "name": "bob-dev-a1b2c",
            "kind": "dev",
            "workers": 1,
        }
        values.update(fields)
        if "gpu_fraction" in values and values["gpu_fraction"] is not None:
            values["gpu_fraction"] = Decimal(str(values["gpu_fraction"]))
        return ClusterRequest(**values)

    return build


@pytest.fixture
def shapes_by_name(make_cluster: Any, alice: Any, l4: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Every cluster shape we generate, with the keyword arguments of ``raycluster``."""
    return {
        "dev": (make_cluster(), {}),
        "dev-3-workers": (make_cluster(name="bob-dev-three", workers=3), {}),
        "prod-fixed": (make_cluster(owner=alice, name="train", kind="prod", workers=2), {}),
        "prod-autoscaling": (
            make_cluster(
                owner=alice, name="serve", kind="prod", workers=1, min_workers=0, max_workers=4
            ),
            {},
        ),
        "fractional": (
            make_cluster(name="bob-frac", flavor=l4, gpu_fraction="0.5"),
            {"kai_enabled": True},
        ),
        "dev-kueue": (make_cluster(), {"queue_mode": "kueue"}),
        # Kueue admits fixed sizes only (its webhook refuses the in-tree autoscaler).
        "prod-kueue": (
            make_cluster(owner=alice, name="train", kind="prod", workers=2),
            {"queue_mode": "kueue"},
        ),
    }


class Broker:
    """The messages waiting on one queue of the real Redis broker."""

    def __init__(self, queue: str) -> None:
        from controlplane.celery import app

        self.queue = queue
        self._app = app

    def messages(self) -> list[dict[str, Any]]:
        with self._app.connection_for_write() as conn:
            client = conn.default_channel.client
            raw = client.lrange(self.queue, 0, -1)
        return [json.loads(m) for m in raw]

    def tasks(self, name: str) -> list[dict[str, Any]]:
        return [m for m in self.messages() if m["headers"]["task"] == name]

    def drain(self) -> None:
        with self._app.connection_for_write() as conn:
            conn.default_channel.client.delete(self.queue)


@pytest.fixture
def broker(transactional_db: Any) -> Iterator[Broker]:
    """Tasks go to a fresh queue nobody consumes (``transactional_db``: commits happen,
    so the on-commit nudges run as they do in production)."""
    from controlplane.celery import app

    queue = f"test-coalesce-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = queue
    handle = Broker(queue)
    try:
        yield handle
    finally:
        handle.drain()
        app.conf.task_default_queue = settings.CELERY_TASK_DEFAULT_QUEUE
