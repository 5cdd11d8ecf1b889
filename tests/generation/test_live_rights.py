"""Live sockets follow their user's rights: a WebSocket or Socket.IO client watching a running
job is closed (4401 when its token or session is gone, 4403 when its user may no longer view
the job) and gets no further event, both when the change is announced (at once, whatever
``LIVE_RECHECK_S``) and when nothing announces it (within ``LIVE_RECHECK_S``)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.conf import settings as django_settings
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from evalplatform.accounts.models import ApiToken, Membership
from evalplatform.accounts.roles import Role
from evalplatform.accounts.services import token_create
from generation import events
from generation.models import GenerationJob, JobStatus
from tests.factories import ConnectionFactory, LLMModelFactory, PromptTemplateFactory, make_version
from tests.helpers.generation import JOBS, run_in_background
from tests.helpers.live import SioClient, in_thread

pytestmark = pytest.mark.django_db(transaction=True)

CLOSE_WITHIN_S = 3.0  # announced: at once; not announced: LIVE_RECHECK_S (0.2 s) and a check


@pytest.fixture
def slow_job(api, creator, team_a, fake_provider):
    """A started job whose replies stream slowly from the fake provider (it keeps running
    for many seconds, streaming to whoever watches); yields its id and, at the end, lets
    the provider answer at full speed so the run finishes."""
    fake_provider.app.config.stream_chunk_delay_s = 0.05
    fake_provider.app.config.stream_chunk_words = 1
    connection = ConnectionFactory(team=team_a, kind="openai", base_url=fake_provider.url)
    model = LLMModelFactory(connection=connection, model_id="gpt-fake")
    version = make_version(PromptTemplateFactory(team=team_a), [("", "Write about {{content}}")])
    items = [{"content": "rivers"}, {"content": "lakes"}]
    body = {
        "team": "team-a",
        "name": "Slow",
        "prompt_versions": [version.pk],
        "models": [model.pk],
        "temperatures": [0.0],
        "max_tokens": 400,
        "source": {"type": "manual", "format": "json", "content": json.dumps(items)},
    }
    job_id = api(creator).post(JOBS, body, format="json").json()["id"]
    assert api(creator).post(f"{JOBS}/{job_id}/start").json()["status"] == "running"
    yield job_id


def finish(fake_provider, thread):
    """Let the run end at full speed."""
    fake_provider.app.config.stream_chunk_delay_s = 0
    thread.join(60)


class Watcher:
    """A viewer of team A signed in by an API token or by the session of a browser, and the
    ways their rights go: ``revoke_token`` (the API's revoke), ``sign_out`` (the logout
    page), ``remove_membership``; and, announced by nothing, ``revoke_token_quietly``,
    ``end_session_quietly``, ``demote_quietly`` (a queryset update or delete bypasses the
    model signals the announcements hang on)."""

    def __init__(self, user, team, *, by):
        self.user, self.team = user, team
        self.headers: dict[str, str] = {}
        self.auth = None
        if by == "token":
            self.token, key = token_create(user=user, name="watch")
            self.headers["Authorization"] = f"Token {key}"
        else:
            self.browser = Client()
            self.browser.force_login(user)
            name = django_settings.SESSION_COOKIE_NAME
            self.session_key = self.browser.cookies[name].value
            self.headers["Cookie"] = f"{name}={self.session_key}"

    def revoke_token(self):
        api = Client()
        api.force_login(self.user)
        assert api.delete(f"/api/tokens/{self.token.pk}").status_code == 204

    def sign_out(self):
        assert self.browser.post("/logout/").status_code in (200, 302)

    def remove_membership(self):
        Membership.objects.filter(user=self.user, team=self.team).delete()

    def revoke_token_quietly(self):
        ApiToken.objects.filter(pk=self.token.pk).update(revoked_at=timezone.now())

    def end_session_quietly(self):
        Session.objects.filter(session_key=self.session_key).delete()

    def demote_quietly(self):
        # An evaluator may not view generation jobs.
        Membership.objects.filter(user=self.user, team=self.team).update(role=Role.EVALUATOR)


# (how the watcher signs in, how their rights go, the close code)
ANNOUNCED = [
    ("token", "revoke_token", 4401),
    ("token", "remove_membership", 4403),
    ("session", "sign_out", 4401),
]
QUIET = [
    ("token", "revoke_token_quietly", 4401),
    ("token", "demote_quietly", 4403),
    ("session", "end_session_quietly", 4401),
]
CASES = [pytest.param(60, *case, id=f"announced-{case[1]}") for case in ANNOUNCED] + [
    pytest.param(0.2, *case, id=f"periodic-{case[1]}") for case in QUIET
]


def still_running(job_id):
    return GenerationJob.objects.get(pk=job_id).status == JobStatus.RUNNING


async def closed_after(revoke, next_message):
    """Revoke, then read until the socket closes (within ``CLOSE_WITHIN_S``): the messages
    read meanwhile (events already on their way when the rights went)."""
    await in_thread(revoke)
    started, late = time.monotonic(), []
    while True:
        remaining = started + CLOSE_WITHIN_S - time.monotonic()
        assert remaining > 0, f"still open after {CLOSE_WITHIN_S} s; read {len(late)} events"
        message = await next_message(remaining)
        if message is None:
            return late
        late.append(message)


@pytest.mark.parametrize(("recheck_s", "by", "revocation", "code"), CASES)
def test_a_websocket_closes_when_its_rights_go(
    recheck_s,
    by,
    revocation,
    code,
    settings,
    team_a,
    member,
    slow_job,
    fake_provider,
    platform_server,
):
    settings.LIVE_RECHECK_S = recheck_s
    watcher = Watcher(member(team_a, Role.VIEWER), team_a, by=by)
    uri = f"ws://{platform_server}/ws/generation/jobs/{slow_job}"
    origin = f"http://{platform_server.replace('127.0.0.1', 'localhost')}"

    async def scenario():
        ws = await connect(uri, additional_headers=watcher.headers, origin=origin)
        try:
            assert json.loads(await ws.recv())["event"] == events.JOB_SNAPSHOT
            thread, _ = await in_thread(lambda: run_in_background(slow_job))
            while json.loads(await asyncio.wait_for(ws.recv(), 10))["event"] != events.ITEM_TOKEN:
                pass  # until the reply streams to this socket

            async def next_message(timeout):
                try:
                    return json.loads(await asyncio.wait_for(ws.recv(), timeout))
                except ConnectionClosed:
                    return None

            late = await closed_after(getattr(watcher, revocation), next_message)
            # Closed while the job still runs and streams: not at its end.
            assert await in_thread(lambda: still_running(slow_job))

            return ws.close_code, late, thread
        finally:
            await ws.close()

    close_code, late, thread = asyncio.run(scenario())
    assert close_code == code
    assert all(m["event"] in events.EVENTS for m in late)  # only what was already on its way
    finish(fake_provider, thread)


@pytest.mark.parametrize(("recheck_s", "by", "revocation", "code"), CASES)
def test_a_socketio_client_is_disconnected_when_its_rights_go(
    recheck_s,
    by,
    revocation,
    code,
    settings,
    team_a,
    member,
    slow_job,
    fake_provider,
    platform_server,
):
    settings.LIVE_RECHECK_S = recheck_s
    watcher = Watcher(member(team_a, Role.VIEWER), team_a, by=by)
    sio = SioClient(platform_server, transports=["websocket"])
    origin = f"http://{platform_server.replace('127.0.0.1', 'localhost')}"
    sio.credentials = lambda: (watcher.headers | {"Origin": origin}, watcher.auth)

    async def scenario():
        async with sio:
            assert await sio.subscribe({"job": slow_job}) == {"ok": True, "job": slow_job}
            assert (await sio.next())["event"] == events.JOB_SNAPSHOT
            thread, _ = await in_thread(lambda: run_in_background(slow_job))
            while (await sio.next())["event"] != events.ITEM_TOKEN:
                pass

            revoked = []

            async def next_message(timeout):
                message = await sio.next(timeout)
                if message["event"] == "live:revoked":
                    revoked.append(message["data"])
                    return None
                return message

            late = await closed_after(getattr(watcher, revocation), next_message)
            revoked_at = time.monotonic()
            while sio.client.connected:
                assert time.monotonic() - revoked_at < CLOSE_WITHIN_S, "still connected"
                await asyncio.sleep(0.02)
            assert sio.received.empty()  # nothing after live:revoked
            assert await in_thread(lambda: still_running(slow_job))
            return revoked, late, thread

    revoked, late, thread = asyncio.run(scenario())
    reason = {4401: "unauthenticated", 4403: "forbidden"}[code]
    assert [(r["code"], r["reason"]) for r in revoked] == [(code, reason)]
    assert all(m["event"] in events.EVENTS for m in late)
    finish(fake_provider, thread)
