"""ASGI entry point: HTTP through Django, WebSockets through Channels (authenticated by the
session or an API token)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalplatform.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from evalplatform.limits import BodyLimit  # noqa: E402
from evalplatform.live.auth import (  # noqa: E402  (needs the apps loaded)
    LiveAuthMiddlewareStack,
    LiveOriginValidator,
)
from evalplatform.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": LiveOriginValidator(LiveAuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
