"""The base of every live WebSocket: authenticate, authorize one object, join its group, send
a snapshot, then relay the group's events while the user keeps the right to them.

Messages to the client are JSON objects ``{"event": name, "data": {...}}``; the first one is
the topic's snapshot. Close codes: 4401 not signed in, or no longer (the token was revoked, the
session ended, the user was deactivated); 4403 no longer allowed to watch the object (the
membership was removed or its role changed); 4404 not found or not the user's to see (another
team's object is indistinguishable from a missing one); 4429 too many live connections of the
user's are open (``evalplatform.live.quota``). Rights are re-checked every
``LIVE_RECHECK_S`` and at once when a change is announced (``evalplatform.live.rights``).
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from evalplatform.errors import NotFound
from evalplatform.live import quota
from evalplatform.live.auth import scope_credential
from evalplatform.live.rights import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED, Guard
from evalplatform.live.watch import Topic, Watch

__all__ = ["CLOSE_FORBIDDEN", "CLOSE_NOT_FOUND", "CLOSE_UNAUTHENTICATED", "LiveConsumer"]

CLOSE_NOT_FOUND = 4404


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Subclasses name their ``topic`` and the URL's keyword argument holding the object id."""

    topic: Topic
    url_kwarg: str
    watch: Watch | None = None
    guard: Guard | None = None
    counted: int | None = None  # the user whose count of live connections this is in

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        credential = scope_credential(self.scope)
        if user is None or not user.is_authenticated or credential is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not quota.take(user.pk):
            await self.close(code=quota.CLOSE_TOO_MANY)
            return
        self.counted = user.pk
        pk = self.scope["url_route"]["kwargs"][self.url_kwarg]
        try:
            group = await database_sync_to_async(self.topic.authorize)(user, pk)
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.guard = Guard(credential, self._revoked)
        self.guard.targets = [(self.topic, pk)]
        # Join the user's group before the check below: a change announced from here on is
        # heard, and one before is seen by the check.
        await self.channel_layer.group_add(self.guard.group, self.channel_name)
        self.watch = Watch(self.channel_layer, group, self.channel_name)
        await self.watch.start()
        if not await self.guard.check():  # rights gone while connecting
            return
        self.guard.start()
        await self.send_json(await database_sync_to_async(self.topic.snapshot)(pk))

    async def _revoked(self, code: int) -> None:
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self.counted is not None:
            quota.give_back(self.counted)
            self.counted = None
        if self.guard is not None:
            await self.guard.stop()
            await self.channel_layer.group_discard(self.guard.group, self.channel_name)
            self.guard = None
        if self.watch is not None:
            await self.watch.stop()
            self.watch = None

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; anything they send is ignored."""

    async def live_events(self, message: dict[str, Any]) -> None:
        guard = self.guard
        for event in message["events"]:
            if guard is None or await guard.heard(event):
                continue
            if guard.revoked is not None:  # nothing more once the rights are gone
                return
            await self.send_json(event)
