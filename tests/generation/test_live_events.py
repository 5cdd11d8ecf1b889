"""Live job events over the real ASGI application (Channels): who may subscribe, the snapshot
first, the spec's event names, streamed text that rebuilds every output exactly, partial text
for a client that connects mid-stream, and the publisher's throttling."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from websockets.exceptions import ConnectionClosed, InvalidStatus

from evalplatform.accounts.roles import Role
from evalplatform.live.models import LiveEvent, LiveWatcher
from evalplatform.live.publish import ThrottledPublisher
from generation import events
from generation.models import GenerationJob, GenerationOutput
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import JOBS, run_in_background, started_job
from tests.helpers.live import Socket, apply_tokens, created_job, in_thread

pytestmark = pytest.mark.django_db(transaction=True)


async def close_code(socket):
    try:
        async with socket as s:
            await s.next()
    except InvalidStatus as refused:
        return refused.response.status_code
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None
    return "open"


def test_only_users_who_may_view_the_job_can_subscribe(
    api, creator, setup, team_b, member, platform_server
):
    job_id = created_job(api, creator, setup)
    path = f"/ws/generation/jobs/{job_id}"
    outsider = member(team_b, Role.ADMIN)

    async def scenario():
        assert await close_code(Socket(platform_server, path)) == 4401
        assert await close_code(Socket(platform_server, path, user=outsider)) == 4404
        missing = Socket(platform_server, "/ws/generation/jobs/999999", user=creator)
        assert await close_code(missing) == 4404
        # A page of another site cannot ride on the user's session.
        foreign = Socket(platform_server, path, session_of=creator, origin="http://evil.example")
        assert await close_code(foreign) == 403
        # Nor a page of another port of this machine (another application on localhost).
        port = int(platform_server.rsplit(":", 1)[1])
        other = Socket(
            platform_server, path, session_of=creator, origin=f"http://localhost:{port + 1}"
        )
        assert await close_code(other) == 403

    asyncio.run(scenario())


def test_a_viewer_gets_a_snapshot_first(api, creator, setup, team_a, member, platform_server):
    job_id = created_job(api, creator, setup)
    viewer = member(team_a, Role.VIEWER)

    async def scenario():
        path = f"/ws/generation/jobs/{job_id}"
        origin = f"http://{platform_server.replace('127.0.0.1', 'localhost')}"
        async with Socket(platform_server, path, session_of=viewer, origin=origin) as socket:
            return await socket.next()

    snapshot = asyncio.run(scenario())
    assert snapshot["event"] == events.JOB_SNAPSHOT
    data = snapshot["data"]
    assert data["job_id"] == job_id and data["status"] == "created"
    assert (data["total"], data["completed"], data["failed"]) == (48, 0, 0)
    assert data["processing"] == [] and data["cost_usd"] == "0.000000"


def test_a_run_streams_every_event_and_the_text_of_every_output(
    api, creator, setup, platform_server
):
    job_id = created_job(api, creator, setup)

    async def scenario():
        async with Socket(platform_server, f"/ws/generation/jobs/{job_id}", user=creator) as ws:
            assert (await ws.next())["data"]["status"] == "created"
            start = await in_thread(lambda: api(creator).post(f"{JOBS}/{job_id}/start").json())
            assert start["status"] == "running"
            thread, _ = await in_thread(lambda: run_in_background(job_id))
            messages = await ws.until(events.JOB_COMPLETED)
            await in_thread(lambda: thread.join(60))
            with pytest.raises(TimeoutError):  # nothing after the end (no stale progress)
                late = await ws.next(timeout=1)
                raise AssertionError(f"an event after completion: {late}")
            return messages

    messages = asyncio.run(scenario())
    names = [m["event"] for m in messages]
    assert names[0] == events.JOB_PROGRESS and messages[0]["data"]["status"] == "running"
    assert events.JOB_STARTED in names and names[-1] == events.JOB_COMPLETED
    assert set(names) <= set(events.EVENTS)
    outputs = {o.pk: o for o in GenerationOutput.objects.filter(job_id=job_id)}
    started = [m["data"]["output_id"] for m in messages if m["event"] == events.ITEM_STARTED]
    completed = [m["data"] for m in messages if m["event"] == events.ITEM_COMPLETED]
    assert sorted(started) == sorted(outputs) == sorted(d["output_id"] for d in completed)
    for data in completed:
        output = outputs[data["output_id"]]
        assert data["cost_usd"] == str(output.cost_usd)
        assert data["output_tokens"] == output.output_tokens
        assert data["preview"] == output.content[: events.PREVIEW_CHARS]
    # Each cell's tokens come after its start and before its completion.
    for output_id in outputs:
        kinds = [m["event"] for m in messages if m["data"].get("output_id") == output_id]
        assert kinds[0] == events.ITEM_STARTED and kinds[-1] == events.ITEM_COMPLETED
        assert set(kinds[1:-1]) == {events.ITEM_TOKEN}
    texts = apply_tokens({}, messages)
    assert texts == {pk: o.content for pk, o in outputs.items()}
    final = messages[-1]["data"]
    assert (final["completed"], final["failed"], final["progress"]) == (48, 0, 1.0)
    assert final["cost_usd"] == str(GenerationJob.objects.get(pk=job_id).cost_usd)


def test_a_client_that_connects_mid_stream_sees_the_partial_text(
    api, creator, team_a, fake_provider, platform_server
):
    fake_provider.app.config.stream_chunk_delay_s = 0.05
    fake_provider.app.config.stream_chunk_words = 1
    connection = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="gpt-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Write about {{content}}")])
    body = {
        "team": "team-a",
        "name": "Slow",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "max_tokens": 400,
        "source": {"type": "manual", "format": "json", "content": json.dumps([{"content": "x"}])},
    }
    job_id = api(creator).post(JOBS, body, format="json").json()["id"]
    api(creator).post(f"{JOBS}/{job_id}/start")
    output = GenerationOutput.objects.get(job_id=job_id)
    path = f"/ws/generation/jobs/{job_id}"

    def partial_text_kept():
        running = GenerationOutput.objects.filter(pk=output.pk, status="running")
        return running.exclude(content="").exists()

    async def scenario():
        # Someone watches from the start (replies stream only then); a second client
        # connects part-way through the reply.
        async with Socket(platform_server, path, user=creator) as first:
            await first.next()
            thread, _ = await in_thread(lambda: run_in_background(job_id))
            deadline = time.monotonic() + 30
            while not await in_thread(partial_text_kept):
                assert time.monotonic() < deadline, "no partial text was kept"
                await asyncio.sleep(0.02)
            async with Socket(platform_server, path, user=creator) as second:
                snapshot = await second.next()
                messages = await second.until(events.JOB_COMPLETED)
            await in_thread(lambda: thread.join(30))
            return snapshot, messages

    snapshot, messages = asyncio.run(scenario())
    (cell,) = snapshot["data"]["processing"]
    assert cell["output_id"] == output.pk and cell["item_id"] == "1"
    output.refresh_from_db()
    assert cell["text"] and output.content.startswith(cell["text"])
    assert cell["text"] != output.content  # it really was part-way
    texts = apply_tokens({output.pk: cell["text"]}, messages)
    assert texts[output.pk] == output.content


def test_replies_stream_only_while_someone_watches(api, creator, setup, settings):
    settings.LIVE_TRANSPORT = "database"
    job_id = started_job(api, creator, setup)
    run_in_background(job_id)[0].join(60)
    sent = [e["event"] for row in LiveEvent.objects.all() for e in row.events]
    assert sent.count(events.ITEM_COMPLETED) == 48 and events.JOB_COMPLETED in sent
    assert events.ITEM_TOKEN not in sent  # nobody watched: no streaming, no partial texts
    assert not LiveWatcher.objects.exists()


def test_status_changes_reach_watchers_without_a_runner(api, creator, setup, platform_server):
    job_id = created_job(api, creator, setup)
    client = api(creator)

    async def scenario():
        async with Socket(platform_server, f"/ws/generation/jobs/{job_id}", user=creator) as ws:
            await ws.next()
            seen = []
            for action in ("start", "pause", "cancel"):
                await in_thread(lambda a=action: client.post(f"{JOBS}/{job_id}/{a}"))
                seen.append(await ws.next())
            return seen

    # No worker runs the queued task here: every event comes from the services.
    seen = asyncio.run(scenario())
    assert [m["event"] for m in seen] == [events.JOB_PROGRESS] * 3
    assert [m["data"]["status"] for m in seen] == ["running", "paused", "cancelled"]


@pytest.mark.slow
def test_a_socket_idle_past_the_layers_blocking_read_still_gets_events(
    api, creator, setup, platform_server
):
    """channels_redis waits for a socket's next message with BZPOPMIN, 5 s at a time; redis-py
    8 reads every reply within its default socket timeout, also 5 s, so the empty answer at
    the end of a quiet spell raced the client's timeout, the consumer died of a TimeoutError
    and the socket dropped (the page reconnected; a script's client did not). A job quiet for
    a while (a killed worker's lease running out, a slow provider) must keep its watchers."""
    if not settings.REDIS_URL:
        pytest.skip("the channel layer is Redis only in scale mode")
    job_id = created_job(api, creator, setup)
    client = api(creator)

    async def scenario():
        async with Socket(platform_server, f"/ws/generation/jobs/{job_id}", user=creator) as ws:
            await ws.next()
            await asyncio.sleep(12)  # two blocking reads of the layer, and more, in silence
            await in_thread(lambda: client.post(f"{JOBS}/{job_id}/start"))
            return await ws.next()

    assert asyncio.run(scenario())["data"]["status"] == "running"


def test_budget_exceeded_is_an_event_and_a_notification(api, creator, setup, platform_server):
    job_id = started_job(api, creator, setup, budget_usd="0.004")

    async def scenario():
        async with Socket(platform_server, f"/ws/generation/jobs/{job_id}", user=creator) as ws:
            await ws.next()
            thread, _ = await in_thread(lambda: run_in_background(job_id))
            messages = await ws.until(events.JOB_BUDGET_EXCEEDED)
            await in_thread(lambda: thread.join(60))
            return messages

    messages = asyncio.run(scenario())
    assert messages[-1]["data"]["status"] == "paused"
    assert "Budget reached" in messages[-1]["data"]["status_message"]
    listed = api(creator).get("/api/notifications?unread=true").json()["results"]
    assert [n["kind"] for n in listed] == ["generation.budget_exceeded"]
    assert listed[0]["link"] == f"/generation/jobs/{job_id}"
    assert api(creator).post(f"/api/notifications/{listed[0]['id']}/read").status_code == 204
    assert api(creator).get("/api/notifications?unread=true").json()["results"] == []


def test_the_publisher_sends_one_message_per_window_in_order(settings):
    """With a long window, everything recorded while one message is in the window goes out
    together: ordered, tokens coalesced with their offsets, only the last progress."""
    settings.LIVE_TRANSPORT = "database"
    group = "test.publisher"

    async def scenario():
        publisher = ThrottledPublisher(group, token_event="tok", interval=3600)
        publisher.start()
        publisher.add("first", {"n": 0})
        await asyncio.sleep(0.2)  # the first message leaves at once; the window starts
        publisher.begin_text(7)
        for word in ["a", "b", "c"]:
            publisher.text(7, word)
        publisher.add("done", {"output_id": 7}, key=7)
        publisher.text(8, "xy")
        for n in range(50):
            publisher.progress("progress", {"n": n})
        publisher.add("the end", {})  # the run's own event follows the progress before it
        publisher.progress("progress", {"n": 50})
        await asyncio.sleep(0.2)
        sent = await in_thread(LiveEvent.objects.filter(group=group).count)
        assert sent == 1  # the rest is still in the window
        await publisher.close()
        await sync_to_async(connections.close_all)()  # the sender's database thread

    asyncio.run(scenario())
    rows = [row.events for row in LiveEvent.objects.filter(group=group).order_by("pk")]
    assert rows == [
        [{"event": "first", "data": {"n": 0}}],
        [
            {"event": "tok", "data": {"output_id": 7, "offset": 0, "delta": "abc"}},
            {"event": "done", "data": {"output_id": 7}},
            {"event": "progress", "data": {"n": 49}},
            {"event": "the end", "data": {}},
            {"event": "tok", "data": {"output_id": 8, "offset": 0, "delta": "xy"}},
            {"event": "progress", "data": {"n": 50}},
        ],
    ]


def test_a_failed_job_is_an_event_with_its_reason(
    api, creator, team_a, fake_provider, platform_server
):
    from tests.helpers.generation import job_on

    fake_provider.app.config.fault_rate = 1.0
    fake_provider.app.config.fault_kinds = ("401",)
    job_id = job_on(api, creator, team_a, fake_provider.url)

    async def scenario():
        async with Socket(platform_server, f"/ws/generation/jobs/{job_id}", user=creator) as ws:
            await ws.next()
            thread, _ = await in_thread(lambda: run_in_background(job_id))
            messages = await ws.until(events.JOB_FAILED)
            await in_thread(lambda: thread.join(60))
            return messages

    messages = asyncio.run(scenario())
    assert events.JOB_COMPLETED not in [m["event"] for m in messages]
    failed = messages[-1]["data"]
    assert failed["status"] == "failed" and "refused the API key" in failed["status_message"]
