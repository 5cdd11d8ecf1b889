"""The web-process side of the database transport: forwards new outbox rows to this process's
channel layer, so consumers receive them like any group message.

One relay runs per event loop while at least one consumer is subscribed. It starts from the
newest row at the time it starts (what came before is covered by each client's snapshot) and
polls every ``POLL_S``: one indexed query, only while someone is watching.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db.models import Max

from evalplatform.live.models import LiveEvent
from evalplatform.live.transport import MESSAGE_TYPE

logger = logging.getLogger(__name__)
POLL_S = 0.1
BATCH = 200


def _latest() -> int:
    return LiveEvent.objects.aggregate(last=Max("pk"))["last"] or 0


def _after(last: int) -> list[tuple[int, str, Any]]:
    return list(
        LiveEvent.objects.filter(pk__gt=last)
        .order_by("pk")
        .values_list("pk", "group", "events")[:BATCH]
    )


class _LoopRelay:
    def __init__(self) -> None:
        self.subscribers = 0
        self.ready = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        layer = get_channel_layer()
        assert layer is not None
        last = await database_sync_to_async(_latest)()
        self.ready.set()
        while self.subscribers > 0:
            try:
                rows = await database_sync_to_async(_after)(last)
            except Exception:  # a busy or restarting database: try again next tick
                logger.exception("live relay: reading the outbox failed")
                rows = []
            for pk, group, events in rows:
                await layer.group_send(group, {"type": MESSAGE_TYPE, "events": events})
                last = pk
            if len(rows) < BATCH:
                await asyncio.sleep(POLL_S)


_relays: dict[asyncio.AbstractEventLoop, _LoopRelay] = {}


async def subscribe() -> None:
    """Count one more watcher on this loop; returns once the relay has its starting point."""
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is None or relay.task is None or relay.task.done():
        relay = _relays[loop] = _LoopRelay()
        relay.subscribers = 1
        relay.task = loop.create_task(relay.run())
    else:
        relay.subscribers += 1
    await relay.ready.wait()


async def unsubscribe() -> None:
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is None:
        return
    relay.subscribers -= 1
    if relay.subscribers <= 0 and relay.task is not None:
        relay.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await relay.task
        _relays.pop(loop, None)
