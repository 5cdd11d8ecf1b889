"""Live-event authentication: the browser's session, or an API token for scripts
(``Authorization: Token <key>`` header, as on the REST API). The plain WebSocket runs the
stack below as middleware; Socket.IO runs the same stack on its handshake (``scope_user``)
and also takes the token from its ``auth`` payload (``token_user``), since browsers cannot
set headers on a WebSocket."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings

from evalplatform.accounts.services import token_authenticate


def token_user(key: str) -> Any:
    """The user an API token's key authenticates, or None."""
    token = token_authenticate(key)
    return token.user if token is not None else None


def _token_user(header: bytes) -> Any:
    parts = header.decode("latin-1").split()
    if len(parts) != 2 or parts[0].lower() not in ("token", "bearer"):
        return None
    return token_user(parts[1])


class TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            header = dict(scope.get("headers") or []).get(b"authorization")
            if header:
                token_user = await database_sync_to_async(_token_user)(header)
                if token_user is not None:
                    scope = dict(scope, user=token_user)
        return await super().__call__(scope, receive, send)


def LiveAuthMiddlewareStack(inner):
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


async def scope_user(scope: dict[str, Any]) -> Any:
    """The user a connection's ASGI scope authenticates as, by the same stack as the
    WebSocket's (session cookie, then token header); anonymous if neither."""
    found: dict[str, Any] = {}

    async def capture(scope: dict[str, Any], receive: Any, send: Any) -> None:
        found["user"] = scope.get("user")

    await LiveAuthMiddlewareStack(capture)(scope, None, None)
    return found.get("user")


class SameHostOriginValidator(OriginValidator):
    """Browsers always send ``Origin`` on a WebSocket handshake: it must be one of
    ``ALLOWED_HOSTS`` (no cross-site hijacking of a session). Scripts send none and
    authenticate with a token, so a missing ``Origin`` is accepted."""

    def valid_origin(self, parsed_origin):
        return parsed_origin is None or self.validate_origin(parsed_origin)


def LiveOriginValidator(inner):
    return SameHostOriginValidator(inner, settings.ALLOWED_HOSTS)


def origin_allowed(origin: str | None) -> bool:
    """The same rule for Socket.IO's handshakes and polling requests."""
    parsed = urlparse(origin) if origin else None
    return bool(SameHostOriginValidator(None, settings.ALLOWED_HOSTS).valid_origin(parsed))
