"""A write refused with 429 is not tried again before its Retry-After, even by the next
periodic pass (found by ``make reliability``'s Kubernetes API suite: the namespace bundle
was re-applied 0.03-0.7 s after a 429 that asked for 1 s)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from clusters.kube.applied import AppliedCache
from clusters.kube.gateway import TransientKubeError

OBJECTS = [{"kind": "Namespace", "metadata": {"name": "gw-x"}}]


def test_a_throttled_write_waits_its_retry_after_then_goes() -> None:
    cache = AppliedCache("test")
    calls: list[Any] = []

    def throttled(objects: Any) -> None:
        calls.append(objects)
        raise TransientKubeError("429 slow down", status=429, retry_after=0.3)

    with pytest.raises(TransientKubeError):
        cache.apply("t", OBJECTS, throttled)
    with pytest.raises(TransientKubeError, match="as the API server asked") as waiting:
        cache.apply("t", OBJECTS, calls.append)
    assert waiting.value.retry_after and 0 < waiting.value.retry_after <= 0.3
    assert len(calls) == 1  # the second pass did not write
    time.sleep(0.35)
    assert cache.apply("t", OBJECTS, calls.append) is True
    assert len(calls) == 2 and cache.apply("t", OBJECTS, calls.append) is False


def test_an_error_without_retry_after_is_tried_again_at_once() -> None:
    cache = AppliedCache("test")

    def failing(objects: Any) -> None:
        raise TransientKubeError("503", status=503)

    with pytest.raises(TransientKubeError):
        cache.apply("t", OBJECTS, failing)
    assert cache.apply("t", OBJECTS, lambda objects: None) is True


def test_the_wait_holds_for_every_process(settings: Any) -> None:
    # Two caches of one writer stand for two worker processes: the second learns the
    # first's Retry-After through Django's cache (found by the same suite: a prefork
    # child re-sent a bundle 0.12 s after the other child's 429).
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    first, second = AppliedCache("shared-test"), AppliedCache("shared-test")

    def throttled(objects: Any) -> None:
        raise TransientKubeError("429 slow down", status=429, retry_after=0.3)

    with pytest.raises(TransientKubeError):
        first.apply("t", OBJECTS, throttled)
    calls: list[Any] = []
    with pytest.raises(TransientKubeError, match="as the API server asked"):
        second.apply("t", OBJECTS, calls.append)
    assert calls == []
    time.sleep(0.35)
    assert second.apply("t", OBJECTS, calls.append) is True
