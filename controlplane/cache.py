"""Django's Redis cache, with one Redis client per server instead of one per operation.

Django's ``RedisCacheClient`` builds a new ``redis.Redis`` for every ``get`` and ``set``,
which is not free (it copies redis-py's table of response callbacks). A ``redis.Redis``
only borrows connections from its pool for each command, so one client per pool serves
every thread of the process; the pool notices a fork and opens new connections in the child.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient


class RedisCacheClient(DjangoRedisCacheClient):
    """Django's client, keeping the ``redis.Redis`` it makes for each pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[Any, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # Django picks (and makes) the pool; only the client around it is kept.
        django: Any = self  # django-stubs does not declare Django's private methods
        pool = django._get_connection_pool(write)
        client = self._clients.get(pool)
        if client is None:
            client = self._clients[pool] = django._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    """``django.core.cache.backends.redis.RedisCache`` with :class:`RedisCacheClient`."""

    def __init__(self, server: Any, params: Any) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
