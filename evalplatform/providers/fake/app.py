"""The fake provider as an ASGI application (served by uvicorn).

Faults come from the configuration (``fault_rate`` over ``fault_kinds``) or from a marker in
the prompt or the model name: ``[[fault:KIND]]`` always; ``[[fault:KIND*N]]`` for the first
N attempts of that exact request; ``@S`` sets the Retry-After seconds
(``[[fault:429*2@0.5]]``).

Kinds: ``429`` (rate limit with Retry-After), ``quota`` (a 429 that must not be retried),
``500``, ``503``, ``529``, ``400``, ``401``, ``404``, ``timeout`` (hangs ``timeout_s``),
``malformed`` (a 200 that is not JSON), ``truncated`` (a 200 cut in half; a stream cut after
its first chunk), ``content_filter``.

Answers are the mock's (``evalplatform.providers.llm.mock``): the same request gets the same
answer at temperature 0 (or none), or when it carries a seed (OpenAI's ``seed``, Gemini's
``generationConfig.seed``); at a temperature above 0 without one, each identical call is
sampled anew (the first answered as before), so repeated calls differ as a real model's do.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import json
import random
import re
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from evalplatform.providers.fake import wire
from evalplatform.providers.fake.batches import BatchStore
from evalplatform.providers.fake.config import FakeConfig
from evalplatform.providers.fake.wire import Reply, json_reply
from evalplatform.providers.llm.mock import Draws, answer, request_key, tokens_for
from evalplatform.providers.llm.types import LLMRequest

_REQUEST_NUMBER: contextvars.ContextVar[int] = contextvars.ContextVar("fake_request", default=0)
_PRESENTED_KEY: contextvars.ContextVar[str] = contextvars.ContextVar("fake_key", default="")
_MARKER = re.compile(r"\[\[fault:([a-z0-9_]+)(?:\*(\d+))?(?:@(\d+(?:\.\d+)?))?\]\]")
# A stream cut inside an event, or ended cleanly before its last event.
_STREAM_CUTS = ("truncated", "unfinished")
_STATUS = {"400": 400, "401": 401, "404": 404, "500": 500, "503": 503, "529": 529}


@dataclass
class Fault:
    kind: str
    retry_after: float


class FakeProvider:
    def __init__(self, config: FakeConfig | None = None):
        self.config = config or FakeConfig()
        self.attempts: Counter[str] = Counter()
        self.requests = 0
        self.calls: Counter[str] = Counter()  # per route, for tests
        self.bodies: deque[tuple[str, bytes]] = deque(maxlen=50)  # the last requests, for tests
        self.in_flight = 0
        self.max_in_flight = 0
        # The client ends (address, port) that sent requests: one per connection, for tests.
        self.peers: set[tuple[str, int]] = set()
        self.draws = Draws()  # sampled requests answered anew on each call
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            ("POST", re.compile(r"^/v1/chat/completions$"), self.openai_chat),
            ("POST", re.compile(r"^/v1/messages$"), self.anthropic_messages),
            (
                "POST",
                re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$"),
                self.gemini_generate,
            ),
            (
                "POST",
                re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$"),
                self.gemini_stream,
            ),
        ]
        self.batches = BatchStore(self)
        self._routes.extend(self.batches.routes())

    # --- ASGI -------------------------------------------------------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        reply = await self.dispatch(scope, raw)
        headers = [(b"content-type", reply.content_type), *reply.headers]
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        if reply.stream is None:
            await send({"type": "http.response.body", "body": reply.body})
            return
        if not self.config.stream_chunk_delay_s:
            # Every event is ready at once: one write (one HTTP chunk) of them all, as a server
            # that has them all at hand sends them; the client still parses every event.
            pieces = [piece async for piece in reply.stream]
            await send({"type": "http.response.body", "body": b"".join(pieces)})
            return
        async for piece in reply.stream:
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            await asyncio.sleep(self.config.stream_chunk_delay_s)
        await send({"type": "http.response.body", "body": b""})

    async def dispatch(self, scope: dict[str, Any], raw: bytes) -> Reply:
        self.requests += 1
        if scope.get("client"):
            self.peers.add(tuple(scope["client"]))
        _REQUEST_NUMBER.set(self.requests)  # this request's own number, whatever runs beside it
        method, path = scope["method"], scope["path"]
        query = scope.get("query_string", b"").decode()
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        key = headers.get("authorization", "").removeprefix("Bearer ")
        _PRESENTED_KEY.set(key or headers.get("x-api-key") or headers.get("x-goog-api-key", ""))
        for route_method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match and route_method == method:
                self.calls[handler.__name__] += 1
                self.bodies.append((path, raw))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    if self.config.latency_s:
                        await asyncio.sleep(self.config.latency_s)
                    return await handler(raw=raw, query=query, headers=headers, **match.groupdict())
                finally:
                    self.in_flight -= 1
        return json_reply({"error": {"message": f"No route {method} {path}"}}, 404)

    # --- faults -----------------------------------------------------------------------------
    def fault_for(self, route: str, request: LLMRequest) -> Fault | None:
        text = f"{request.system}\n{request.user}"
        marker = _MARKER.search(text) or _MARKER.search(request.model)
        if marker:
            kind, times, after = marker.group(1), marker.group(2), marker.group(3)
            key = hashlib.sha256(f"{route}\n{request.model}\n{text}".encode()).hexdigest()
            self.attempts[key] += 1
            if times is None or self.attempts[key] <= int(times):
                return Fault(kind, float(after) if after else self.config.retry_after_s)
            return None
        if self.config.fault_rate:
            rng = random.Random(f"{self.config.seed}:{_REQUEST_NUMBER.get()}")  # noqa: S311
            if rng.random() < self.config.fault_rate:
                return Fault(rng.choice(self.config.fault_kinds), self.config.retry_after_s)
        return None

    async def fault_reply(
        self, protocol: str, fault: Fault, good: Callable[[], dict]
    ) -> Reply | None:
        """The reply a fault calls for; ``None`` for faults that shape a good reply instead."""
        kind = fault.kind
        if kind == "timeout":
            await asyncio.sleep(self.config.timeout_s)
            return None
        if kind == "malformed":
            return Reply(body=b'{"id": "broken", "choices": [ <html>Bad Gateway</html>')
        if kind == "truncated":
            body = json.dumps(good()).encode()
            return Reply(body=body[: len(body) // 2])
        if kind in ("429", "quota"):
            quota = kind == "quota"
            headers = []
            if not quota:
                headers = [
                    (b"retry-after", f"{fault.retry_after:g}".encode()),
                    (b"retry-after-ms", f"{fault.retry_after * 1000:g}".encode()),
                ]
            return json_reply(
                wire.error_body(
                    protocol,
                    429,
                    "You exceeded your current quota, please check your plan and billing details."
                    if quota
                    else "Rate limit reached.",
                    quota=quota,
                    retry_after=None if quota else fault.retry_after,
                ),
                429,
                headers,
            )
        if kind in _STATUS:
            status = _STATUS[kind]
            message = f"Injected fault {status}."
            if status == 401:  # like real providers, quote the key that was refused
                message = f"Incorrect API key provided: {_PRESENTED_KEY.get()}."
            return json_reply(wire.error_body(protocol, status, message), status)
        return None

    # --- answers ----------------------------------------------------------------------------
    def answer(self, request: LLMRequest) -> tuple[str, str, tuple[int, int]]:
        if self.config.reply is not None:  # a test's fixed reply, to every request
            text, finish = self.config.reply(request), "stop"
        else:
            base = request_key(request, self.config.mock.seed)
            text, finish = answer(request, self.config.mock, key=self.draws.key(request, base))
        usage = (tokens_for(request.system) + tokens_for(request.user), tokens_for(text))
        return text, finish, usage

    def chunks(self, text: str) -> list[str]:
        words = text.split(" ")
        size = max(1, self.config.stream_chunk_words)
        return [
            (" " if i else "") + " ".join(words[i : i + size]) for i in range(0, len(words), size)
        ]

    @staticmethod
    def _body(raw: bytes) -> Any:
        return json.loads(raw) if raw else {}

    async def _handle(
        self,
        protocol: str,
        raw: bytes,
        parse: Callable[[Any], LLMRequest],
        reply: Callable[[str, str, str, tuple[int, int]], dict],
        stream: Callable[[LLMRequest, str, str, tuple[int, int], str], AsyncIterator[bytes]] | None,
    ) -> Reply:
        try:
            body = self._body(raw)
            request = parse(body)
        except (ValueError, KeyError, TypeError) as exc:
            return json_reply(wire.error_body(protocol, 400, f"Invalid request: {exc}"), 400)
        fault = self.fault_for(protocol, request)
        text, finish, usage = self.answer(request)
        if fault and fault.kind == "content_filter":
            if stream is not None:
                return Reply(
                    stream=self.filtered_stream(protocol, request.model, usage),
                    content_type=b"text/event-stream",
                )
            return json_reply(self.filtered(protocol, request.model, usage))
        wants_stream = stream is not None
        if fault and not (wants_stream and fault.kind in _STREAM_CUTS):
            bad = await self.fault_reply(
                protocol, fault, lambda: reply(request.model, text, finish, usage)
            )
            if bad is not None:
                return bad
        if wants_stream and stream is not None:
            cut = fault.kind if fault and fault.kind in _STREAM_CUTS else ""
            return Reply(
                stream=stream(request, text, finish, usage, cut), content_type=b"text/event-stream"
            )
        return json_reply(reply(request.model, text, finish, usage))

    @staticmethod
    def filtered(protocol: str, model: str, usage: tuple[int, int]) -> dict[str, Any]:
        if protocol == "openai":
            data = wire.openai_reply(model, "", "stop", (usage[0], 0))
            data["choices"][0]["finish_reason"] = "content_filter"
            return data
        if protocol == "anthropic":
            data = wire.anthropic_reply(model, "", "stop", (usage[0], 0))
            data["content"], data["stop_reason"] = [], "refusal"
            return data
        return {
            "promptFeedback": {"blockReason": "SAFETY"},
            "usageMetadata": {"promptTokenCount": usage[0]},
        }

    @staticmethod
    async def filtered_stream(
        protocol: str, model: str, usage: tuple[int, int]
    ) -> AsyncIterator[bytes]:
        if protocol == "openai":
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}],
            }
            yield wire.sse(chunk)
            yield b"data: [DONE]\n\n"
        elif protocol == "anthropic":
            start = wire.anthropic_reply(model, "", "stop", (usage[0], 0))
            start["content"], start["stop_reason"] = [], None
            yield wire.sse({"type": "message_start", "message": start}, "message_start")
            yield wire.sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "refusal"},
                    "usage": {"output_tokens": 0},
                },
                "message_delta",
            )
            yield wire.sse({"type": "message_stop"}, "message_stop")
        else:
            yield wire.sse({"promptFeedback": {"blockReason": "SAFETY"}})

    # --- OpenAI -----------------------------------------------------------------------------
    async def openai_chat(self, raw: bytes, **_: Any) -> Reply:
        body = self._body(raw) if raw else {}
        stream = None
        if isinstance(body, dict) and body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            stream = functools.partial(self._openai_stream, include_usage=include_usage)
        return await self._handle("openai", raw, wire.openai_request, wire.openai_reply, stream)

    async def _openai_stream(
        self,
        request: LLMRequest,
        text: str,
        finish: str,
        usage: tuple[int, int],
        cut: str,
        *,
        include_usage: bool,
    ) -> AsyncIterator[bytes]:
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": request.model,
        }
        yield wire.sse(
            base
            | {
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ]
            }
        )
        for i, piece in enumerate(self.chunks(text)):
            yield wire.sse(
                base
                | {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            )
            if cut and i == 0:
                if cut == "truncated":
                    yield b'data: {"id": "chatcmpl-fake", "choi'
                return
        yield wire.sse(
            base
            | {"choices": [{"index": 0, "delta": {}, "finish_reason": wire.OPENAI_FINISH[finish]}]}
        )
        if include_usage:
            yield wire.sse(
                base
                | {
                    "choices": [],
                    "usage": {
                        "prompt_tokens": usage[0],
                        "completion_tokens": usage[1],
                        "total_tokens": sum(usage),
                    },
                }
            )
        yield b"data: [DONE]\n\n"

    # --- Anthropic --------------------------------------------------------------------------
    async def anthropic_messages(self, raw: bytes, **_: Any) -> Reply:
        body = self._body(raw) if raw else {}
        stream = self._anthropic_stream if isinstance(body, dict) and body.get("stream") else None
        reply = wire.anthropic_reply
        forced = body.get("tool_choice") if isinstance(body, dict) else None
        if isinstance(forced, dict) and forced.get("type") == "tool" and stream is None:
            reply = functools.partial(wire.anthropic_tool_reply, str(forced.get("name")))
        return await self._handle("anthropic", raw, wire.anthropic_request, reply, stream)

    async def _anthropic_stream(
        self, request: LLMRequest, text: str, finish: str, usage: tuple[int, int], cut: str
    ) -> AsyncIterator[bytes]:
        start = wire.anthropic_reply(request.model, "", finish, (usage[0], 1))
        start["content"], start["stop_reason"] = [], None
        yield wire.sse({"type": "message_start", "message": start}, "message_start")
        yield wire.sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        )
        yield wire.sse({"type": "ping"}, "ping")
        for i, piece in enumerate(self.chunks(text)):
            yield wire.sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
                "content_block_delta",
            )
            if cut and i == 0:
                if cut == "truncated":
                    yield b'event: content_block_delta\ndata: {"type": "content_bl'
                return
        yield wire.sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        yield wire.sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": wire.ANTHROPIC_FINISH[finish], "stop_sequence": None},
                "usage": {"output_tokens": usage[1]},
            },
            "message_delta",
        )
        yield wire.sse({"type": "message_stop"}, "message_stop")

    # --- Gemini -----------------------------------------------------------------------------
    async def gemini_generate(self, raw: bytes, model: str, **_: Any) -> Reply:
        return await self._handle(
            "gemini",
            raw,
            lambda body: wire.gemini_request(model, body),
            lambda m, t, f, u: wire.gemini_reply(m, t, f, u),
            None,
        )

    async def gemini_stream(self, raw: bytes, model: str, query: str = "", **_: Any) -> Reply:
        return await self._handle(
            "gemini",
            raw,
            lambda body: wire.gemini_request(model, body),
            lambda m, t, f, u: wire.gemini_reply(m, t, f, u),
            self._gemini_stream,
        )

    async def _gemini_stream(
        self, request: LLMRequest, text: str, finish: str, usage: tuple[int, int], cut: str
    ) -> AsyncIterator[bytes]:
        pieces = self.chunks(text)
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            data = wire.gemini_reply(
                request.model, piece, finish if last else None, (usage[0], usage[1] if last else 0)
            )
            yield wire.sse(data)
            if cut and i == 0:
                if cut == "truncated":
                    yield b'data: {"candidates": [{"cont'
                return
