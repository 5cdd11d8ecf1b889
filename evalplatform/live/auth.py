"""Live-event authentication: the browser's session, or an API token for scripts
(``Authorization: Token <key>`` header, as on the REST API). The plain WebSocket runs the
stack below as middleware; Socket.IO runs the same stack on its handshake (``scope_sign_in``)
and also takes the token from its ``auth`` payload (``token_sign_in``), since browsers cannot
set headers on a WebSocket. Either way the connection keeps its ``Credential`` (which session
or token it came with), so its ``rights.Guard`` can tell when that one is gone."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import validate_host

from evalplatform.accounts.services import token_authenticate
from evalplatform.live.rights import Credential

CREDENTIAL = "live_credential"  # the scope's key


def token_sign_in(key: str) -> tuple[Any, Credential] | None:
    """The user an API token's key authenticates, with the token as credential; or None."""
    token = token_authenticate(key)
    if token is None:
        return None
    return token.user, Credential(token.user_id, token_id=token.pk)


def _header_sign_in(header: bytes) -> tuple[Any, Credential] | None:
    parts = header.decode("latin-1").split()
    if len(parts) != 2 or parts[0].lower() not in ("token", "bearer"):
        return None
    return token_sign_in(parts[1])


class TokenAuthMiddleware(BaseMiddleware):
    """After the session's sign-in: the token's, if the session signed no one in. Records
    the connection's credential in the scope either way."""

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is not None and user.is_authenticated:
            session_key = getattr(scope.get("session"), "session_key", None)
            scope = dict(scope, **{CREDENTIAL: Credential(user.pk, session_key=session_key)})
        else:
            header = dict(scope.get("headers") or []).get(b"authorization")
            if header:
                signed_in = await database_sync_to_async(_header_sign_in)(header)
                if signed_in is not None:
                    token_user, credential = signed_in
                    scope = dict(scope, user=token_user, **{CREDENTIAL: credential})
        return await super().__call__(scope, receive, send)


def LiveAuthMiddlewareStack(inner):
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


def scope_credential(scope: dict[str, Any]) -> Credential | None:
    """A signed-in connection's credential (None if no one signed in)."""
    credential = scope.get(CREDENTIAL)
    user = scope.get("user")
    if credential is None and user is not None and user.is_authenticated:
        credential = Credential(user.pk)  # a scope made without the sign-in stack
    return credential


async def scope_sign_in(scope: dict[str, Any]) -> tuple[Any, Credential | None]:
    """The user a connection's ASGI scope authenticates as, by the same stack as the
    WebSocket's (session cookie, then token header), and its credential; anonymous and None
    if neither."""
    found: dict[str, Any] = {}

    async def capture(scope: dict[str, Any], receive: Any, send: Any) -> None:
        found["user"] = scope.get("user")
        found["credential"] = scope_credential(scope)

    await LiveAuthMiddlewareStack(capture)(scope, None, None)
    return found.get("user"), found.get("credential")


def same_site(origin: str | None, host: str | None, *, secure: bool) -> bool:
    """Whether a browser's ``Origin`` is this server: a host of ``ALLOWED_HOSTS`` on the port
    the connection came to (``host``: its ``Host`` header; another port of the same machine
    is another site), or one of ``CSRF_TRUSTED_ORIGINS``. Scripts send no ``Origin`` and
    authenticate with a token, so a missing one is accepted."""
    if not origin:
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    try:
        parsed, served = urlparse(origin), urlparse(f"//{host or ''}")
        origin_port = parsed.port or (443 if parsed.scheme == "https" else 80)
        served_port = served.port or (443 if secure else 80)
    except ValueError:
        return False
    hostname = parsed.hostname or ""
    return (
        bool(hostname)
        and origin_port == served_port
        and validate_host(hostname, settings.ALLOWED_HOSTS)
    )


class LiveOriginValidator:
    """Refuses a WebSocket handshake whose ``Origin`` is another site (``same_site``): no
    page of another site, nor of another port of this machine, rides on a user's session."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or [])
        origin, host = headers.get(b"origin"), headers.get(b"host")
        if same_site(
            origin.decode("latin1") if origin is not None else None,
            host.decode("latin1") if host is not None else None,
            secure=scope.get("scheme") in ("wss", "https"),
        ):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)


def origin_allowed(origin: str | None, environ: dict[str, Any] | None = None) -> bool:
    """The same rule for Socket.IO's handshakes and polling requests (engine.io passes the
    request's WSGI-style ``environ``)."""
    environ = environ or {}
    return same_site(
        origin,
        environ.get("HTTP_HOST"),
        secure=environ.get("wsgi.url_scheme") in ("https", "wss"),
    )
