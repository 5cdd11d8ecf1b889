"""WebSocket authentication: the browser's session, or an API token for scripts
(``Authorization: Token <key>`` header, as on the REST API)."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings

from evalplatform.accounts.services import token_authenticate


def _token_user(header: bytes) -> Any:
    parts = header.decode("latin-1").split()
    if len(parts) != 2 or parts[0].lower() not in ("token", "bearer"):
        return None
    token = token_authenticate(parts[1])
    return token.user if token is not None else None


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


class SameHostOriginValidator(OriginValidator):
    """Browsers always send ``Origin`` on a WebSocket handshake: it must be one of
    ``ALLOWED_HOSTS`` (no cross-site hijacking of a session). Scripts send none and
    authenticate with a token, so a missing ``Origin`` is accepted."""

    def valid_origin(self, parsed_origin):
        return parsed_origin is None or self.validate_origin(parsed_origin)


def LiveOriginValidator(inner):
    return SameHostOriginValidator(inner, settings.ALLOWED_HOSTS)
