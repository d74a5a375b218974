"""The Redis cache backend (controlplane/cache.py) against the real Redis: it reads and
writes as Django's does, through one client per server for the life of the process."""

from __future__ import annotations

import os
import threading

from controlplane.cache import RedisCache


def _cache() -> RedisCache:
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    return RedisCache(url, {"KEY_PREFIX": "t-cache"})


def test_values_round_trip_through_one_client() -> None:
    cache = _cache()
    cache.set("page", {"results": [1, 2, 3]}, timeout=30)
    assert cache.get("page") == {"results": [1, 2, 3]}
    assert cache.get("absent", default="none") == "none"
    client = cache._cache.get_client()
    assert cache._cache.get_client(write=True) is client
    cache.delete("page")
    assert cache.get("page") is None
    assert cache._cache.get_client() is client


def test_threads_share_the_client_and_each_sees_its_own_values() -> None:
    cache = _cache()
    seen: dict[int, object] = {}

    def work(n: int) -> None:
        for i in range(50):
            cache.set(f"n{n}", i, timeout=30)
            assert cache.get(f"n{n}") == i
        seen[n] = cache._cache.get_client()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 4 and len({id(client) for client in seen.values()}) == 1
    cache.delete_many([f"n{n}" for n in range(4)])
