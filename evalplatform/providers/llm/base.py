"""The adapter interface and what the HTTP adapters share: request plumbing and SSE."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any, ClassVar

import httpx
from django.conf import settings

from evalplatform.providers import netguard
from evalplatform.providers.llm import errors
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, Reasoning, ResponseSchema
from evalplatform.validation import INT_MAX

StreamItem = str | LLMResponse
UNCAPPED_TOKENS = 4096  # a request without max_tokens: its reply is capped as if it had these


def reply_byte_cap() -> int:
    return settings.PROVIDER_MAX_REPLY_BYTES


def reply_char_cap(request: LLMRequest) -> int:
    """The most reply text a request may bring: characters per requested token."""
    return (request.max_tokens or UNCAPPED_TOKENS) * settings.PROVIDER_MAX_CHARS_PER_TOKEN


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The body, refused (``reply_too_large``) as soon as it exceeds ``limit`` bytes, or
    when the server declares more: a provider's reply is never read whole into memory."""
    declared = response.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise errors.reply_too_large(limit, declared=int(declared))
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body.extend(chunk)
        if len(body) > limit:
            raise errors.reply_too_large(limit)
    return bytes(body)


def read_response(response: httpx.Response, raw: bytes) -> httpx.Response:
    """A streamed ``response`` as a read one, with ``raw`` (its decoded body) as content."""
    skip = {"content-encoding", "content-length", "transfer-encoding"}
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in skip]
    return httpx.Response(
        response.status_code, headers=headers, content=raw, request=response.request
    )


class SSEParser:
    """Server-sent events from the body's chunks as they arrive, parsed synchronously: ``feed``
    returns the events completed by a chunk as ``(event name, parsed JSON data)``. Lines end
    in ``\n`` or ``\r\n``; the body is refused (``reply_too_large``) once it exceeds
    ``limit`` bytes (a line without an end is never kept whole beyond it). ``done``: the
    ``[DONE]`` marker arrived (nothing after it is parsed)."""

    __slots__ = ("_data", "_event", "_pending", "done", "limit", "total")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.done = False
        self._pending = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, Any]]:
        self.total += len(chunk)
        if self.total > self.limit:
            raise errors.reply_too_large(self.limit)
        if self.done:
            return []
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self._pending += chunk
            return []
        complete = self._pending + chunk[:cut]
        self._pending = chunk[cut + 1 :]
        return self._lines(complete.split(b"\n"))

    def close(self) -> list[tuple[str, Any]]:
        """The events left at the end of the body (one cut inside an event is an error)."""
        out: list[tuple[str, Any]] = []
        if self._pending and not self.done:
            out = self._lines([self._pending])
        self._pending = b""
        if self._data and not self.done:
            payload = "\n".join(self._data)
            self._data = []
            if payload.strip() != "[DONE]":
                try:
                    out.append((self._event or "message", json.loads(payload)))
                except ValueError as exc:
                    raise errors.malformed(payload, "the stream was cut inside an event") from exc
        return out

    def _lines(self, lines: list[bytes]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        data = self._data
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if line == "":
                if data:
                    payload = "\n".join(data)
                    if payload.strip() == "[DONE]":
                        self.done = True
                        self._data = []
                        return out
                    try:
                        out.append((self._event or "message", json.loads(payload)))
                    except ValueError as exc:
                        raise errors.malformed(payload, "an event is not JSON") from exc
                    data = self._data = []
                self._event = ""
            elif line.startswith(":"):
                continue
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif line.startswith("event:"):
                self._event = line[6:].strip()
        return out


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` into ``base`` (in place): nested dicts merge, anything else replaces."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


def join_url(base_url: str, version_prefix: str, path: str) -> str:
    """``base/v1/path`` whether or not the configured base already ends in ``/v1``."""
    base = base_url.rstrip("/")
    if not base.endswith(version_prefix):
        base += version_prefix
    return base + path


# Connections in one httpx pool. httpcore's pool does work in proportion to the square of
# its connections on every request and every response (it scans them all, asking each one's
# socket whether it has expired): one pool of 128 connections costs several times the CPU per
# call of sixteen pools of eight (bench/provider_overhead.py, bench/generation_throughput.py).
POOL_SHARD = 8
# What is read of a finished stream's body after ``[DONE]`` (``drain``), at most.
DRAIN_S = 1.0
DRAIN_BYTES = 64 * 1024


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process: building one loads the CA
    bundle (tens of milliseconds), which each new client would otherwise do."""
    return httpx.create_ssl_context()


class HTTPPool:
    """What the adapters use of ``httpx.AsyncClient`` (``stream``, ``request``, ``aclose``)
    over several clients of at most ``POOL_SHARD`` connections each; a call goes to the
    client with the fewest calls in flight. With a ``transport`` (tests): one client."""

    def __init__(
        self,
        *,
        max_connections: int,
        timeout: httpx.Timeout,
        transport: httpx.AsyncBaseTransport | None = None,
        shard: int = POOL_SHARD,
    ):
        count = 1 if transport is not None else max(1, math.ceil(max_connections / shard))
        # max_connections split exactly: the first clients take one more when it does not
        # divide (9 over 2: 5 and 4).
        sizes = [
            max(1, max_connections // count + (i < max_connections % count)) for i in range(count)
        ]
        # Every connection is checked against the platform's own network (``netguard``).
        self.clients = [
            netguard.guard(
                httpx.AsyncClient(
                    timeout=timeout,
                    limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
                    transport=transport,
                    verify=tls_context(),
                )
            )
            for size in sizes
        ]
        self._load = [0] * count

    def _take(self) -> int:
        load = self._load
        index = load.index(min(load)) if len(load) > 1 else 0
        load[index] += 1
        return index

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, url: str | httpx.URL, **kwargs: Any
    ) -> AsyncIterator[httpx.Response]:
        index = self._take()
        try:
            async with self.clients[index].stream(method, url, **kwargs) as response:
                yield response
        finally:
            self._load[index] -= 1

    async def request(self, method: str, url: str | httpx.URL, **kwargs: Any) -> httpx.Response:
        index = self._take()
        try:
            return await self.clients[index].request(method, url, **kwargs)
        finally:
            self._load[index] -= 1

    async def aclose(self) -> None:
        """Close every client, even when closing one fails (the first error is raised)."""
        results = await asyncio.gather(
            *(client.aclose() for client in self.clients), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result


class Adapter(ABC):
    """One wire protocol. ``complete`` returns the whole reply; ``stream`` yields text deltas
    as they arrive and, last, the complete ``LLMResponse`` (text, usage, finish reason)."""

    protocol: str
    # The provider's public endpoint, for a connection that names no base URL ("" for none).
    default_base_url: ClassVar[str] = ""
    # Whether the provider can hold a reply to a JSON schema (``schema_params``).
    structured_output: ClassVar[bool] = False
    # The family of models the provider serves when it serves only its own (None when a
    # server of this protocol may serve anyone's, as OpenAI-compatible ones do).
    own_family: ClassVar[str | None] = None
    # The request body's fields the platform sets itself (a configuration's parameters may
    # not): top level, and within ``reserved_within`` (Gemini's ``generationConfig``).
    reserved_fields: ClassVar[frozenset[str]] = frozenset()
    reserved_within: ClassVar[str | None] = None
    # Whether the provider takes Chat Completions bodies as they are (its parameters pass
    # through a judge file's rows unchanged).
    chat_completions: ClassVar[bool] = False
    # The provider's words for reasoning when a request asks for it without an effort or a
    # budget of its own.
    OFF_WORDS: ClassVar[frozenset[str]] = frozenset({"", "none", "off", "disabled", "0", "false"})

    @abstractmethod
    async def complete(self, request: LLMRequest) -> LLMResponse: ...

    # --- the neutral request fields in this provider's words (no connection needed) ---
    @classmethod
    def schema_params(cls, schema: ResponseSchema) -> dict[str, Any]:
        """The request body's fields that hold the reply to ``schema`` ({} when the provider
        has no structured output)."""
        return {}

    @classmethod
    def reasoning_params(cls, reasoning: Reasoning) -> dict[str, Any]:
        """The request body's fields that ask for ``reasoning`` (or turn it off)."""
        return {}

    @classmethod
    def reasoning_setting(cls, params: Mapping[str, Any]) -> Any:
        """The reasoning setting among a configuration's parameters, as this provider's
        request carries it (None when they set none)."""
        return None

    @classmethod
    def reasoning_in(cls, params: Mapping[str, Any]) -> Reasoning | None:
        """The reasoning a configuration's parameters ask for (None when they say nothing)."""
        return None

    @classmethod
    def is_off(cls, word: Any) -> bool:
        """Whether a setting's word turns reasoning off ("none", "disabled", 0, False...)."""
        return word is False or str(word).strip().lower() in cls.OFF_WORDS

    @abstractmethod
    def stream(self, request: LLMRequest) -> AsyncGenerator[StreamItem, None]: ...

    async def stream_into(self, request: LLMRequest, on_text: Callable[[str], None]) -> LLMResponse:
        """The reply, its text passed to ``on_text`` as it arrives (``stream`` without a
        chain of generators in between)."""
        async with contextlib.aclosing(self.stream(request)) as items:
            async for item in items:
                if isinstance(item, str):
                    on_text(item)
                else:
                    return item
        raise errors.malformed("", "the stream ended without a reply")


class StreamState:
    __slots__ = (
        "chars",
        "finish_reason",
        "finished",
        "input_tokens",
        "model_version",
        "output_tokens",
        "parts",
        "raw_events",
        "reasoning_tokens",
    )

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.chars = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.finish_reason = ""
        self.finished = False  # the protocol's last event arrived
        self.raw_events = 0
        self.model_version = ""
        self.reasoning_tokens: int | None = None


class HTTPAdapter(Adapter):
    # Finish reasons that mean the provider's filter stopped the reply.
    filtered_finishes: frozenset[str] = frozenset()

    def __init__(
        self,
        *,
        http: httpx.AsyncClient | HTTPPool,
        base_url: str,
        api_key: str = "",
        options: Mapping[str, Any] | None = None,
    ):
        self.http = http
        self.base_url = base_url
        self.api_key = api_key
        self.options = dict(options or {})
        self._headers = self.headers()
        self._urls: dict[str, httpx.URL] = {}

    # --- what each protocol defines ---
    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    @abstractmethod
    def url(self, request: LLMRequest, *, stream: bool) -> str: ...

    @abstractmethod
    def body(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]: ...

    @abstractmethod
    def parse(self, data: Any) -> tuple[str, int, int, str]:
        """(text, input tokens, output tokens, finish reason) from a complete reply."""

    @abstractmethod
    def on_event(self, state: StreamState, event: str, data: Any) -> str:
        """Fold one server-sent event into ``state``; return the text delta ('' if none)."""

    def details(self, data: Any) -> tuple[str, int | None]:
        """(model snapshot, reasoning tokens) a complete reply reports: ("", None) when it
        reports neither."""
        return "", None

    @classmethod
    def quota_exhausted(
        cls,
        message: str,
        error_type: str,
        code: str,
        hint: float | None,
        headers: Mapping[str, str],
    ) -> bool:
        """Whether a 429 says billing or quota is exhausted (waiting will not pass it; a
        rate limit will): ``errors.from_response`` asks with the error body's fields, the
        wait hint and the headers. Every protocol reads OpenAI's word for it,
        ``insufficient_quota`` in the type or code (its rate-limit messages may link to
        billing pages, so not the text); a provider adds its own signs."""
        return "insufficient_quota" in (error_type, code)

    # --- shared ---
    def _url(self, request: LLMRequest, *, stream: bool) -> httpx.URL:
        """``url`` parsed once per distinct URL (httpx parses a string on every request)."""
        text = self.url(request, stream=stream)
        parsed = self._urls.get(text)
        if parsed is None:
            if len(self._urls) >= 256:  # a connection's models are few; bound it anyway
                self._urls.clear()
            parsed = self._urls[text] = httpx.URL(text)
        return parsed

    def _body(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]:
        body = self.body(request, stream=stream)
        if request.response_schema is not None:
            deep_merge(body, self.schema_params(request.response_schema))
        if request.reasoning is not None:
            deep_merge(body, self.reasoning_params(request.reasoning))
        if request.params:
            deep_merge(body, request.params)
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.perf_counter()
        try:
            async with self.http.stream(
                "POST",
                self._url(request, stream=False),
                json=self._body(request, stream=False),
                headers=self._headers,
            ) as response:
                raw = await read_capped(response, reply_byte_cap())
        except httpx.TransportError as exc:
            raise errors.from_transport(exc) from exc
        except UnicodeEncodeError as exc:
            raise errors.not_sendable() from exc
        # The read response (headers copied, body decoded) is built only for an error.
        if response.status_code >= 300:
            raise errors.from_response(
                read_response(response, raw),
                quota_exhausted=self.quota_exhausted,
                secret=self.api_key,
            )
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.malformed(read_response(response, raw).text, "not JSON") from exc
        try:
            text, input_tokens, output_tokens, finish = self.parse(data)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            shape = f"unexpected shape ({exc!r})"
            raise errors.malformed(read_response(response, raw).text, shape) from exc
        if len(text) > reply_char_cap(request):
            raise errors.reply_too_long(reply_char_cap(request))
        model_version, reasoning_tokens = reported(self, data)
        return LLMResponse(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            finish_reason=finish,
            latency_s=time.perf_counter() - started,
            raw=data,
            model_version=model_version,
            reasoning_tokens=reasoning_tokens,
        )

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamItem, None]:
        started = time.perf_counter()
        state = StreamState()
        cap = reply_char_cap(request)
        try:
            async with self._open_stream(request) as response:
                async for event, data in sse_events(response):
                    delta = self._fold(state, event, data, cap)
                    if delta:
                        yield delta
        except httpx.TransportError as exc:
            raise errors.from_transport(exc) from exc
        except UnicodeEncodeError as exc:
            raise errors.not_sendable() from exc
        yield self._streamed(state, started)

    async def stream_into(self, request: LLMRequest, on_text: Callable[[str], None]) -> LLMResponse:
        """``stream`` in one loop: the events of each chunk of the body are parsed together,
        and their text goes to ``on_text`` as one delta (a chunk often holds several)."""
        started = time.perf_counter()
        state = StreamState()
        cap = reply_char_cap(request)
        try:
            async with self._open_stream(request) as response:
                parser = SSEParser(reply_byte_cap())
                chunks = response.aiter_bytes()
                async for chunk in chunks:
                    events = parser.feed(chunk)
                    if parser.done:
                        await drain(chunks)
                    self._deliver(state, events, cap, on_text)
                    if parser.done:
                        break
                else:
                    self._deliver(state, parser.close(), cap, on_text)
        except httpx.TransportError as exc:
            raise errors.from_transport(exc) from exc
        except UnicodeEncodeError as exc:
            raise errors.not_sendable() from exc
        return self._streamed(state, started)

    @contextlib.asynccontextmanager
    async def _open_stream(self, request: LLMRequest) -> AsyncIterator[httpx.Response]:
        """The streamed call's response, once its status says it streams (else its error)."""
        async with self.http.stream(
            "POST",
            self._url(request, stream=True),
            json=self._body(request, stream=True),
            headers=self._headers,
        ) as response:
            if response.status_code >= 300:
                raw = await read_capped(response, reply_byte_cap())
                raise errors.from_response(
                    read_response(response, raw),
                    quota_exhausted=self.quota_exhausted,
                    secret=self.api_key,
                )
            yield response

    def _deliver(
        self,
        state: StreamState,
        events: list[tuple[str, Any]],
        cap: int,
        on_text: Callable[[str], None],
    ) -> None:
        deltas = [d for event, data in events if (d := self._fold(state, event, data, cap))]
        if deltas:
            on_text(deltas[0] if len(deltas) == 1 else "".join(deltas))

    def _fold(self, state: StreamState, event: str, data: Any, cap: int) -> str:
        """One event into ``state`` (its text kept, within ``cap`` characters); its delta."""
        state.raw_events += 1
        try:
            delta = self.on_event(state, event, data)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise errors.malformed(json.dumps(data), f"bad event ({exc!r})") from exc
        if delta:
            state.chars += len(delta)
            if state.chars > cap:
                raise errors.reply_too_long(cap)
            state.parts.append(delta)
        return delta

    def _streamed(self, state: StreamState, started: float) -> LLMResponse:
        """The reply of a stream that ended; an error if it ended early or was filtered."""
        if not state.finished:
            raise errors.malformed("".join(state.parts), "the stream ended before its last event")
        if state.finish_reason in self.filtered_finishes and not state.parts:
            raise errors.content_filtered(state.finish_reason)
        return LLMResponse(
            text="".join(state.parts),
            input_tokens=state.input_tokens,
            output_tokens=state.output_tokens,
            finish_reason=state.finish_reason,
            latency_s=time.perf_counter() - started,
            model_version=state.model_version[:200],
            reasoning_tokens=state.reasoning_tokens,
        )


def reported(adapter: HTTPAdapter, data: Any) -> tuple[str, int | None]:
    """``adapter.details`` of a reply, or ("", None) when the reply's shape says neither
    (they are what a card reports, never a reason to refuse a reply)."""
    try:
        model_version, reasoning_tokens = adapter.details(data)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return "", None
    return str(model_version or "")[:200], _int_or_none(reasoning_tokens)


def _int_or_none(value: Any) -> int | None:
    """A count a reply reports, or None when it is not a count (negative, not finite, not a
    number): it is reported, never a reason to lose the reply or to fail its write."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return min(int(value), INT_MAX) if value >= 0 else None


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """Server-sent events as ``(event name, parsed JSON data)``; stops at ``[DONE]``."""
    parser = SSEParser(reply_byte_cap())
    chunks = response.aiter_bytes()
    async for chunk in chunks:
        for item in parser.feed(chunk):
            yield item
        if parser.done:
            await drain(chunks)
            return
    for item in parser.close():
        yield item


async def drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a finished stream's body, so that its connection can serve the
    next call (a response closed before its end closes its connection). Best effort: the
    reply is complete at ``[DONE]``, so a body that goes on past ``DRAIN_BYTES``, stalls
    past ``DRAIN_S`` or breaks only costs the connection, never the reply or a retry."""
    left = DRAIN_BYTES
    try:
        async with asyncio.timeout(DRAIN_S):
            async for rest in chunks:
                left -= len(rest)
                if left < 0:
                    return
    except (TimeoutError, httpx.HTTPError):
        return
