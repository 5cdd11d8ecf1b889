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
through ``async_to_sync``) and called in one hop to the request's own thread
(``thread_sensitive``, as Django does).

That hop does all of a request's synchronous work, as a WSGI server's thread does:
``request_started``, making the request, the middleware and the view, and, for a response
whose body is already made, ``response.close()`` (``request_finished``, which closes or
gives back the request's database connection). Django's handler takes three hops for these
(the signals' receivers take one of their own, and so does closing) and two tasks to watch
for a client going away: one hop instead cost 5 to 12 % less CPU a request in process
(``bench/asgi_cpu.py``, before and after alternated). Only reading the body and
sending the response stay on the event loop. A streaming response (an export) is sent as
Django sends it: its chunks made on the request's thread, a client that goes away stops it,
and it is closed after its last chunk.

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
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix

# Idle request threads kept for the next requests; more are started when more requests run
# at once, and those beyond this many are let go when their request ends.
IDLE_THREADS = 64


class SyncStackASGIHandler(ASGIHandler):
    def __init__(self) -> None:
        super().__init__()
        self._idle: list[ThreadPoolExecutor] = []

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        self._respond_in_thread = sync_to_async(self._respond, thread_sensitive=True)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # The event loop's thread alone takes and gives back executors: no lock needed.
        executor = self._idle.pop() if self._idle else self._new_executor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        except BaseException:
            # Back to the pool once its thread is free: a sync call of a request cancelled
            # meanwhile (a server shutting down) may still run there, and the next request
            # must not queue behind it.
            loop = asyncio.get_running_loop()
            try:
                free = executor.submit(_nothing)
            except RuntimeError:  # the interpreter is shutting down
                return
            free.add_done_callback(lambda _: _call_soon(loop, self._give_back, executor))
            raise
        else:
            # Every sync call of the request was awaited to its end: the thread is free.
            self._give_back(executor)

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            response = await self._respond_in_thread(scope, body_file)
            if response.streaming:
                await self._stream(response, receive, send)
            else:
                await self.send_response(response, send)
        finally:
            body_file.close()

    def _respond(self, scope: Any, body_file: Any) -> HttpResponseBase:
        """The request's synchronous work, on its thread: the response, closed unless it
        streams (its body is made by then)."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        assert response is not None
        if not response.streaming:
            response.close()
        return response

    async def _stream(self, response: HttpResponseBase, receive: Any, send: Any) -> None:
        """Send a streaming response as Django does: stopped if the client goes away
        meanwhile, closed at the end on the request's thread."""
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(self.send_response(response, send)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task.done():
                    with contextlib.suppress(RequestAborted):  # the client went away
                        task.result()
                else:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            await sync_to_async(response.close, thread_sensitive=True)()

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
