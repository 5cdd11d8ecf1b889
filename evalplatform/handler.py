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
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler


class SyncStackASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)
        chain: Any = self._middleware_chain  # type: ignore[has-type]
        self._middleware_chain = sync_to_async(chain, thread_sensitive=True)


def get_asgi_application() -> SyncStackASGIHandler:
    """``django.core.asgi.get_asgi_application`` with this handler."""
    import django

    django.setup(set_prefix=False)
    return SyncStackASGIHandler()
