"""ASGI entry point: HTTP through Django, WebSockets through Channels (authenticated by the
session or an API token), and ``/socket.io/`` (long-polling and WebSocket) through
python-socketio, which serves the same live events (``evalplatform.live.socketio_app``)."""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from evalplatform.limits import BodyLimit  # noqa: E402
from evalplatform.live.auth import (  # noqa: E402  (needs the apps loaded)
    LiveAuthMiddlewareStack,
    LiveOriginValidator,
)
from evalplatform.live.socketio_app import SocketIOApp  # noqa: E402
from evalplatform.routing import socketio_topics, websocket_urlpatterns  # noqa: E402

channels_application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": LiveOriginValidator(LiveAuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
socketio_application = SocketIOApp(socketio_topics)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if SocketIOApp.handles(scope):
        await socketio_application(scope, receive, send)
    else:
        await channels_application(scope, receive, send)
