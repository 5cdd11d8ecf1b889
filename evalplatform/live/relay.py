"""The web-process side of the database transport: forwards new outbox rows to this process's
channel layer, so consumers receive them like any group message.

One relay runs per event loop while at least one consumer is subscribed. Rows that exist
when it starts are skipped (each client's snapshot covers them). It polls every ``POLL_S``,
only while someone is watching: the ids of the rows of the last ``WINDOW`` (an indexed
query), then the rows it has not sent yet. Reading a window rather than "ids above the last
one" matters on PostgreSQL, where a row with a lower id can commit after one with a higher
id (two workers writing at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from evalplatform.live.models import LiveEvent
from evalplatform.live.transport import MESSAGE_TYPE

logger = logging.getLogger(__name__)
POLL_S = 0.1
BATCH = 200


WINDOW = timedelta(seconds=10)


def _window(since: datetime) -> list[tuple[int, datetime]]:
    return list(LiveEvent.objects.filter(created_at__gte=since).values_list("pk", "created_at"))


def _rows(pks: list[int]) -> list[tuple[int, str, Any]]:
    return list(
        LiveEvent.objects.filter(pk__in=pks).order_by("pk").values_list("pk", "group", "events")
    )


class _LoopRelay:
    def __init__(self) -> None:
        self.subscribers = 0
        self.ready = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        layer = get_channel_layer()
        assert layer is not None
        # Rows already there are covered by the snapshots: seen, not sent.
        seen = dict(await database_sync_to_async(_window)(timezone.now() - WINDOW))
        self.ready.set()
        while self.subscribers > 0:
            since = timezone.now() - WINDOW
            rows: list[tuple[int, str, Any]] = []
            try:
                window = await database_sync_to_async(_window)(since)
                new = sorted(pk for pk, _ in window if pk not in seen)[:BATCH]
                if new:
                    rows = await database_sync_to_async(_rows)(new)
                    taken = set(new)
                    seen.update((pk, created) for pk, created in window if pk in taken)
            except Exception:  # a busy or restarting database: try again next tick
                logger.exception("live relay: reading the outbox failed")
            for _pk, group, events in rows:
                await layer.group_send(group, {"type": MESSAGE_TYPE, "events": events})
            seen = {pk: created for pk, created in seen.items() if created >= since}
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
        # Forget it before waiting for it to stop: a client that subscribes meanwhile starts
        # a new relay instead of joining this one.
        _relays.pop(loop, None)
        relay.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await relay.task
