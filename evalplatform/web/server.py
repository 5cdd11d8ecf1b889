"""The HTTP protocol ``manage.py serve`` runs: uvicorn's (httptools), holding against slow and
heavy clients, which uvicorn alone does not.

- **Header timeout**: a request's line and headers arrive within ``SERVE_HEADER_TIMEOUT_S``
  of its first byte (and a new connection sends its first byte within as long), or the
  connection is closed. uvicorn has no such timeout: a client that sends half a request
  held its connection forever.
- **Body idle timeout**: while a body arrives, no more than ``SERVE_BODY_IDLE_TIMEOUT_S``
  between two pieces of it (a slow link uploads at its own pace; a stalled one is cut).
  Time the server itself stops reading (the app has not taken the body yet) does not count.
- **Connections per address**: at most ``SERVE_CONNECTIONS_PER_ADDRESS`` open connections
  from one client address (WebSockets too); the next is answered 503 and closed, so one
  client cannot take every file descriptor. Addresses in ``TRUSTED_PROXIES`` are exempt (a
  proxy carries everyone's connections).

uvicorn's own ``limit_concurrency`` (a 503 past ``SERVE_MAX_CONNECTIONS``) and
``timeout_keep_alive`` (``SERVE_KEEP_ALIVE_S``) bound the rest (``serve_options``).
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any, ClassVar

from django.conf import settings
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _answer(status: str, text: str, *headers: str) -> bytes:
    """A whole response that closes the connection (sent before any of the app's)."""
    body = text.encode()
    head = [f"HTTP/1.1 {status}", "content-type: text/plain; charset=utf-8", *headers,
            "connection: close", f"content-length: {len(body)}"]  # fmt: skip
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


BUSY = _answer(
    "503 Service Unavailable", "Too many connections from your address: wait.\n", "retry-after: 5"
)
TOO_SLOW = _answer("408 Request Timeout", "The request came too slowly.\n")


class GuardedHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol with the guards above (one event loop per process: the
    per-address count is this process's)."""

    # Open connections by client address (pruned of closed ones as it is read: a
    # connection upgraded to a WebSocket leaves this protocol without a connection_lost).
    held: ClassVar[dict[str, set[asyncio.BaseTransport]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        if address is not None and address not in settings.TRUSTED_PROXIES:
            open_ = {t for t in self.held.get(address, ()) if not t.is_closing()}
            self.held[address] = open_
            if len(open_) >= settings.SERVE_CONNECTIONS_PER_ADDRESS:
                transport.write(BUSY)
                transport.close()
                return
            open_.add(transport)
        self._arm(settings.SERVE_HEADER_TIMEOUT_S)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        address = self.client[0] if self.client else None
        if address is not None and address in self.held:
            self.held[address].discard(self.transport)
            if not self.held[address]:
                del self.held[address]
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _too_slow(self) -> None:
        self.deadline = None
        if self.transport.is_closing():
            return
        if self.flow is not None and self.flow.read_paused:  # the server's pause, not theirs
            self._arm(settings.SERVE_BODY_IDLE_TIMEOUT_S)
            return
        if self.cycle is None or self.cycle.response_complete or not self.cycle.response_started:
            self.transport.write(TOO_SLOW)  # nothing of a response is on its way
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(settings.SERVE_HEADER_TIMEOUT_S)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(settings.SERVE_BODY_IDLE_TIMEOUT_S)  # disarmed when the message ends

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._arm(settings.SERVE_BODY_IDLE_TIMEOUT_S)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def handle_websocket_upgrade(self) -> None:
        self._disarm()  # the WebSocket protocol keeps the connection from here on
        super().handle_websocket_upgrade()


def max_connections() -> int:
    """``SERVE_MAX_CONNECTIONS``, or by default what this process's file descriptor limit
    leaves after a margin for the database, the task broker and files."""
    if settings.SERVE_MAX_CONNECTIONS:
        return settings.SERVE_MAX_CONNECTIONS
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - 128))


def serve_options() -> dict[str, Any]:
    """uvicorn's settings for ``serve``: the guarded protocol and its bounds."""
    return {
        "http": GuardedHttp,
        "limit_concurrency": max_connections(),
        "timeout_keep_alive": settings.SERVE_KEEP_ALIVE_S,
    }
