"""Live events: WebSocket and Socket.IO clients of the platform."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import socketio
from django.conf import settings
from django.db import connections
from django.test import Client
from websockets.asyncio.client import connect

from evalplatform.accounts.services import token_create
from generation import events
from tests.helpers.generation import JOBS, job_body


async def in_thread(fn):
    """Run blocking Django code (requests, queries) off the event loop, closing the
    thread's database connection afterwards."""

    def call():
        try:
            return fn()
        finally:
            connections.close_all()

    return await asyncio.to_thread(call)


class Socket:
    """A WebSocket client of the platform over loopback (as a browser or a script)."""

    def __init__(self, server, path, *, user=None, session_of=None, origin=None):
        self.uri = f"ws://{server}{path}"
        self.user, self.session_of, self.origin = user, session_of, origin

    def headers(self):
        headers = []
        if self.user is not None:
            _, key = token_create(user=self.user, name="ws")
            headers.append(("Authorization", f"Token {key}"))
        if self.session_of is not None:
            client = Client()
            client.force_login(self.session_of)
            name = settings.SESSION_COOKIE_NAME
            headers.append(("Cookie", f"{name}={client.cookies[name].value}"))
        return headers

    async def __aenter__(self):
        headers = await in_thread(self.headers)
        self.ws = await connect(
            self.uri, additional_headers=headers, origin=self.origin, open_timeout=10
        )
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()

    async def next(self, timeout=10):
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def until(self, last_event, timeout=60):
        """Every event up to and including ``last_event``."""
        received = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {last_event}; got {[m['event'] for m in received][-10:]}"
            message = await self.next(remaining)
            received.append(message)
            if message["event"] == last_event:
                return received


def apply_tokens(texts, messages):
    """What a client does: put each delta at its offset (offset 0 starts a text afresh)."""
    for message in messages:
        if message["event"] == events.ITEM_TOKEN:
            data = message["data"]
            before = texts.get(data["output_id"], "")
            assert data["offset"] <= len(before), "a gap in the streamed text"
            texts[data["output_id"]] = before[: data["offset"]] + data["delta"]
    return texts


def created_job(api, user, setup):
    response = api(user).post(JOBS, job_body(setup), format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


class SioClient:
    """A Socket.IO client of the platform: ``token`` sends an API token in the ``auth``
    payload (as a browser script would), ``user`` in the ``Authorization`` header,
    ``session_of`` signs in by the session cookie."""

    def __init__(
        self, server, *, user=None, token_of=None, session_of=None, origin=None, transports=None
    ):
        self.url = f"http://{server}"
        self.user, self.token_of, self.session_of = user, token_of, session_of
        self.origin, self.transports = origin, transports
        self.received: asyncio.Queue = asyncio.Queue()
        self.refusal = None

    def credentials(self):
        headers, auth = {}, None
        if self.user is not None:
            headers["Authorization"] = f"Token {token_create(user=self.user, name='sio')[1]}"
        if self.token_of is not None:
            auth = {"token": token_create(user=self.token_of, name="sio")[1]}
        if self.session_of is not None:
            client = Client()
            client.force_login(self.session_of)
            name = settings.SESSION_COOKIE_NAME
            headers["Cookie"] = f"{name}={client.cookies[name].value}"
        if self.origin is not None:
            headers["Origin"] = self.origin
        return headers, auth

    async def __aenter__(self):
        headers, auth = await in_thread(self.credentials)
        self.http = aiohttp.ClientSession()
        self.client = socketio.AsyncClient(reconnection=False, http_session=self.http)

        async def anything(event, data):
            await self.received.put({"event": event, "data": data})

        async def refused(data):
            self.refusal = data

        self.client.on("*", anything)
        self.client.on("connect_error", refused)
        try:
            await self.client.connect(
                self.url, headers=headers, auth=auth, transports=self.transports, wait_timeout=10
            )
        except BaseException:
            await self.http.close()
            raise
        return self

    async def __aexit__(self, *exc):
        await self.client.disconnect()
        await self.http.close()

    async def call(self, event, *data):
        return await self.client.call(event, data[0] if data else None, timeout=10)

    async def subscribe(self, payload):
        return await self.client.call("subscribe", payload, timeout=10)

    async def next(self, timeout=10):
        return await asyncio.wait_for(self.received.get(), timeout)

    async def until(self, last_event, timeout=60):
        received = []
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no {last_event}; got {[m['event'] for m in received][-10:]}"
            message = await self.next(remaining)
            received.append(message)
            if message["event"] == last_event:
                return received
