"""Django's Redis cache with one connection pool and one client per process.

Django keeps a cache object per context, and under ASGI every request runs in a context of
its own: each request built a new ``RedisCache``, its own connection pool and so a new
connection (TCP set-up, the client's hello and health check, redis-py reading package
metadata for its driver info), then a new ``redis.Redis`` for every command (its table of
reply callbacks built afresh). In a profile of the web process under ``bench/load.py``, the
connections took about a sixth of the samples. This backend hands every cache object of the
process the same pool and the same client for the same servers and options; redis-py's pools
and clients are thread-safe, and a pool starts afresh in a forked child (``_checkpid``).
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.cache.backends import redis as django_redis

_shared: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


def _once(key: tuple[str, str], make: Any) -> Any:
    found = _shared.get(key)
    if found is None:
        with _lock:
            found = _shared.get(key)
            if found is None:
                found = _shared[key] = make()
    return found


class SharedRedisCacheClient(django_redis.RedisCacheClient):
    # Django's private attributes (``_servers``, ``_pool_options``, ...), not in its stubs.
    def _get_connection_pool(self, write: bool) -> Any:
        django_client: Any = self
        index = django_client._get_connection_pool_index(write)
        url, options = django_client._servers[index], django_client._pool_options
        pool_class = django_client._pool_class
        return _once(
            (
                "pool",
                f"{pool_class.__module__}.{pool_class.__qualname__} {url} "
                f"{sorted(options.items())!r}",
            ),
            lambda: pool_class.from_url(url, **options),
        )

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        django_client: Any = self
        pool = self._get_connection_pool(write)
        return _once(("client", str(id(pool))), lambda: django_client._client(connection_pool=pool))


class RedisCache(django_redis.RedisCache):
    """``django.core.cache.backends.redis.RedisCache`` sharing its pools and clients."""

    def __init__(self, server: Any, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = SharedRedisCacheClient
