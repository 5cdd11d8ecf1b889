"""One Redis connection pool per process for Django's Redis cache.

Django keeps a cache object per context, and under ASGI every request runs in a context of
its own: each request built a new ``RedisCache``, its own connection pool and so a new
connection (TCP set-up, the client's hello and health check, redis-py reading package
metadata for its driver info). Measured under ``bench/load.py``, that was about a sixth of the
web process's CPU. ``SharedConnectionPool.from_url`` hands every cache object of the process
the same pool for the same URL and options; redis-py's pools are thread-safe and start afresh
in a forked child (``_checkpid``).
"""

from __future__ import annotations

import threading
from typing import Any

from redis import ConnectionPool

_pools: dict[tuple[str, str], ConnectionPool] = {}
_lock = threading.Lock()


class SharedConnectionPool(ConnectionPool):
    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        key = (url, repr(sorted(kwargs.items())))
        pool = _pools.get(key)
        if pool is None:
            with _lock:
                pool = _pools.get(key)
                if pool is None:
                    pool = _pools[key] = super().from_url(url, **kwargs)
        return pool
