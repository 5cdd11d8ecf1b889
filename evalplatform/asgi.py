"""ASGI entry point: HTTP through Django, WebSockets through Channels (authenticated by the
session or an API token), and ``/socket.io/`` (long-polling and WebSocket) through
python-socketio, which serves the same live events (``evalplatform.live.socketio_app``)."""

import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")

from evalplatform.handler import get_asgi_application

# Django's ASGI handler, its middleware and views run in one hop (evalplatform/handler.py).
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from evalplatform.limits import BodyLimit  # noqa: E402
from evalplatform.live import socketio_path  # noqa: E402
from evalplatform.live.auth import (  # noqa: E402  (needs the apps loaded)
    LiveAuthMiddlewareStack,
    LiveOriginValidator,
)
from evalplatform.routing import socketio_topics, websocket_urlpatterns  # noqa: E402

channels_application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": LiveOriginValidator(LiveAuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
_socketio: list[Any] = []  # the Socket.IO application, made on its first connection


def socketio_application() -> Any:
    """The Socket.IO application (``evalplatform.live.socketio_app``), imported and made on
    first use: python-socketio and what it brings (aiohttp, redis.asyncio) take seconds to
    load, which a server's start and its first page need not wait for."""
    if not _socketio:
        from evalplatform.live.socketio_app import SocketIOApp

        _socketio.append(SocketIOApp(socketio_topics))
    return _socketio[0]


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if socketio_path.handles(scope):
        await socketio_application()(scope, receive, send)
    else:
        await channels_application(scope, receive, send)
