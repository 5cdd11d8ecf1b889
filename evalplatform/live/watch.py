"""What a live client may watch (a ``Topic``), and one client watching one group (``Watch``).

Both transports, the plain WebSocket (``consumers``) and Socket.IO (``socketio_app``), watch
through ``Watch``: the client's channel joins the group on the channel layer, the database
transport's relay counts it, and ``presence`` knows someone is looking. Events therefore reach
either kind of client by the same road, from a web process or a worker, in both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async

from evalplatform.live import presence, relay
from evalplatform.live.transport import uses_database


@dataclass(frozen=True)
class Topic:
    """One kind of object whose events a client may watch (an app's, e.g. a generation job).

    ``authorize(user, pk)`` returns the group to join, or raises ``NotFound`` alike for a
    missing object and one the user may not see. ``snapshot(pk)`` is the first message,
    ``{"event": name, "data": {...}}``: the object's current state. Both run in a thread
    (they query the database).
    """

    authorize: Callable[[Any, int], str]
    snapshot: Callable[[int], dict[str, Any]]


class Watch:
    """One client's membership of one group, from ``start`` to ``stop``."""

    def __init__(self, layer: Any, group: str, channel_name: str):
        self.layer = layer
        self.group = group
        self.channel_name = channel_name
        self.renewal: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Join the group. Read the snapshot after this: an event that happens in between
        arrives after the snapshot and is applied on top of it (events carry absolute counts
        and offsets)."""
        await self.layer.group_add(self.group, self.channel_name)
        if uses_database():
            await relay.subscribe()
        await database_sync_to_async(presence.watch)(self.group, self.channel_name)
        self.renewal = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(presence.RENEW_S)
            await database_sync_to_async(presence.watch)(self.group, self.channel_name)

    async def stop(self) -> None:
        if self.renewal is None:
            return
        self.renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.renewal
        self.renewal = None
        await database_sync_to_async(presence.unwatch)(self.channel_name)
        await self.layer.group_discard(self.group, self.channel_name)
        if uses_database():
            await relay.unsubscribe()
