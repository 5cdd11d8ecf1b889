"""The services the settings chose actually work: this suite runs once on the embedded default
(SQLite, ORM broker, in-process channel layer) and once on PostgreSQL + Redis (CI)."""

from __future__ import annotations

import os
import uuid

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django_q.brokers import get_broker
from django_q.signing import SignedPackage

SCALE = bool(os.environ.get("REDIS_URL"))


@pytest.mark.django_db
def test_database_is_the_configured_one():
    if os.environ.get("DATABASE_URL"):
        assert connection.vendor == "postgresql"
    else:
        assert connection.vendor == "sqlite"
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"


def test_channel_layer_round_trip():
    layer = get_channel_layer()
    expected = "RedisChannelLayer" if SCALE else "InMemoryChannelLayer"
    assert type(layer).__name__ == expected

    async def round_trip():
        channel = await layer.new_channel()
        await layer.group_add("probe", channel)
        await layer.group_send("probe", {"type": "probe.event", "n": 7})
        message = await layer.receive(channel)
        await layer.group_discard("probe", channel)
        return message

    assert async_to_sync(round_trip)() == {"type": "probe.event", "n": 7}


@pytest.mark.django_db(transaction=True)
def test_task_broker_round_trip():
    broker = get_broker(f"probe-{uuid.uuid4().hex}")
    assert type(broker).__name__ == ("Redis" if SCALE else "ORM")
    task = {"id": uuid.uuid4().hex, "func": "math.floor", "args": (2.5,)}
    broker.enqueue(SignedPackage.dumps(task))
    [(task_id, payload)] = broker.dequeue()
    assert SignedPackage.loads(payload) == task
    broker.acknowledge(task_id)
    broker.purge_queue()
    assert broker.queue_size() == 0
