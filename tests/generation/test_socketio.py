"""Live job events over Socket.IO (``/socket.io/``), with python-socketio's own client against
the real ASGI application over loopback: who may connect and subscribe, what a bad
``subscribe`` gets, and that a run's events arrive under the spec's names with exactly the
payloads the plain WebSocket sends (in scale mode through the Redis manager's server)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import socketio
from django.conf import settings

from evalplatform.accounts.roles import Role
from evalplatform.live.models import LiveWatcher
from evalplatform.live.socketio_app import LiveServer
from generation import events
from generation.models import GenerationOutput
from tests.helpers.generation import JOBS, run_in_background
from tests.helpers.live import SioClient, Socket, apply_tokens, created_job, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


async def eventually(check, timeout=10):
    """Wait for the server to catch up (a disconnect is handled after the client leaves)."""
    deadline = time.monotonic() + timeout
    while not await in_thread(check):
        assert time.monotonic() < deadline, f"{check.__doc__ or check} never held"
        await asyncio.sleep(0.05)


def nobody_watches():
    """No watcher is registered."""
    return not LiveWatcher.objects.exists()


async def refusal(client):
    """Why the server refused a connection, or "connected"."""
    try:
        async with client:
            return "connected"
    except socketio.exceptions.ConnectionError as failed:
        return client.refusal or str(failed)


def test_a_connection_needs_a_session_or_a_token(api, creator, setup, platform_server):
    job_id = created_job(api, creator, setup)

    async def scenario():
        not_signed_in = {"message": "Not signed in."}
        assert await refusal(SioClient(platform_server)) == not_signed_in
        bad = SioClient(platform_server)
        bad.credentials = lambda: ({"Authorization": "Token not-a-key"}, {"token": "nope"})
        assert await refusal(bad) == not_signed_in
        # A page of another site cannot ride on the user's session.
        evil = SioClient(
            platform_server,
            session_of=creator,
            origin="http://evil.example",
            transports=["websocket"],
        )
        assert await refusal(evil) != "connected"
        headers, _ = await in_thread(SioClient(platform_server, session_of=creator).credentials)
        async with httpx.AsyncClient(base_url=f"http://{platform_server}") as http:
            handshake = "/socket.io/?EIO=4&transport=polling"
            foreign = await http.get(handshake, headers=headers | {"Origin": "http://evil.example"})
            assert foreign.status_code == 400
            port = int(platform_server.rsplit(":", 1)[1])
            other_port = {"Origin": f"http://localhost:{port + 1}"}
            assert (await http.get(handshake, headers=headers | other_port)).status_code == 400
            assert (await http.get(handshake, headers=headers)).status_code == 200
        # Each way in works, and each sees the same snapshot.
        snapshots = []
        origin = f"http://{platform_server.replace('127.0.0.1', 'localhost')}"
        for client in (
            SioClient(platform_server, user=creator),
            SioClient(platform_server, token_of=creator, transports=["websocket"]),
            SioClient(platform_server, session_of=creator, origin=origin),
        ):
            async with client as sio:
                assert await sio.subscribe({"job": job_id}) == {"ok": True, "job": job_id}
                snapshots.append(await sio.next())
        return snapshots

    snapshots = asyncio.run(scenario())
    assert snapshots[0]["event"] == events.JOB_SNAPSHOT
    assert snapshots[0]["data"]["job_id"] == job_id and snapshots[0]["data"]["total"] == 48
    assert snapshots[1] == snapshots[0] == snapshots[2]


def test_only_users_who_may_view_the_job_can_subscribe(
    api, creator, setup, team_a, team_b, member, platform_server
):
    job_id = created_job(api, creator, setup)
    outsider = member(team_b, Role.ADMIN)
    evaluator = member(team_a, Role.EVALUATOR)  # a member who may not view generation jobs
    viewer = member(team_a, Role.VIEWER)
    not_found = {"ok": False, "error": "not_found", "message": "Not found."}

    async def scenario():
        for user in (outsider, evaluator):
            async with SioClient(platform_server, user=user) as sio:
                assert await sio.subscribe({"job": job_id}) == not_found
                # The same answer as for a job that does not exist.
                assert await sio.subscribe({"job": 999999}) == not_found
                with pytest.raises(TimeoutError):
                    await sio.next(timeout=1)  # no snapshot, no events
        async with SioClient(platform_server, user=viewer) as sio:
            assert await sio.subscribe({"job": job_id}) == {"ok": True, "job": job_id}
            assert (await sio.next())["event"] == events.JOB_SNAPSHOT
            assert not await in_thread(nobody_watches)
        await eventually(nobody_watches)  # the subscription ended with its client

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("payload", "errors"),
    [
        (None, {"non_field_errors": ['Send one object: {"job": <id>}.']}),
        ([1], {"non_field_errors": ['Send one object: {"job": <id>}.']}),
        ("job", {"non_field_errors": ['Send one object: {"job": <id>}.']}),
        ({}, {"non_field_errors": ['Name one object to watch: {"job": <id>}.']}),
        ({"job": 1, "scenario": 2}, {"scenario": ["Unknown field."]}),
        ({"job": "12"}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
        ({"job": 2**63}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
        ({"job": 10**200}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
        ({"job": 0}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
        ({"job": True}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
        ({"job": 1.5}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
        ({"job": None}, {"job": [f"An id: a whole number from 1 to {2**63 - 1}."]}),
    ],
)
def test_a_bad_subscribe_is_refused_with_field_errors(
    payload, errors, api, creator, setup, platform_server
):
    job_id = created_job(api, creator, setup)

    async def scenario():
        async with SioClient(platform_server, user=creator) as sio:
            answer = await sio.subscribe(payload)
            with pytest.raises(TimeoutError):
                await sio.next(timeout=0.5)
            # The connection still works after a refusal.
            assert await sio.subscribe({"job": job_id}) == {"ok": True, "job": job_id}
            assert (await sio.next())["event"] == events.JOB_SNAPSHOT
            return answer

    answer = asyncio.run(scenario())
    assert answer == {
        "ok": False,
        "error": "invalid",
        "message": "Invalid input.",
        "errors": errors,
    }


def test_a_run_reaches_socketio_exactly_as_the_websocket(api, creator, setup, platform_server):
    """One run watched by a WebSocket client and a Socket.IO client: the same snapshot, then
    the same events in the same order with equal payloads, published by the worker."""
    job_id = created_job(api, creator, setup)

    async def scenario():
        path = f"/ws/generation/jobs/{job_id}"
        async with (
            Socket(platform_server, path, user=creator) as ws,
            SioClient(platform_server, token_of=creator) as sio,
        ):
            assert await sio.subscribe({"job": job_id}) == {"ok": True, "job": job_id}
            snapshots = [await ws.next(), await sio.next()]
            start = await in_thread(lambda: api(creator).post(f"{JOBS}/{job_id}/start"))
            assert start.json()["status"] == "running"
            thread, _ = await in_thread(lambda: run_in_background(job_id))
            by_ws = await ws.until(events.JOB_COMPLETED)
            by_sio = await sio.until(events.JOB_COMPLETED)
            await in_thread(lambda: thread.join(60))
            with pytest.raises(TimeoutError):
                late = await sio.next(timeout=1)
                raise AssertionError(f"an event after completion: {late}")
        return snapshots, by_ws, by_sio

    snapshots, by_ws, by_sio = asyncio.run(scenario())
    assert snapshots[0] == snapshots[1] and snapshots[1]["event"] == events.JOB_SNAPSHOT
    assert by_sio == by_ws
    names = {m["event"] for m in by_sio}
    assert {events.JOB_STARTED, events.ITEM_STARTED, events.ITEM_TOKEN} <= names
    assert names <= set(events.EVENTS)
    outputs = {o.pk: o.content for o in GenerationOutput.objects.filter(job_id=job_id)}
    assert apply_tokens({}, by_sio) == outputs and len(outputs) == 48
    assert by_sio[-1]["data"]["completed"] == 48


def test_unsubscribe_and_switching_jobs(api, creator, setup, platform_server):
    first, second = created_job(api, creator, setup), created_job(api, creator, setup)
    client = api(creator)

    async def scenario():
        async with SioClient(platform_server, user=creator, transports=["websocket"]) as sio:
            assert (await sio.subscribe({"job": first}))["ok"]
            assert (await sio.next())["data"]["job_id"] == first
            # Subscribing to another job replaces the first.
            assert (await sio.subscribe({"job": second}))["ok"]
            assert (await sio.next())["data"]["job_id"] == second
            await in_thread(lambda: client.post(f"{JOBS}/{first}/start"))
            await in_thread(lambda: client.post(f"{JOBS}/{second}/start"))
            only = await sio.next()
            assert (only["event"], only["data"]["job_id"]) == (events.JOB_PROGRESS, second)
            assert await sio.call("unsubscribe") == {"ok": True}
            assert await in_thread(nobody_watches)
            await in_thread(lambda: client.post(f"{JOBS}/{second}/pause"))
            with pytest.raises(TimeoutError):
                late = await sio.next(timeout=1)
                raise AssertionError(f"an event after unsubscribing: {late}")

    asyncio.run(scenario())


def test_scale_mode_uses_the_redis_manager():
    async def manager():
        return LiveServer({}).sio.manager

    kind = type(asyncio.run(manager()))
    expected = socketio.AsyncRedisManager if settings.REDIS_URL else socketio.AsyncManager
    assert kind is expected
