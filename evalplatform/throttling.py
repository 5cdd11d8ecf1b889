"""API throttling: every user's writes, and separately their expensive requests, are counted
per time window in a store all web processes share; over the rate, a request is refused with
``429`` and ``Retry-After`` (the exception handler's answer, docs/api.md).

Two scopes, both DRF throttles named in ``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]``:

- ``write``: every POST, PUT, PATCH and DELETE (``API_THROTTLE_WRITE``);
- ``expensive``: the handlers marked ``@expensive`` (uploads, exports, analytics, previews and
  estimates, job starts; ``API_THROTTLE_EXPENSIVE``), whatever their method. A POST of
  these counts in both.

A rate is ``N/s``, ``N/min``, ``N/hour`` or ``N/day`` (``off`` or empty: no limit). The count is
the user's, whichever of their API tokens or their browser session sent the request (more
tokens buy no more requests); one window of the rate's length at a time (a fixed window:
at a window's turn a client may send up to twice the rate in a short while).

The store is the ``throttle`` cache (settings): Redis in scale mode, where the increment is
one atomic command, and otherwise the database cache table, which every process on the
database shares; there two requests of one user at the same instant may both read the same
count (a read and a write), so the limit can be passed by a few concurrent requests, never
by a rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import BaseThrottle

from evalplatform.env import parse_rate

WRITE = "write"
EXPENSIVE = "expensive"
CACHE_ALIAS = "throttle"
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Handler = TypeVar("Handler", bound=Callable[..., Any])


def expensive(handler: Handler | None = None, *, when: Callable[[Any], bool] | None = None) -> Any:
    """Mark a view's handler (``post``, ``get``, a viewset action) as expensive: its requests
    count in the ``expensive`` scope. ``when(view)`` narrows it (e.g. to the CSV of a view
    that also answers JSON)."""

    def mark(function: Handler) -> Handler:
        function.throttle_scope = EXPENSIVE  # type: ignore[attr-defined]
        function.throttle_when = when  # type: ignore[attr-defined]
        return function

    return mark(handler) if handler is not None else mark


def scopes(view: Any, method: str, *, maybe: bool = False) -> list[str]:
    """The scopes a request of ``method`` to ``view`` counts in; ``maybe``: those it may
    count in, whatever a handler's ``when`` would say (for the schema)."""
    found = [WRITE] if method.upper() in _UNSAFE else []
    name = getattr(view, "action", None) or method.lower()
    handler = getattr(view, name, None)
    if getattr(handler, "throttle_scope", None) == EXPENSIVE:
        when = getattr(handler, "throttle_when", None)
        if maybe or when is None or when(view):
            found.append(EXPENSIVE)
    return found


def _count(key: str, timeout: int) -> int:
    """The key's count after this request's hit."""
    cache = caches[CACHE_ALIAS]
    client = getattr(getattr(cache, "_cache", None), "get_client", None)
    if isinstance(cache, RedisCache) and client is not None:
        # One round trip, atomic (MULTI/EXEC): make the key with the window's expiry unless
        # it is there, and count.
        name = cache.make_and_validate_key(key)
        pipe = client(name, write=True).pipeline()
        pipe.set(name, 0, ex=timeout, nx=True)
        pipe.incr(name)
        return int(pipe.execute()[1])
    if type(cache).incr is BaseCache.incr:
        # No atomic increment (the database cache): read, then write with the window's expiry.
        count = int(cache.get(key) or 0) + 1
        cache.set(key, count, timeout)
        return count
    cache.add(key, 0, timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between the two
        cache.set(key, 1, timeout)
        return 1


class ScopeThrottle(BaseThrottle):
    scope: str

    def __init__(self) -> None:
        self.wait_s: float | None = None

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.scope not in scopes(view, request.method):
            return True
        rate = parse_rate((getattr(settings, "API_THROTTLE_RATES", None) or {}).get(self.scope))
        if rate is None:
            return True
        limit, seconds = rate
        now = time.time()
        window = int(now // seconds)
        key = f"{self.scope}:{self.ident_of(request)}:{seconds}:{window}"
        if _count(key, seconds + 1) <= limit:
            return True
        self.wait_s = (window + 1) * seconds - now
        return False

    def ident_of(self, request: Any) -> str:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return f"user:{user.pk}"
        return f"address:{self.get_ident(request)}"

    def wait(self) -> float | None:
        return self.wait_s


class WriteThrottle(ScopeThrottle):
    """Every POST, PUT, PATCH and DELETE of a user (``API_THROTTLE_WRITE``)."""

    scope = WRITE


class ExpensiveThrottle(ScopeThrottle):
    """A user's requests to ``@expensive`` handlers (``API_THROTTLE_EXPENSIVE``)."""

    scope = EXPENSIVE


def retry_after(wait: float | None) -> int:
    """Whole seconds to wait, at least 1."""
    return max(1, math.ceil(wait or 0))
