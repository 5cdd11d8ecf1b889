"""The base of every live WebSocket: authenticate, authorize one object, join its group, send
a snapshot, then relay the group's events.

Messages to the client are JSON objects ``{"event": name, "data": {...}}``; the first one is
the subclass's snapshot. Close codes: 4401 not signed in, 4404 not found or not the user's to
see (another team's object is indistinguishable from a missing one).
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from evalplatform.errors import NotFound
from evalplatform.live import presence, relay
from evalplatform.live.transport import uses_database

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class LiveConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None
    renewal: asyncio.Task[None] | None = None

    def authorize(self, user: Any, **kwargs: Any) -> str:
        """The group to join for this user and URL; raise ``NotFound`` if not theirs."""
        raise NotImplementedError

    def snapshot(self) -> dict[str, Any]:
        """The first message: the object's current state."""
        raise NotImplementedError

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            group = await database_sync_to_async(self.authorize)(
                user, **self.scope["url_route"]["kwargs"]
            )
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        # Join first, then read the snapshot: an event that happens in between arrives after
        # the snapshot and is applied on top of it (events carry absolute counts and offsets).
        await self.channel_layer.group_add(group, self.channel_name)
        self.group = group
        if uses_database():
            await relay.subscribe()
        await database_sync_to_async(presence.watch)(group, self.channel_name)
        self.renewal = asyncio.create_task(self._renew(group))
        await self.send_json(await database_sync_to_async(self.snapshot)())

    async def _renew(self, group: str) -> None:
        while True:
            await asyncio.sleep(presence.RENEW_S)
            await database_sync_to_async(presence.watch)(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.group is None:
            return
        if self.renewal is not None:
            self.renewal.cancel()
        await database_sync_to_async(presence.unwatch)(self.channel_name)
        await self.channel_layer.group_discard(self.group, self.channel_name)
        if uses_database():
            await relay.unsubscribe()
        self.group = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def live_events(self, message: dict[str, Any]) -> None:
        for event in message["events"]:
            await self.send_json(event)
