"""The queue backend a deployment runs (clusters.queue.backends): chosen from
``QUEUE_MODE`` at each call, and what it makes of the manifests."""

from __future__ import annotations

from typing import Any

from clusters.queue.backends import manifest_options, queue_backend
from clusters.queue.builtin import BuiltinQueue
from clusters.queue.kueue import KueueQueue


def test_the_mode_picks_the_backend_at_each_call(settings: Any) -> None:
    settings.QUEUE_MODE = "builtin"
    assert isinstance(queue_backend(), BuiltinQueue)
    settings.QUEUE_MODE = "kueue"
    assert isinstance(queue_backend(), KueueQueue)


def test_manifest_options_follow_the_mode_and_kai(settings: Any) -> None:
    settings.QUEUE_MODE = "kueue"
    settings.KAI_ENABLED = False
    assert manifest_options()["queue_mode"] == "kueue"
    settings.QUEUE_MODE = "builtin"
    settings.KAI_ENABLED = True
    options = manifest_options()
    assert options["queue_mode"] == "builtin" and options["kai_enabled"] is True
