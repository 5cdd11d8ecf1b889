"""Live events over Socket.IO at ``/socket.io/``, beside the plain WebSocket.

A client connects (session cookie, ``Authorization: Token <key>`` header, or the Socket.IO
``auth`` payload ``{"token": "<key>"}``; otherwise the connection is refused), then emits
``subscribe`` with ``{<topic>: <id>}`` (``{"job": 12}``). The acknowledgement is
``{"ok": true, "job": 12}`` or ``{"ok": false, "error": "invalid" | "not_found", ...}``; on
success the topic's snapshot arrives first, then every event of the object under its own
name with the same ``data`` as the WebSocket sends. A connection watches one object at a
time: ``subscribe`` to another replaces it, ``unsubscribe`` stops it.

A connection follows its user's rights (``evalplatform.live.rights``): they are re-checked
every ``LIVE_RECHECK_S`` and at once when a change is announced. Once they are gone, no further
event is forwarded; the client gets ``live:revoked`` with ``{"code": 4401, "reason":
"unauthenticated", ...}`` (the token was revoked, the session ended, the user was deactivated)
or ``{"code": 4403, "reason": "forbidden", ...}`` (no longer allowed to watch the object),
and is disconnected.

Delivery reuses the WebSocket's road (``evalplatform.live.watch``): each subscription gets a
channel of its own on the channel layer and joins the object's group, and a task forwards
what arrives on it to the client. Events published by task workers reach it in both modes:
through channels-redis in scale mode, through the outbox and this process's relay in the
embedded default. The events are sent straight to the local client (``ignore_queue``): every
web process receives its own clients' events from the channel layer already. In scale mode
the server's client manager is ``AsyncRedisManager``, so what one web process addresses to a
client or room elsewhere (an emit, a disconnect) reaches the process holding it.

python-socketio's server, and its Redis manager, belong to the event loop they first run on;
``SocketIOApp`` keeps one per loop (a process has one; the tests start a server per test).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import socketio
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist

from evalplatform.errors import FieldErrors, NotFound
from evalplatform.live import quota, socketio_path
from evalplatform.live.auth import origin_allowed, scope_sign_in, token_sign_in
from evalplatform.live.rights import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED, Guard, current_user
from evalplatform.live.transport import MESSAGE_TYPE
from evalplatform.live.watch import Topic, Watch
from evalplatform.validation import whole_number

logger = logging.getLogger(__name__)

PATH = socketio_path.PATH
ID_MAX = 2**63 - 1  # a BigAutoField's largest key
MAX_PAYLOAD_BYTES = 16 * 1024  # clients only name what to watch
TOKEN_MAX_CHARS = 200
REVOKED = "live:revoked"
REVOKED_REASONS = {
    CLOSE_UNAUTHENTICATED: ("unauthenticated", "Not signed in any more."),
    CLOSE_FORBIDDEN: ("forbidden", "No longer allowed to watch this."),
}


INT_DIGITS_MAX = 30  # longer integers in a client's message are too large for any id


class _TooLarge:
    """An integer too long to read: what validation then refuses as too large."""


def _read_int(digits: str) -> int | _TooLarge:
    return _TooLarge() if len(digits) > INT_DIGITS_MAX else int(digits)


class _Json:
    """Socket.IO's JSON with integers bounded while reading (the library's own bound drops
    the whole message, so the client would wait for an answer that never comes)."""

    dumps = staticmethod(json.dumps)

    @staticmethod
    def loads(text: str | bytes, **kwargs: Any) -> Any:
        return json.loads(text, parse_int=_read_int, **kwargs)


class _Packet(socketio.packet.Packet):
    json = _Json


@dataclass
class _Subscription:
    kind: str
    pk: int
    watch: Watch
    forwarder: asyncio.Task[None]


def _error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error": code, "message": message, **extra}


class LiveServer:
    """One Socket.IO server: its handlers and the subscription of each connected client."""

    def __init__(self, topics: Mapping[str, Topic]):
        self.topics = dict(topics)
        manager = (
            socketio.AsyncRedisManager(settings.REDIS_URL, channel="evalplatform:socketio")
            if settings.REDIS_URL
            else None
        )
        self.sio = socketio.AsyncServer(
            async_mode="asgi",
            client_manager=manager,
            serializer=_Packet,
            cors_allowed_origins=origin_allowed,
            max_http_buffer_size=MAX_PAYLOAD_BYTES,
            logger=False,
            engineio_logger=False,
        )
        self.subscriptions: dict[str, _Subscription] = {}
        self.guards: dict[str, Guard] = {}
        # The user each connected client counts against (``evalplatform.live.quota``).
        self.counted: dict[str, int] = {}
        self.closing: set[asyncio.Task[None]] = set()
        # Events of one client are handled one at a time (subscribe, unsubscribe, leaving).
        self.locks: dict[str, asyncio.Lock] = {}
        self.sio.on("connect", self.connect)
        self.sio.on("disconnect", self.disconnect)
        self.sio.on("subscribe", self.subscribe)
        self.sio.on("unsubscribe", self.unsubscribe)

    async def connect(self, sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        # The user is read afresh at each subscribe: only the credential is kept.
        _, credential = await scope_sign_in(environ["asgi.scope"])
        if credential is None and isinstance(auth, dict):
            key = auth.get("token")
            if isinstance(key, str) and 0 < len(key) <= TOKEN_MAX_CHARS:
                signed_in = await database_sync_to_async(token_sign_in)(key)
                if signed_in is not None:
                    _, credential = signed_in
        if credential is None:
            raise socketio.exceptions.ConnectionRefusedError("Not signed in.")
        if not quota.take(credential.user_id):
            raise socketio.exceptions.ConnectionRefusedError(quota.TOO_MANY)
        self.counted[sid] = credential.user_id

        async def revoked(code: int) -> None:
            await self._revoked(sid, code)

        self.locks[sid] = asyncio.Lock()
        self.guards[sid] = guard = Guard(credential, revoked)
        guard.start()

    async def disconnect(self, sid: str, *args: Any) -> None:
        counted = self.counted.pop(sid, None)
        if counted is not None:
            quota.give_back(counted)
        lock = self.locks.get(sid)
        if lock is None:
            return
        async with lock:
            await self._stop(sid)
            self.locks.pop(sid, None)
            guard = self.guards.pop(sid, None)
            if guard is not None:
                await guard.stop()

    async def _revoked(self, sid: str, code: int) -> None:
        """The user's rights are gone (the guard forwards nothing more from now): say why,
        then disconnect. In a task of its own: leaving ends the subscription and its
        forwarder, which may be what noticed."""
        task = asyncio.create_task(self._close(sid, code))
        self.closing.add(task)
        task.add_done_callback(self.closing.discard)

    async def _close(self, sid: str, code: int) -> None:
        reason, message = REVOKED_REASONS[code]
        payload = {"code": code, "reason": reason, "message": message}
        try:
            await self.sio.emit(REVOKED, payload, to=sid, ignore_queue=True)
            await self.sio.disconnect(sid, ignore_queue=True)
        except Exception:  # the client may be gone already
            logger.exception("could not disconnect Socket.IO client %s", sid)

    async def subscribe(self, sid: str, *args: Any) -> dict[str, Any]:
        try:
            kind, pk = self._target(args)
        except FieldErrors as invalid:
            return _error("invalid", invalid.message, errors=invalid.errors)
        lock, guard = self.locks.get(sid), self.guards.get(sid)
        if lock is None or guard is None:  # the client has left meanwhile
            return _error("not_found", NotFound.default_message)
        # Authorized as the user is now, not as they signed in; on a credential still valid
        # (revoking disconnects, which takes the lock: not while holding it).
        user = await database_sync_to_async(current_user)(guard.credential)
        if user is None:
            await guard.revoke(CLOSE_UNAUTHENTICATED)
            return _error("not_found", NotFound.default_message)
        async with lock:
            topic = self.topics[kind]
            try:
                group = await database_sync_to_async(topic.authorize)(user, pk)
            except NotFound:
                # Alike for a missing object and another team's: nothing tells them apart.
                return _error("not_found", NotFound.default_message)
            layer = get_channel_layer()
            assert layer is not None
            watch = Watch(layer, group, await layer.new_channel())
            # The subscription's channel hears the user's changes of rights too.
            await layer.group_add(guard.group, watch.channel_name)
            await watch.start()
            forwarder: asyncio.Task[None] | None = None
            try:
                try:
                    snapshot = await database_sync_to_async(topic.snapshot)(pk)
                except (NotFound, ObjectDoesNotExist):
                    # Deleted since it was authorized: the old subscription, if any, stays.
                    return _error("not_found", NotFound.default_message)
                if guard.revoked is not None:  # rights gone meanwhile; disconnecting
                    return _error("not_found", NotFound.default_message)
                await self._stop(sid)
                await self.sio.emit(snapshot["event"], snapshot["data"], to=sid, ignore_queue=True)
                forwarder = asyncio.create_task(self._forward(sid, watch.channel_name, guard))
            finally:
                if forwarder is None:
                    await watch.stop()
                    await layer.group_discard(guard.group, watch.channel_name)
            self.subscriptions[sid] = _Subscription(kind, pk, watch, forwarder)
            guard.targets = [(topic, pk)]
            return {"ok": True, kind: pk}

    async def unsubscribe(self, sid: str, *args: Any) -> dict[str, Any]:
        lock = self.locks.get(sid)
        if lock is not None:
            async with lock:
                await self._stop(sid)
        return {"ok": True}

    def _target(self, args: tuple[Any, ...]) -> tuple[str, int]:
        """The topic and id a ``subscribe`` names, e.g. ``{"job": 12}``."""
        example = ", ".join(f'{{"{kind}": <id>}}' for kind in self.topics)
        if len(args) != 1 or not isinstance(args[0], dict):
            raise FieldErrors({"non_field_errors": f"Send one object: {example}."})
        (data,) = args
        errors: dict[str, str] = {}
        for key in data:
            if key not in self.topics:
                errors[str(key)[:100]] = "Unknown field."
        kinds = [key for key in data if key in self.topics]
        if not errors and len(kinds) != 1:
            errors["non_field_errors"] = f"Name one object to watch: {example}."
        if errors:
            raise FieldErrors(errors)
        (kind,) = kinds
        message = f"An id: a whole number from 1 to {ID_MAX}."
        value = data[kind]
        if isinstance(value, str):  # form fields' digit strings do not count here
            errors[kind] = message
        pk = whole_number(value, name=kind, lo=1, hi=ID_MAX, errors=errors, message=message)
        if errors or pk is None:
            raise FieldErrors(errors or {kind: message})
        return kind, pk

    async def _forward(self, sid: str, channel: str, guard: Guard) -> None:
        layer = get_channel_layer()
        assert layer is not None
        try:
            while True:
                message = await layer.receive(channel)
                if message.get("type") != MESSAGE_TYPE:
                    continue
                for event in message["events"]:
                    if await guard.heard(event):
                        continue
                    if guard.revoked is not None:  # nothing more once the rights are gone
                        return
                    await self.sio.emit(event["event"], event["data"], to=sid, ignore_queue=True)
        except Exception:
            # The client would miss events from here on: let it reconnect and start over
            # from a snapshot.
            logger.exception("live events for Socket.IO client %s failed", sid)
            await self.sio.disconnect(sid, ignore_queue=True)

    async def _stop(self, sid: str) -> None:
        subscription = self.subscriptions.pop(sid, None)
        if subscription is None:
            return
        if subscription.forwarder is not asyncio.current_task():  # not a failed forwarder's
            subscription.forwarder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await subscription.forwarder
        await subscription.watch.stop()
        guard = self.guards.get(sid)
        if guard is not None:
            guard.targets = []
            layer = get_channel_layer()
            assert layer is not None
            await layer.group_discard(guard.group, subscription.watch.channel_name)


class SocketIOApp:
    """The ASGI application of ``/socket.io/``: a ``LiveServer`` per event loop."""

    def __init__(self, topics: Mapping[str, Topic]):
        self.topics = topics
        self._servers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[LiveServer, socketio.ASGIApp]
        ] = weakref.WeakKeyDictionary()

    def _for_this_loop(self) -> tuple[LiveServer, socketio.ASGIApp]:
        loop = asyncio.get_running_loop()
        found = self._servers.get(loop)
        if found is None:
            live = LiveServer(self.topics)
            found = self._servers[loop] = (live, socketio.ASGIApp(live.sio, socketio_path=PATH))
        return found

    def server(self) -> LiveServer:
        """This event loop's server."""
        return self._for_this_loop()[0]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self._for_this_loop()[1](scope, receive, send)

    handles = staticmethod(socketio_path.handles)
