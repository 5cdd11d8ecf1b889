"""How events travel from a worker process to the web processes' WebSocket clients.

- ``channel_layer`` (scale mode, channels-redis): a worker sends to the group directly.
- ``database`` (the embedded default, no Redis): a worker appends the message to the
  ``LiveEvent`` outbox; each web process's relay reads new rows and forwards them to its
  in-memory channel layer. Web and worker processes share nothing else, and need nothing else.

A message is one list of events (``{"event": name, "data": {...}}``) for one group.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evalplatform.live.models import LiveEvent

MESSAGE_TYPE = "live.events"
SEND_TIMEOUT_S = 10.0
KEEP = timedelta(minutes=10)


def uses_database() -> bool:
    return settings.LIVE_TRANSPORT == "database"


def _message(events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": MESSAGE_TYPE, "events": events}


def send(group: str, events: list[dict[str, Any]]) -> None:
    """Send from synchronous code (services, tasks); never from inside an event loop."""
    if not events:
        return
    if uses_database():
        LiveEvent.objects.create(group=group, events=events)
    else:
        layer = get_channel_layer()
        assert layer is not None
        async_to_sync(layer.group_send)(group, _message(events))


def send_on_commit(group: str, events: list[dict[str, Any]]) -> None:
    """Send once the surrounding transaction commits (nothing is announced that rolled back)."""
    transaction.on_commit(lambda: send(group, events))


async def asend(
    group: str,
    events: list[dict[str, Any]],
    *,
    with_write: Callable[[], None] | None = None,
) -> None:
    """Send from a running event loop. ``with_write`` is the sender's own database write
    (partial texts, ...); in database mode it shares the outbox insert's transaction."""
    if uses_database():

        def write() -> None:
            with transaction.atomic():
                if with_write is not None:
                    with_write()
                if events:
                    LiveEvent.objects.create(group=group, events=events)

        await sync_to_async(write)()
        return
    if with_write is not None:
        await sync_to_async(with_write)()
    if events:
        layer = get_channel_layer()
        assert layer is not None
        await asyncio.wait_for(layer.group_send(group, _message(events)), SEND_TIMEOUT_S)


def prune() -> int:
    """Delete outbox rows older than ``KEEP`` and expired watchers (scheduled every minute)."""
    from evalplatform.live import presence

    deleted, _ = LiveEvent.objects.filter(created_at__lt=timezone.now() - KEEP).delete()
    return deleted + presence.prune()
