"""The ASGI handler (evalplatform/handler.py) serves each HTTP request's middleware and view
on one thread, taken from a pool of idle request threads and given back after the response:
requests one after another share a thread (and its database wrapper), requests at once each
have their own, and a request that failed leaves nothing behind for the next."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest
from django.core.signals import request_finished, request_started

from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def threads():
    """The thread objects that ran each request's ``request_started`` and
    ``request_finished`` (kept alive, so two distinct threads never share an identity)."""
    seen = {"started": [], "finished": []}

    def started(**kwargs):
        seen["started"].append(threading.current_thread())

    def finished(**kwargs):
        seen["finished"].append(threading.current_thread())

    request_started.connect(started, weak=False)
    request_finished.connect(finished, weak=False)
    yield seen
    request_started.disconnect(started)
    request_finished.disconnect(finished)


def test_requests_one_after_another_reuse_one_thread(platform_server, threads, team_a, member):
    user = member(team_a, Role.VIEWER)
    _, key = token_create(user=user, name="t")
    headers = {"Authorization": f"Token {key}"}
    with httpx.Client(base_url=f"http://{platform_server}", headers=headers) as client:
        statuses = [client.get("/api/me").status_code for _ in range(12)]
        # A request that fails in its view: the thread goes back all the same, and the
        # requests after it are served as before.
        missing = client.get("/api/scenarios/999999").status_code
        statuses += [client.get("/api/me").status_code for _ in range(3)]
    assert statuses == [200] * 15 and missing == 404
    started = {id(t) for t in threads["started"]}
    assert len(threads["started"]) == 16
    # A few at most, not one per request: a request may come before the one before it has
    # given its thread back (its response is sent before its context ends).
    assert len(started) <= 8, "each request started a thread of its own"
    assert {id(t) for t in threads["finished"]} == started
    assert threads["started"][0].name.startswith("request")


def test_requests_at_once_have_threads_of_their_own(platform_server, threads, team_a, member):
    user = member(team_a, Role.VIEWER)
    _, key = token_create(user=user, name="t")
    headers = {"Authorization": f"Token {key}"}

    async def burst() -> list[int]:
        async with httpx.AsyncClient(
            base_url=f"http://{platform_server}", headers=headers
        ) as client:
            replies = await asyncio.gather(*(client.get("/api/me") for _ in range(16)))
        return [reply.status_code for reply in replies]

    assert asyncio.run(burst()) == [200] * 16
    assert asyncio.run(burst()) == [200] * 16
    used = {id(t) for t in threads["started"]}
    # More than one thread served the bursts (they ran at once), and far fewer than one per
    # request: the second burst was served by the first's threads.
    assert 1 < len(used) <= 16
