"""One client per provider connection: a shared ``httpx.AsyncClient`` (pooling, timeouts,
limits), a concurrency cap, an optional requests-per-minute limit that slows down when the
provider answers 429, and the retry policy around every call.

``HTTP_ADAPTERS`` and ``BATCHES`` are the registries of the kinds that go over HTTP and of
those with a batch API; each class comes from its provider's module."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from evalplatform.providers.llm import errors
from evalplatform.providers.llm.anthropic import AnthropicAdapter, AnthropicBatches
from evalplatform.providers.llm.base import Adapter, HTTPAdapter, HTTPPool, StreamItem
from evalplatform.providers.llm.batch import Batches, BatchLimits
from evalplatform.providers.llm.gemini import GeminiAdapter, GeminiBatches
from evalplatform.providers.llm.mock import MockAdapter, MockSettings
from evalplatform.providers.llm.openai import OpenAIAdapter, OpenAIBatches
from evalplatform.providers.llm.retry import Attempts, RetryPolicy, with_retries
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError

BATCHES: dict[str, type[Batches]] = {
    "openai": OpenAIBatches,
    "anthropic": AnthropicBatches,
    "gemini": GeminiBatches,
}
HTTP_ADAPTERS: dict[str, type[OpenAIAdapter | AnthropicAdapter | GeminiAdapter]] = {
    "openai": OpenAIAdapter,
    "anthropic": AnthropicAdapter,
    "gemini": GeminiAdapter,
}


class RateLimiter:
    """Spaces request starts ``60 / rpm`` seconds apart. A 429 doubles the spacing (up to 16 times);
    each success takes a tenth of the extra back off."""

    def __init__(
        self,
        requests_per_minute: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.base_interval = 60.0 / requests_per_minute
        self.interval = self.base_interval
        self.clock = clock
        self.sleep = sleep
        self._next_at = 0.0
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            now = self.clock()
            start = max(now, self._next_at)
            self._next_at = start + self.interval
        if start > now:
            await self.sleep(start - now)

    def rate_limited(self) -> None:
        self.interval = min(self.interval * 2, self.base_interval * 16)

    def succeeded(self) -> None:
        self.interval = max(
            self.base_interval, self.interval - (self.interval - self.base_interval) / 10
        )


@dataclass
class CallResult:
    """The reply with the attempts it took. ``total_s``: the time across all of them, the
    failed attempts and the waits before retrying included (the reply's own ``latency_s``
    is the last attempt's)."""

    response: LLMResponse
    attempts: int
    errors: list[ProviderError]
    total_s: float = 0.0

    @classmethod
    def of(cls, response: LLMResponse, attempts: Attempts) -> CallResult:
        return cls(
            response,
            attempts.count,
            attempts.errors or [],
            attempts.failed_s + attempts.waited_s + response.latency_s,
        )


class ProviderClient:
    def __init__(
        self,
        *,
        kind: str,
        base_url: str = "",
        api_key: str = "",
        max_concurrency: int = 8,
        requests_per_minute: float | None = None,
        timeout_s: float = 120.0,
        options: Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.kind = kind
        # Every attempt has this total deadline (httpx's timeouts are per read: a server
        # trickling a byte at a time would hold a call for ever).
        self.deadline_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self.limiter = (
            RateLimiter(requests_per_minute, clock=clock, sleep=self.retry.sleep)
            if requests_per_minute
            else None
        )
        self.http: HTTPPool | None = None
        self._secret = api_key  # cut out of every error this client raises
        options = dict(options or {})
        self.adapter: Adapter
        if kind == "mock":
            self.adapter = MockAdapter(MockSettings.from_options(options), sleep=self.retry.sleep)
        elif kind in HTTP_ADAPTERS:
            self.http = HTTPPool(
                max_connections=max_concurrency,
                timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
                transport=transport,
            )
            self.adapter = HTTP_ADAPTERS[kind](
                http=self.http, base_url=base_url, api_key=api_key, options=options
            )
        else:
            raise ValueError(f"Unknown provider kind {kind!r}.")

    @classmethod
    def for_connection(cls, connection: Any, **overrides: Any) -> ProviderClient:
        """A client for a ``ProviderConnection`` (decrypts its key; nothing is logged)."""
        settings: dict[str, Any] = {
            "kind": connection.kind,
            "base_url": connection.effective_base_url,
            "api_key": connection.get_api_key(),
            "max_concurrency": connection.max_concurrency,
            "requests_per_minute": connection.requests_per_minute,
            "timeout_s": connection.timeout_s,
            "options": {"max_tokens_param": connection.max_tokens_param, **connection.options},
        }
        return cls(**(settings | overrides))

    def batches(self, limits: BatchLimits | None = None) -> Batches:
        """The provider's batch API over this client (``limits`` override the provider's)."""
        if not isinstance(self.adapter, HTTPAdapter):
            raise ProviderError(
                "The mock kind has no provider batch API.",
                kind="bad_request",
                retryable=False,
            )
        return BATCHES[self.kind](self.adapter, limits)

    async def __aenter__(self) -> ProviderClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()

    def _past_deadline(self) -> ProviderError:
        return ProviderError(
            f"Timed out: no complete reply within {self.deadline_s:g} s",
            kind="timeout",
            retryable=True,
        )

    async def _once(
        self, request: LLMRequest, on_text: Callable[[str], None] | None = None
    ) -> LLMResponse:
        """One attempt; with ``on_text``, the reply streams through it."""
        # The slot is held for the call only, never while waiting to retry.
        async with self._semaphore:
            if self.limiter is not None:
                await self.limiter.acquire()
            try:
                try:
                    async with asyncio.timeout(self.deadline_s):
                        if on_text is None:
                            response = await self.adapter.complete(request)
                        else:
                            response = await self.adapter.stream_into(request, on_text)
                except TimeoutError as exc:
                    raise self._past_deadline() from exc
            except ProviderError as error:
                errors.redact(error, self._secret)
                if error.kind == "rate_limit" and self.limiter is not None:
                    self.limiter.rate_limited()
                raise
        if self.limiter is not None:
            self.limiter.succeeded()
        return response

    async def complete(
        self, request: LLMRequest, *, retry: RetryPolicy | None = None
    ) -> CallResult:
        """The reply, with the attempts it took; raises the last ``ProviderError``."""
        attempts = Attempts()
        try:
            response = await with_retries(
                lambda: self._once(request), retry or self.retry, attempts=attempts
            )
        except ProviderError as error:
            error.attempts = attempts.count
            raise
        return CallResult.of(response, attempts)

    async def complete_streaming(
        self,
        request: LLMRequest,
        on_text: Callable[[str], None],
        *,
        on_attempt: Callable[[], None] | None = None,
        retry: RetryPolicy | None = None,
    ) -> CallResult:
        """Like ``complete``, but the reply streams through ``on_text`` as it arrives. Any
        failure, even part-way through the text, retries the whole call by the schedule;
        ``on_attempt`` runs before each attempt (the text starts again from empty)."""

        async def attempt() -> LLMResponse:
            if on_attempt is not None:
                on_attempt()
            return await self._once(request, on_text)

        attempts = Attempts()
        try:
            response = await with_retries(attempt, retry or self.retry, attempts=attempts)
        except ProviderError as error:
            error.attempts = attempts.count
            raise
        return CallResult.of(response, attempts)

    async def stream(
        self, request: LLMRequest, *, retry: RetryPolicy | None = None
    ) -> AsyncGenerator[StreamItem, None]:
        """Text deltas, then the ``LLMResponse``. A failure before the first delta is retried
        like ``complete``; once text has arrived a failure is raised to the caller."""
        policy = retry or self.retry
        retry_number = 0
        while True:
            started = False
            try:
                async with self._semaphore:
                    if self.limiter is not None:
                        await self.limiter.acquire()
                    # The deadline runs while this task reads the stream (its consumer's
                    # work between items is synchronous).
                    try:
                        async with (
                            asyncio.timeout(self.deadline_s),
                            contextlib.aclosing(self.adapter.stream(request)) as items,
                        ):
                            async for item in items:
                                started = True
                                yield item
                    except TimeoutError as exc:
                        raise self._past_deadline() from exc
                return
            except ProviderError as error:
                errors.redact(error, self._secret)
                if error.kind == "rate_limit" and self.limiter is not None:
                    self.limiter.rate_limited()
                if started or not error.retryable or retry_number >= policy.max_retries:
                    raise
                await policy.sleep(policy.delay(retry_number, error))
                retry_number += 1
