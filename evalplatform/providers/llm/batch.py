"""The batch interface each provider's ``Batches`` implements, and what they share.

``submit`` takes a stream of ``(custom_id, LLMRequest)`` and writes each provider body into a
spooled temporary file (memory up to 8 MB, then disk), so a million-line batch is never held
in memory; a batch that would pass a provider's limits is split, and ``submit`` returns one
``BatchHandle`` per provider batch. ``poll`` gives a ``BatchStatus`` normalized across
providers; ``results`` yields ``BatchResult``s (a completion or a ``ProviderError``) by
``custom_id``; ``cancel`` asks the provider to stop.

Normalized states: validating, in_progress, finalizing, completed, failed, expired,
cancelling, cancelled (``done`` for the last four and for completed).

Each provider's module holds its ``Batches`` (its wire, its states, its ``limits``); this
module holds the interface, the chunking and what their ``find`` shares (``CLOCK_SKEW_S``,
``FIND_PAGES``, ``FIND_PAGE_SIZE``: read as ``batch.NAME`` at call time, so a test may
patch them here).
"""

from __future__ import annotations

import json
import tempfile
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

import httpx

from evalplatform.providers.llm import errors
from evalplatform.providers.llm.base import HTTPAdapter, reported
from evalplatform.providers.llm.types import LLMRequest, LLMResponse, ProviderError

SPOOL_BYTES = 8 * 1024 * 1024
DONE_STATES = {"completed", "failed", "expired", "cancelled"}
# How far the provider's clock may be from ours when matching a batch by creation time.
CLOCK_SKEW_S = 120
# How many pages of recent batches ``find`` reads at most, of how many each.
FIND_PAGES = 20
FIND_PAGE_SIZE = 100


@dataclass(frozen=True)
class BatchLimits:
    max_requests: int
    max_bytes: int


def json_line(data: Any) -> bytes:
    """One request of a batch body: compact JSON, UTF-8."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass
class BatchHandle:
    """What the batch registry persists to poll and read a provider batch after a restart."""

    protocol: str
    remote_id: str
    request_count: int
    submitted_bytes: int
    model: str = ""
    input_file_id: str = ""
    # Gemini returns inline results in input order, without keys: keep the order here.
    custom_ids: list[str] = field(default_factory=list)


@dataclass
class BatchStatus:
    state: str
    provider_state: str
    total: int
    succeeded: int
    failed: int
    output_refs: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def done(self) -> bool:
        return self.state in DONE_STATES


@dataclass
class BatchResult:
    custom_id: str
    response: LLMResponse | None = None
    error: ProviderError | None = None


class BatchSubmitError(ProviderError):
    """A submission failed after earlier parts were accepted: ``handles`` lists those."""

    def __init__(self, error: ProviderError, handles: list[BatchHandle]):
        super().__init__(
            error.message,
            kind=error.kind,
            retryable=error.retryable,
            status=error.status,
            retry_after=error.retry_after,
            raw_text=error.raw_text,
        )
        self.handles = handles


class Chunk:
    """One provider batch being written: a spooled file with its counts."""

    def __init__(self, prefix: bytes = b"", separator: bytes = b"\n", suffix: bytes = b""):
        self.file: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115
        self.separator = separator
        self.suffix = suffix
        self.count = 0
        self.size = len(prefix) + len(suffix)
        self.custom_ids: list[str] = []
        self.file.write(prefix)

    def fits(self, line: bytes, limits: BatchLimits) -> bool:
        extra = len(line) + (len(self.separator) if self.count else 0)
        return self.count < limits.max_requests and self.size + extra <= limits.max_bytes

    def add(self, custom_id: str, line: bytes) -> None:
        if self.count:
            self.file.write(self.separator)
            self.size += len(self.separator)
        self.file.write(line)
        self.size += len(line)
        self.count += 1
        self.custom_ids.append(custom_id)

    def finish(self) -> IO[bytes]:
        self.file.write(self.suffix)
        self.file.seek(0)
        return self.file


async def file_chunks(handle: IO[bytes], size: int = 1024 * 1024) -> AsyncIterator[bytes]:
    while piece := handle.read(size):
        yield piece


class Batches(ABC):
    """The batch side of one HTTP adapter (same client, base URL, key and options)."""

    # The provider's limits on one batch, set by each provider's class (a larger submission
    # is split); an instance may be given others.
    limits: BatchLimits

    def __init__(self, adapter: HTTPAdapter, limits: BatchLimits | None = None):
        self.adapter = adapter
        self.protocol = adapter.protocol
        self.limits = limits or type(self).limits

    # --- shared plumbing ------------------------------------------------------------------------
    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        headers = {**self.adapter._headers, **kwargs.pop("headers", {})}
        if "files" in kwargs:  # multipart sets its own content type (with the boundary)
            headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        try:
            response = await self.adapter.http.request(method, url, headers=headers, **kwargs)
        except httpx.TransportError as exc:
            raise errors.from_transport(exc) from exc
        if response.status_code >= 300:
            raise errors.from_response(
                response, quota_exhausted=self.adapter.quota_exhausted, secret=self.adapter.api_key
            )
        return response

    async def _json(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._request(method, url, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise errors.malformed(response.text, "not JSON") from exc

    async def _lines(self, url: str) -> AsyncIterator[dict[str, Any]]:
        try:
            async with self.adapter.http.stream("GET", url, headers=self.adapter._headers) as resp:
                if resp.status_code >= 300:
                    await resp.aread()
                    raise errors.from_response(
                        resp,
                        quota_exhausted=self.adapter.quota_exhausted,
                        secret=self.adapter.api_key,
                    )
                async for line in resp.aiter_lines():
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except ValueError as exc:
                            raise errors.malformed(line, "a result line is not JSON") from exc
        except httpx.TransportError as exc:
            raise errors.from_transport(exc) from exc

    def _result(self, custom_id: str, body: Any) -> BatchResult:
        try:
            text, input_tokens, output_tokens, finish = self.adapter.parse(body)
        except ProviderError as error:
            return BatchResult(custom_id, error=error)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            return BatchResult(custom_id, error=errors.malformed(json.dumps(body), repr(exc)))
        model_version, reasoning_tokens = reported(self.adapter, body)
        response = LLMResponse(
            text, input_tokens, output_tokens, finish, 0.0, body, model_version, reasoning_tokens
        )
        return BatchResult(custom_id, response=response)

    @staticmethod
    def _failure(
        custom_id: str,
        message: str,
        kind: str = "batch_error",
        raw: Any = None,
        status: int | None = None,
    ) -> BatchResult:
        retryable = kind in {
            "expired",
            "cancelled",
            "missing",
            "rate_limit",
            "server",
            "overloaded",
        }
        error = ProviderError(
            message,
            kind=kind,
            retryable=retryable,
            status=status,
            raw_text=json.dumps(raw) if raw is not None else "",
        )
        return BatchResult(custom_id, error=error)

    @classmethod
    def _http_failure(
        cls, custom_id: str, message: str, status: int | None, raw: Any
    ) -> BatchResult:
        """A failed line that carries an HTTP status: 429 and 5xx may be re-submitted."""
        retry = status is not None and (status == 429 or status >= 500)
        return cls._failure(custom_id, message, "server" if retry else "bad_request", raw, status)

    async def submit(
        self,
        items: Iterable[tuple[str, LLMRequest]],
        *,
        display_name: str = "batch",
        on_submitted: Callable[[BatchHandle], Awaitable[None] | None] | None = None,
    ) -> list[BatchHandle]:
        """Submit, splitting by the provider's limits and by ``group`` (Gemini: the model).

        ``on_submitted`` sees each handle as soon as the provider accepted it, so the batch
        registry can record it before the next one is sent. If a later submission fails,
        ``BatchSubmitError.handles`` lists the batches that were accepted.
        """
        handles: list[BatchHandle] = []
        chunks: dict[str, Chunk] = {}

        async def send(chunk: Chunk, group: str) -> None:
            handle = await self._send(chunk, group, display_name)
            handles.append(handle)
            if on_submitted is not None:
                maybe = on_submitted(handle)
                if maybe is not None:
                    await maybe

        try:
            for custom_id, request in items:
                group = self.group(request)
                line = self.line(custom_id, request)
                if not self.new_chunk(display_name, group).fits(line, self.limits):
                    raise ProviderError(
                        f"Request {custom_id} alone exceeds the batch size limit.",
                        kind="too_large",
                        retryable=False,
                    )
                chunk = chunks.get(group)
                if chunk is not None and not chunk.fits(line, self.limits):
                    del chunks[group]
                    await send(chunk, group)
                    chunk = None
                if chunk is None:
                    chunk = chunks[group] = self.new_chunk(display_name, group)
                chunk.add(custom_id, line)
            while chunks:
                group, chunk = chunks.popitem()
                await send(chunk, group)
        except ProviderError as error:
            if handles:
                raise BatchSubmitError(error, handles) from error
            raise
        finally:
            for chunk in chunks.values():
                chunk.file.close()
        return handles

    async def _send(self, chunk: Chunk, group: str, display_name: str) -> BatchHandle:
        with chunk.finish() as body:
            handle = await self.create(body, chunk, group, display_name)
        handle.request_count, handle.submitted_bytes = chunk.count, chunk.size
        handle.custom_ids = list(chunk.custom_ids)
        return handle

    async def results(self, handle: BatchHandle, status: BatchStatus) -> AsyncIterator[BatchResult]:
        """Every request's outcome once ``status.done``, in any order, each exactly once: a
        request the provider returned nothing for is a (re-submittable) failure."""
        expected = set(handle.custom_ids)
        seen: set[str] = set()
        async for result in self._results(handle, status):
            if result.custom_id in seen or (expected and result.custom_id not in expected):
                continue
            seen.add(result.custom_id)
            if result.error is not None:
                errors.redact(result.error, self.adapter.api_key)
            yield result
        for custom_id in handle.custom_ids:
            if custom_id not in seen:
                yield self._failure(
                    custom_id, f"No result returned (batch {status.state}).", "missing"
                )

    # --- per protocol -------------------------------------------------------------------------
    def group(self, request: LLMRequest) -> str:
        """What requests must share to go in one provider batch ("": any may)."""
        return ""

    @abstractmethod
    def new_chunk(self, display_name: str, group: str) -> Chunk: ...

    @abstractmethod
    def line(self, custom_id: str, request: LLMRequest) -> bytes: ...

    @abstractmethod
    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle: ...

    @abstractmethod
    async def poll(self, handle: BatchHandle) -> BatchStatus: ...

    @abstractmethod
    def _results(self, handle: BatchHandle, status: BatchStatus) -> AsyncIterator[BatchResult]:
        """The outcomes the provider reports."""

    @abstractmethod
    async def cancel(self, handle: BatchHandle) -> BatchStatus: ...

    @abstractmethod
    async def find(
        self, name: str, *, request_count: int, created_after: float, exclude: set[str]
    ) -> list[BatchHandle]:
        """Recent batches of this key that match a submission: by ``name`` where the protocol
        keeps one (OpenAI metadata, Gemini display name), else by ``request_count`` and a
        creation time after ``created_after`` (epoch seconds; Anthropic). ``exclude`` lists
        remote ids already accounted for. How a submission the platform could not record
        (a crash right after the provider accepted it) is found again instead of repeated."""
