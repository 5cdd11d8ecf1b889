"""The HTTP side of the ASGI application: Django's ASGI handler with its middleware and views
run synchronously, in one hop to the request's thread.

Every middleware of ``settings.MIDDLEWARE`` and every view of the platform is synchronous.
Django's own ASGI handler builds an asynchronous chain where it can: each ``MiddlewareMixin``
then runs its ``process_request`` and ``process_response`` through ``sync_to_async``, and the
chain switches back and forth (async to sync at the first sync-only middleware, sync to async
below it, then to sync again for the view and for ``process_view``): about ten hand-offs
between the event loop and the request's thread per request, each with its context copy and
wake-ups, a few milliseconds of CPU a request under load. Here the chain is built as a WSGI
server builds it (synchronous throughout, an async view, if one were added, still served
through ``async_to_sync``) and called with one ``sync_to_async``, on the request's own thread
(``thread_sensitive``, as Django does), so the database connection that the request's
``request_finished`` closes is the one its view used. Reading the body, sending the response
(streaming ones included) and the request signals stay Django's.

The request's thread is not a new one. Django enters a ``ThreadSensitiveContext`` per
request, whose executor starts a thread for the request and joins it at the end: a thread
start, a new database wrapper (Django's connections are per thread) and a join per request,
0.4 ms of CPU in an in-process measurement against a thread that serves request after
request. Here each request's context is given a single-thread executor from a pool of idle
ones, and the executor goes back to the pool when the request is done, as a WSGI server's
worker threads serve one request after another (``request_finished`` still closes or
recycles the request's database connection, by ``CONN_MAX_AGE``, as it does there).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler

# Idle request threads kept for the next requests; more are started when more requests run
# at once, and those beyond this many are let go when their request ends.
IDLE_THREADS = 64


class SyncStackASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._idle: list[ThreadPoolExecutor] = []

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        chain: Any = self._middleware_chain  # type: ignore[has-type]
        self._middleware_chain = sync_to_async(chain, thread_sensitive=True)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # The event loop's thread alone takes and gives back executors: no lock needed.
        executor = self._idle.pop() if self._idle else self._new_executor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            # Back to the pool once its thread is free: a sync call of a request cancelled
            # meanwhile (a server shutting down) may still run there, and the next request
            # must not queue behind it.
            loop = asyncio.get_running_loop()
            try:
                free = executor.submit(_nothing)
            except RuntimeError:  # the interpreter is shutting down
                return
            free.add_done_callback(lambda _: _call_soon(loop, self._give_back, executor))

    def _give_back(self, executor: ThreadPoolExecutor) -> None:
        if len(self._idle) < IDLE_THREADS:
            self._idle.append(executor)
        else:
            _let_go(executor)

    @staticmethod
    def _new_executor() -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")


def _nothing() -> None:
    pass


def _call_soon(
    loop: asyncio.AbstractEventLoop, callback: Any, executor: ThreadPoolExecutor
) -> None:
    try:
        loop.call_soon_threadsafe(callback, executor)
    except RuntimeError:  # the loop is closed: the server stopped
        _let_go(executor)


def _let_go(executor: ThreadPoolExecutor) -> None:
    # Not joined here: its thread may be waiting for the event loop.
    threading.Thread(target=executor.shutdown, daemon=True).start()


def get_asgi_application() -> SyncStackASGIHandler:
    """``django.core.asgi.get_asgi_application`` with this handler."""
    import django

    django.setup(set_prefix=False)
    return SyncStackASGIHandler()
