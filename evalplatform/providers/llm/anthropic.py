"""Anthropic: the Messages adapter (its words for reasoning, response schemas and images, its
public base URL, its quota 429s) and Message Batches (limits included)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from typing import IO, Any
from urllib.parse import urlsplit

from evalplatform.providers.llm import batch, errors
from evalplatform.providers.llm.base import HTTPAdapter, StreamState, join_url
from evalplatform.providers.llm.batch import (
    Batches,
    BatchHandle,
    BatchLimits,
    BatchResult,
    BatchStatus,
    Chunk,
    file_chunks,
    json_line,
)
from evalplatform.providers.llm.types import LLMRequest, ProviderError, Reasoning, ResponseSchema

API_VERSION = "2023-06-01"
# Anthropic requires max_tokens; this is used when the request leaves it open.
DEFAULT_MAX_TOKENS = 4096
# Thinking budgets for a request that names an effort and no budget (Anthropic's minimum
# budget is 1,024 tokens).
EFFORT_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}


class AnthropicAdapter(HTTPAdapter):
    protocol = "anthropic"
    default_base_url = "https://api.anthropic.com"
    filtered_finishes = frozenset({"refusal"})
    structured_output = True
    reserved_fields = frozenset(
        {"model", "messages", "system", "stream", "max_tokens", "temperature"}
    )
    own_family = "anthropic"

    @classmethod
    def schema_params(cls, schema: ResponseSchema) -> dict[str, Any]:
        """Forced tool use: the one tool's input is the reply (``parse`` reads it back)."""
        return {
            "tools": [
                {
                    "name": schema.name,
                    "description": f"Record the {schema.name}.",
                    "input_schema": dict(schema.schema),
                }
            ],
            "tool_choice": {"type": "tool", "name": schema.name},
        }

    @classmethod
    def reasoning_params(cls, reasoning: Reasoning) -> dict[str, Any]:
        """``thinking``: enabled with a token budget (the budget asked for, else one by the
        effort), or disabled."""
        if not reasoning.enabled:
            return {"thinking": {"type": "disabled"}}
        budget = reasoning.budget_tokens or EFFORT_BUDGETS.get(reasoning.effort or "", 8192)
        return {"thinking": {"type": "enabled", "budget_tokens": budget}}

    @classmethod
    def reasoning_setting(cls, params: Mapping[str, Any]) -> Any:
        """``thinking``, e.g. ``{"type": "enabled", "budget_tokens": 2048}``."""
        return params.get("thinking")

    @classmethod
    def reasoning_in(cls, params: Mapping[str, Any]) -> Reasoning | None:
        setting = cls.reasoning_setting(params)
        if setting is None:
            return None
        if isinstance(setting, Mapping):
            if cls.is_off(setting.get("type", "enabled")):
                return Reasoning(enabled=False)
            budget = setting.get("budget_tokens")
            budget = budget if isinstance(budget, int) and not isinstance(budget, bool) else None
            return Reasoning(enabled=True, budget_tokens=budget)
        return Reasoning(enabled=not cls.is_off(setting))

    @classmethod
    def quota_exhausted(
        cls,
        message: str,
        error_type: str,
        code: str,
        hint: float | None,
        headers: Mapping[str, str],
    ) -> bool:
        """A spend-cap 429 carries no ``retry-after``; a rate-limit 429 does."""
        return (
            super().quota_exhausted(message, error_type, code, hint, headers)
            or "retry-after" not in headers
        )

    def headers(self) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "anthropic-version": API_VERSION,
            "x-api-key": self.api_key,
        }

    def url(self, request: LLMRequest, *, stream: bool) -> str:
        return join_url(self.base_url, "/v1", "/messages")

    def body(self, request: LLMRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": [
                *({"role": role, "content": text} for role, text in request.turns),
                {"role": "user", "content": self.user_content(request)},
            ],
        }
        if request.system:
            body["system"] = request.system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if stream:
            body["stream"] = True
        return body

    @staticmethod
    def user_content(request: LLMRequest) -> Any:
        """The final user message's content: its text, or image blocks, then the text."""
        if not request.images:
            return request.user
        blocks: list[dict[str, Any]] = [
            {"type": "image", "source": {"type": "url", "url": image.url}}
            if image.url
            else {
                "type": "image",
                "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
            }
            for image in request.images
        ]
        return [*blocks, {"type": "text", "text": request.user}]

    def parse(self, data: Any) -> tuple[str, int, int, str]:
        finish = data.get("stop_reason") or ""
        text = next((b["text"] for b in data["content"] if b.get("type") == "text"), "")
        tool = next((b for b in data["content"] if b.get("type") == "tool_use"), None)
        if tool is not None:  # a forced tool call (structured output): its input is the reply
            text = json.dumps(tool.get("input", {}))
        if finish == "refusal" and not text:
            raise errors.content_filtered("refusal")
        usage = data["usage"]
        return text, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)), finish

    def details(self, data: Any) -> tuple[str, int | None]:
        # Anthropic counts thinking in output_tokens and reports no count of its own.
        return data.get("model") or "", None

    def on_event(self, state: StreamState, event: str, data: Any) -> str:
        kind = data.get("type", event)
        if kind == "content_block_delta":
            delta = data["delta"]
            if delta.get("type") == "input_json_delta":  # a tool call's input, streamed
                return delta.get("partial_json", "")
            return delta.get("text", "") if delta.get("type") == "text_delta" else ""
        if kind == "message_start":
            if isinstance(data["message"].get("model"), str):
                state.model_version = data["message"]["model"]
            usage = data["message"].get("usage") or {}
            state.input_tokens = int(usage.get("input_tokens", 0))
            state.output_tokens = int(usage.get("output_tokens", 0))
        elif kind == "message_stop":
            state.finished = True
        elif kind == "message_delta":
            state.finish_reason = (data.get("delta") or {}).get("stop_reason") or ""
            usage = data.get("usage") or {}
            if "output_tokens" in usage:
                state.output_tokens = int(usage["output_tokens"])
        elif kind == "error":
            error = data.get("error") or {}
            error_type = error.get("type", "")
            raise ProviderError(
                f"Stream error {error_type}: {error.get('message', '')}",
                kind="overloaded" if error_type == "overloaded_error" else "server",
                retryable=error_type in {"overloaded_error", "api_error", "rate_limit_error"},
            )
        return ""


class AnthropicBatches(Batches):
    limits = BatchLimits(100_000, 256 * 1024 * 1024)

    def _url(self, path: str = "") -> str:
        return join_url(self.adapter.base_url, "/v1", "/messages/batches" + path)

    def new_chunk(self, display_name: str, group: str) -> Chunk:
        return Chunk(prefix=b'{"requests":[', separator=b",", suffix=b"]}")

    def line(self, custom_id: str, request: LLMRequest) -> bytes:
        return json_line(
            {"custom_id": custom_id, "params": self.adapter._body(request, stream=False)}
        )

    async def create(self, body: IO[bytes], chunk: Chunk, group: str, name: str) -> BatchHandle:
        data = await self._json(
            "POST",
            self._url(),
            content=file_chunks(body),
            headers={"content-length": str(chunk.size)},
        )
        return BatchHandle(self.protocol, data["id"], chunk.count, chunk.size)

    def _status(self, data: dict[str, Any]) -> BatchStatus:
        counts = data.get("request_counts") or {}
        raw_state = data["processing_status"]
        # Only "ended" is an end; anything unknown is still in progress.
        state = {"ended": "completed", "canceling": "cancelling"}.get(raw_state, "in_progress")
        total = sum(int(v) for v in counts.values())
        if raw_state == "ended" and data.get("cancel_initiated_at"):
            state = "cancelled"
        elif raw_state == "ended" and int(counts.get("expired", 0)):
            # The batch ran out of time (24 h): what finished is kept, the rest expired.
            state = "expired"
        return BatchStatus(
            state=state,
            provider_state=raw_state,
            total=total,
            succeeded=int(counts.get("succeeded", 0)),
            failed=sum(int(counts.get(k, 0)) for k in ("errored", "canceled", "expired")),
            output_refs={"results_url": data["results_url"]} if data.get("results_url") else {},
            raw=data,
        )

    async def poll(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._json("GET", self._url(f"/{handle.remote_id}")))

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._json("POST", self._url(f"/{handle.remote_id}/cancel")))

    async def find(
        self, name: str, *, request_count: int, created_after: float, exclude: set[str]
    ) -> list[BatchHandle]:
        # Message batches keep no name: match the request count and the creation time.
        found = []
        params: dict[str, Any] = {"limit": batch.FIND_PAGE_SIZE}
        for _ in range(batch.FIND_PAGES):
            listed = await self._json("GET", self._url(), params=params)
            data = listed.get("data") or []
            oldest = None
            for b in data:
                try:
                    created = datetime.fromisoformat(str(b["created_at"]).replace("Z", "+00:00"))
                except (KeyError, ValueError):
                    continue
                oldest = created.timestamp()
                total = sum(int(v) for v in (b.get("request_counts") or {}).values())
                if (
                    b["id"] not in exclude
                    and total == request_count
                    and created.timestamp() >= created_after - batch.CLOCK_SKEW_S
                ):
                    found.append(BatchHandle(self.protocol, b["id"], total, 0))
            older = oldest is not None and oldest < created_after - batch.CLOCK_SKEW_S
            if not listed.get("has_more") or not data or older:
                break
            params["after_id"] = listed.get("last_id") or data[-1]["id"]
        return found

    async def _results(
        self, handle: BatchHandle, status: BatchStatus
    ) -> AsyncIterator[BatchResult]:
        # The key goes with the request: follow results_url only on the configured host.
        own = self._url(f"/{handle.remote_id}/results")
        given = status.output_refs.get("results_url", "")
        url = given if given and urlsplit(given)[:2] == urlsplit(own)[:2] else own
        async for line in self._lines(url):
            custom_id = str(line.get("custom_id"))
            result = line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                yield self._result(custom_id, result.get("message"))
            elif kind == "errored":
                error = (result.get("error") or {}).get("error") or {}
                error_type = str(error.get("type", "api_error"))
                retry = error_type in {"api_error", "overloaded_error", "rate_limit_error"}
                yield self._failure(
                    custom_id,
                    str(error.get("message", error_type)),
                    "server" if retry else "bad_request",
                    result,
                )
            else:
                yield self._failure(
                    custom_id,
                    f"Request {kind}.",
                    "cancelled" if kind == "canceled" else "expired",
                    result,
                )
