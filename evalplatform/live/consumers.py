"""The base of every live WebSocket: authenticate, authorize one object, join its group, send
a snapshot, then relay the group's events.

Messages to the client are JSON objects ``{"event": name, "data": {...}}``; the first one is
the topic's snapshot. Close codes: 4401 not signed in, 4404 not found or not the user's to
see (another team's object is indistinguishable from a missing one).
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from evalplatform.errors import NotFound
from evalplatform.live.watch import Topic, Watch

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Subclasses name their ``topic`` and the URL's keyword argument holding the object id."""

    topic: Topic
    url_kwarg: str
    watch: Watch | None = None

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        pk = self.scope["url_route"]["kwargs"][self.url_kwarg]
        try:
            group = await database_sync_to_async(self.topic.authorize)(user, pk)
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.watch = Watch(self.channel_layer, group, self.channel_name)
        await self.watch.start()
        await self.send_json(await database_sync_to_async(self.topic.snapshot)(pk))

    async def disconnect(self, code: int) -> None:
        if self.watch is not None:
            await self.watch.stop()
            self.watch = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def live_events(self, message: dict[str, Any]) -> None:
        for event in message["events"]:
            await self.send_json(event)
