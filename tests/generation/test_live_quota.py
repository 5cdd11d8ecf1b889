"""One person's live connections are bounded (issue 35: one viewer held 200 sockets on one
job): past ``LIVE_SOCKETS_PER_USER`` open in the server, the next WebSocket is closed 4429
and the next Socket.IO connection refused, while other people connect as before; a closed
connection gives its place back."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
import socketio
from websockets.exceptions import ConnectionClosed

from evalplatform.accounts.roles import Role
from evalplatform.live import quota
from generation import events
from tests.helpers.live import SioClient, Socket, created_job

pytestmark = pytest.mark.django_db(transaction=True)


async def _until(check, timeout=10):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the server did not catch up"
        await asyncio.sleep(0.05)


def test_a_person_holds_at_most_their_share_of_live_connections(
    api, creator, setup, team_a, member, platform_server, settings
):
    settings.LIVE_SOCKETS_PER_USER = 3
    job_id = created_job(api, creator, setup)
    path = f"/ws/generation/jobs/{job_id}"
    viewer = member(team_a, Role.VIEWER)

    async def scenario():
        async with contextlib.AsyncExitStack() as stack:
            sockets = []
            for _ in range(3):
                socket = await stack.enter_async_context(Socket(platform_server, path, user=viewer))
                assert (await socket.next())["event"] == events.JOB_SNAPSHOT
                sockets.append(socket)
            with pytest.raises(ConnectionClosed) as closed:
                async with Socket(platform_server, path, user=viewer) as extra:
                    await extra.next()
            assert closed.value.rcvd.code == quota.CLOSE_TOO_MANY
            refused = SioClient(platform_server, user=viewer)
            with pytest.raises(socketio.exceptions.ConnectionError):
                async with refused:
                    pass
            assert "Too many live connections" in str(refused.refusal)
            async with Socket(platform_server, path, user=creator) as other:  # someone else
                assert (await other.next())["event"] == events.JOB_SNAPSHOT
            await sockets[0].ws.close()
            await _until(lambda: quota.held(viewer.pk) == 2)
            async with SioClient(platform_server, user=viewer) as sio:  # its place, given back
                assert await sio.subscribe({"job": job_id}) == {"ok": True, "job": job_id}
                assert quota.held(viewer.pk) == 3
        await _until(lambda: quota.held(viewer.pk) == 0)

    asyncio.run(scenario())
