"""Where Socket.IO is served (``/socket.io/``): told apart from every other request without
loading python-socketio, which ``evalplatform.asgi`` imports only for the first Socket.IO
connection (it brings aiohttp and redis.asyncio along: seconds of a server's start)."""

from __future__ import annotations

from typing import Any

PATH = "socket.io"


def handles(scope: dict[str, Any]) -> bool:
    """Whether a connection is Socket.IO's (HTTP long-polling or WebSocket)."""
    return scope["type"] in ("http", "websocket") and f"{scope['path']}/".startswith(f"/{PATH}/")
